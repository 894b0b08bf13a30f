import Bucket
import BucketTesting
import Digests
import Foundation
import ManifestFormat
import PhotolalaCore
import Queue
import RestoreFiles
import Synchronization
import Testing
import Mirror

/// The mirror actor in-process: objects and a catalog put in the in-memory bucket as a
/// phone puts them, a real folder on disk, the real queue database.
@Suite(.serialized) struct MirrorStageTests {
    /// The world, the mirror's folder, and a service on it.
    final class Mirrored: Sendable {
        let world: StageWorld
        let folder: String
        let audit = CollectedAudit()
        let feed = BandwidthFeed()
        let user = OpenGate()

        init(skipsWaitsUpTo: TimeInterval = 10) throws {
            world = try StageWorld(skipsWaits: false, skipsWaitsUpTo: skipsWaitsUpTo)
            folder = world.dir + "/mirror"
        }

        func settings(_ change: (inout Settings.Mirror) -> Void = { _ in }) -> Settings {
            var s = Settings()
            s.daemon.stateDir = world.dir
            s.watch.folders = [world.dir + "/photos"]
            s.mirror.folder = folder
            s.mirror.minFree = .bytes(0)
            s.mirror.checkInterval = .seconds(60)
            s.mirror.listInterval = .seconds(3600)
            change(&s.mirror)
            return s
        }

        func service(_ change: (inout Settings.Mirror) -> Void = { _ in }, account: any StageGate = OpenGate()) -> MirrorService {
            MirrorService(context: world.context(audit: audit), bucket: world.session(), account: account, user: user, schedule: feed,
                          sha256: LocalSHA256Lookup(database: world.database), options: .init(settings(change)))
        }

        func status(_ service: MirrorService) async -> DaemonStatus.Mirror {
            var s = DaemonStatus()
            await service.contribute(to: &s)
            return s.mirror
        }

        /// An object as a phone puts it, and its catalog row (date, format).
        @discardableResult
        func phone(_ bytes: [UInt8], date: Int64?, format: String = "JPEG", contentType: String = "image/jpeg",
                   storageClass: String? = nil) -> MD5Value {
            let md5 = Hex.string(MD5.digest(bytes))
            world.bucket.store(world.photoKey(md5), bytes: bytes, contentType: contentType, storageClass: storageClass,
                               metadata: ["original-format": format])
            if let date { rows.withLock { $0.append("\(md5),\(bytes.count),\(md5),\(date),\(format)") } }
            return MD5Value(hex: md5)!
        }

        private let rows = Mutex<[String]>([])

        /// The catalog as the apps write it: the snapshot, then the pointer.
        func publish(without: Set<MD5Value> = []) {
            let lines = rows.withLock { $0 }.filter { line in !without.contains { line.contains($0.hex) } }
            let body = Array((["photo_head_md5,file_size,photo_md5,photo_date,format"] + lines).joined(separator: "\n").utf8) + [10]
            let md5 = Hex.string(MD5.digest(body))
            world.bucket.store("catalogs/\(world.userId)/.photolala.\(md5).csv", bytes: body, contentType: "text/csv")
            world.bucket.store("catalogs/\(world.userId)/.photolala.md5", bytes: Array(md5.utf8), contentType: "text/plain")
        }

        func files() -> [String: [UInt8]] {
            var out: [String: [UInt8]] = [:]
            let root = URL(fileURLWithPath: folder)
            guard let e = FileManager.default.enumerator(atPath: folder) else { return out }
            for case let path as String in e where !path.hasPrefix(".") {
                var isDir: ObjCBool = false
                if FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path, isDirectory: &isDir), !isDir.boolValue {
                    out[path] = Array(FileManager.default.contents(atPath: root.appendingPathComponent(path).path) ?? Data())
                }
            }
            return out
        }

        func mtime(_ path: String) -> Int64 {
            var st = stat()
            _ = stat(folder + "/" + path, &st)
            return Int64(st.st_mtim.tv_sec)
        }
    }

    static func name(_ date: Int64, _ md5: MD5Value, _ ext: String, whole: Bool = false) -> String {
        MirrorNaming.candidate(whole ? 1 : 0, seconds: date, md5: md5, ext: ext)
    }

    @Test func aPhonesPhotosArriveNamedDatedAndChecked() async throws {
        let m = try Mirrored()
        let a = StageWorld.bytes(3_000, seed: 1), b = StageWorld.bytes(4_000, seed: 2), video = StageWorld.bytes(9_000, seed: 3)
        let ma = m.phone(a, date: 1_650_000_000, format: "HEIF", contentType: "image/heif")
        let mb = m.phone(b, date: 1_660_000_000)
        let mv = m.phone(video, date: nil, format: "MP4", contentType: "video/mp4")
        m.publish()
        // A photo this NAS backed up itself: not copied with include = "others".
        let own = StageWorld.bytes(2_000, seed: 4)
        let mo = try await m.world.queue("own.jpg", own)
        m.world.bucket.store(m.world.photoKey(mo), bytes: own)

        let service = m.service()
        let running = Running { try await service.run() }
        // The copies are in place a moment before the pass that made them ends.
        try await m.world.waitUntil("three copies and the pass over") {
            let s = await m.status(service)
            return s.present == 3 && s.state == .idle && s.lastPassAt != nil
        }
        let files = m.files()
        let videoTime = Int64(m.world.bucket.object(m.world.photoKey(mv.hex))!.lastModified.timeIntervalSince1970)
        #expect(files == [Self.name(1_650_000_000, ma, "heic"): a, Self.name(1_660_000_000, mb, "jpg"): b,
                          Self.name(videoTime, mv, "mp4"): video])
        #expect(m.mtime(Self.name(1_650_000_000, ma, "heic")) == 1_650_000_000, "the photo's date is the file's time")
        var st = stat()
        _ = stat(m.folder + "/" + Self.name(1_660_000_000, mb, "jpg"), &st)
        #expect(st.st_mode & 0o7777 == 0o640)
        _ = stat(m.folder + "/2022", &st)
        #expect(st.st_mode & 0o7777 == 0o750)
        #expect(FileManager.default.fileExists(atPath: m.folder + "/" + MirrorNaming.marker))
        let s = await m.status(service)
        #expect(s.state == .idle && s.inAccount == 4 && s.copied == 3 && s.pending == 0 && s.lastPassAt != nil && s.nextCheckAt != nil)
        // The uploader learns each copy is in the account before ingest could see it.
        for md5 in [ma, mb, mv] {
            #expect(try await m.world.database.inventoryPresence(key: m.world.photoKey(md5.hex)) != .unknown)
        }
        await running.stop()

        // The same with include = "all": this NAS's own photo is copied too, and nothing else again.
        let gets = m.world.bucket.requests("GetObject", under: "photos/")
        let all = m.service { $0.include = .all }
        let again = Running { try await all.run() }
        try await m.world.waitUntil("the own photo copied") { await m.status(all).present == 4 }
        #expect(m.world.bucket.requests("GetObject", under: "photos/") == gets + 1)
        await again.stop()
    }

    @Test func anUnchangedPointerCostsOneRequestAndWritesNothing() async throws {
        let m = try Mirrored(skipsWaitsUpTo: 10)
        m.phone(StageWorld.bytes(1_000, seed: 1), date: 1_650_000_000)
        m.publish()
        let service = m.service()
        let running = Running { try await service.run() }
        try await m.world.waitUntil("the first pass") { await m.status(service).present == 1 }
        try await Task.sleep(for: .milliseconds(100))
        let before = m.world.bucket.requestLog.count
        let writes = try await m.world.database.read { try Int.fetchOne($0, sql: "SELECT total_changes()") }
        m.world.clock.advance(by: 61)
        try await m.world.waitUntil("a check") { m.world.bucket.requestLog.count > before }
        try await Task.sleep(for: .milliseconds(200))
        let log = m.world.bucket.requestLog.dropFirst(before)
        #expect(log.map(\.operation) == ["GetObject"] && log.first?.key.hasSuffix(".photolala.md5") == true)
        #expect(try await m.world.database.read { try Int.fetchOne($0, sql: "SELECT total_changes()") } == writes)
        // A new photo: the pointer changes, the new row is HEADed and fetched.
        let n = m.phone(StageWorld.bytes(1_500, seed: 2), date: 1_700_000_000)
        m.publish()
        m.world.clock.advance(by: 61)
        try await m.world.waitUntil("the new photo") { m.files()[Self.name(1_700_000_000, n, "jpg")] != nil }
        #expect(m.world.bucket.requests("ListObjectsV2") == 1, "between full passes, no listing")
        await running.stop()
    }

    @Test func aBodyThatIsNotItsKeyOrLongerThanListedIsRefused() async throws {
        let m = try Mirrored()
        let good = StageWorld.bytes(2_000, seed: 1)
        let forged = MD5Value(hex: Hex.string(MD5.digest(StageWorld.bytes(2_000, seed: 2))))!
        m.world.bucket.store(m.world.photoKey(forged.hex), bytes: good)
        let service = m.service()
        let running = Running { try await service.run() }
        try await m.world.waitUntil("the refusal") { await m.status(service).refused == 1 }
        #expect(m.files().isEmpty, "nothing under a final name")
        #expect(m.audit.of(.mirrorRefused).count == 1)
        #expect(try await m.world.database.mirrorEntry(forged)?.lastError?.contains("MD5") == true)
        await running.stop()

        // Longer than the listing said: the answer's size is refused before a byte is written.
        let long = StageWorld.bytes(5_000, seed: 3)
        let md5 = MD5Value(hex: Hex.string(MD5.digest(long)))!
        m.world.bucket.store(m.world.photoKey(md5.hex), bytes: long)
        let copy = MirrorCopy(database: m.world.database,
                              transfer: MirrorTransfer(session: m.world.session(), prefix: "photos/\(m.world.userId)/",
                                                       budget: MirrorService.budget, bandwidth: TokenBucket(bytesPerSecond: nil),
                                                       lanes: OpenFileLanes()),
                              writer: RestoreWriter(files: .init(owner: nil, mode: 0o640), folders: .init(owner: nil, mode: 0o750)),
                              root: m.folder, userId: m.world.userId)
        let listed = MirrorEntry(md5: md5, size: 4_000, modified: 1_700_000_000, state: .pending)
        guard case .refused(let why) = await copy.copy(listed, sha256: nil, now: { Date() }) else {
            Issue.record("not refused")
            return
        }
        #expect(why.contains("5000") && why.contains("4000"))
        #expect(!m.files().keys.contains { $0.contains(String(md5.hex.prefix(8))) })
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: m.folder).filter { $0.contains(".plmirror-") }
        #expect(leftovers.isEmpty, "the temporary file is gone too")
    }

    @Test func anUnstarKeepsOrTrashesTheCopyNeverDeletesIt() async throws {
        for rule in [Settings.Mirror.OnCloudDelete.keep, .trash] {
            let m = try Mirrored()
            let bytes = (0..<30).map { StageWorld.bytes(1_000 + $0, seed: $0) }
            let md5s = bytes.map { m.phone($0, date: 1_650_000_000) }
            m.publish()
            let service = m.service { $0.onCloudDelete = rule }
            let running = Running { try await service.run() }
            try await m.world.waitUntil("30 copies") { await m.status(service).present == 30 }
            // The app's unstar: the object and its row go.
            let gone = md5s[0]
            m.world.bucket.remove(m.world.photoKey(gone.hex))
            m.publish(without: [gone])
            m.world.clock.advance(by: 61)
            let path = Self.name(1_650_000_000, gone, "jpg")
            if rule == .keep {
                try await m.world.waitUntil("only here") { await m.status(service).onlyHere == 1 }
                #expect(m.files()[path] == bytes[0], "kept in place")
            } else {
                try await m.world.waitUntil("trashed") { await m.status(service).trashed == 1 }
                #expect(m.files()[path] == nil)
                #expect(FileManager.default.contents(atPath: m.folder + "/.trash/" + path).map(Array.init) == bytes[0])
                #expect(m.audit.of(.mirrorTrash).count == 1)
            }
            // An account deleted whole: a listing that lacks everything moves nothing.
            for md5 in md5s.dropFirst() { m.world.bucket.remove(m.world.photoKey(md5.hex)) }
            _ = await service.requestPass()
            try await m.world.waitUntil("the pass") { await m.status(service).onlyHere >= 29 }
            #expect(m.files().count == (rule == .keep ? 30 : 29), "no copy is ever deleted, nor trashed en masse")
            await running.stop()
        }
    }

    @Test func renamedMovedAndDeletedCopiesAreNotFetchedAgainUntilRefill() async throws {
        let m = try Mirrored()
        let bytes = (0..<3).map { StageWorld.bytes(2_000 + $0, seed: 10 + $0) }
        let md5s = bytes.map { m.phone($0, date: 1_650_000_000 + Int64($0.count)) }
        m.publish()
        let service = m.service()
        let running = Running { try await service.run() }
        try await m.world.waitUntil("three copies") { await m.status(service).present == 3 }
        let names = md5s.enumerated().map { Self.name(1_650_000_000 + Int64(bytes[$0.offset].count), $0.element, "jpg") }
        let fm = FileManager.default
        try fm.moveItem(atPath: m.folder + "/" + names[0], toPath: m.folder + "/renamed.jpg")
        try fm.createDirectory(atPath: m.folder + "/Holidays", withIntermediateDirectories: true)
        try fm.moveItem(atPath: m.folder + "/" + names[1], toPath: m.folder + "/Holidays/moved.jpg")
        try fm.removeItem(atPath: m.folder + "/" + names[2])
        let gets = m.world.bucket.requests("GetObject", under: "photos/")
        _ = await service.requestPass()
        try await m.world.waitUntil("the removal seen") { await m.status(service).removedHere == 1 }
        #expect(await m.status(service).present == 2, "renamed and moved copies are still here")
        #expect(m.world.bucket.requests("GetObject", under: "photos/") == gets, "nothing fetched again")
        #expect(try await m.world.database.mirrorEntry(md5s[1])?.path == "Holidays/moved.jpg")
        #expect(await service.refill(by: .caller(uid: 0)).ok)
        try await m.world.waitUntil("the refill") { m.files()[names[2]] != nil }
        #expect(m.world.bucket.requests("GetObject", under: "photos/") == gets + 1)
        #expect(m.audit.of(.mirrorRefill).first?.details["count"] == .int(1))
        await running.stop()
    }

    @Test func aFolderFilledByAnExportIsAdoptedWithoutAGet() async throws {
        let m = try Mirrored()
        let bytes = (0..<4).map { StageWorld.bytes(3_000 + $0, seed: 20 + $0) }
        let md5s = bytes.map { m.phone($0, date: 1_600_000_000) }
        m.publish()
        // What `restore --by-date --to FOLDER` leaves, before the mirror ever ran.
        for (b, md5) in zip(bytes, md5s) {
            let path = m.folder + "/" + Self.name(1_600_000_000, md5, "jpg")
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(b).write(to: URL(fileURLWithPath: path))
        }
        let service = m.service()
        let running = Running { try await service.run() }
        try await m.world.waitUntil("adopted") { await m.status(service).adopted == 4 }
        #expect(m.world.bucket.requests("GetObject", under: "photos/") == 0)
        #expect(m.files().count == 4)
        await running.stop()
    }

    @Test func moreFilesThanAChunkAreAdoptedOnceEachAndDecoysAreNot() async throws {
        let m = try Mirrored()
        let bytes = (0..<300).map { StageWorld.bytes(200 + $0 % 7, seed: 1_000 + $0) }
        let md5s = bytes.map { m.phone($0, date: 1_600_000_000) }
        m.publish()
        func put(_ relative: String, _ b: [UInt8]) throws {
            let path = m.folder + "/" + relative
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(b).write(to: URL(fileURLWithPath: path))
        }
        for (i, b) in bytes.enumerated() { try put("Old/\(i).jpg", b) }
        // The same bytes twice are one adoption; a file of an object's size with other bytes is none.
        for i in 0..<10 { try put("Copies/\(i).jpg", bytes[i]) }
        for i in 0..<5 { try put("Decoys/\(i).jpg", StageWorld.bytes(200 + i, seed: 9_000 + i)) }
        let service = m.service()
        let running = Running { try await service.run() }
        try await m.world.waitUntil("adopted") { await m.status(service).adopted == 300 }
        #expect(m.world.bucket.requests("GetObject", under: "photos/") == 0)
        let entries = try await m.world.database.mirrorEntries(md5s: md5s)
        #expect(entries.values.allSatisfy { $0.state == .adopted && $0.path != nil && !$0.path!.hasPrefix("Decoys/") })
        #expect(Set(entries.values.compactMap(\.path)).count == 300, "each object names one file")
        await running.stop()
    }

    @Test func archivedObjectsAreCountedThenAskedBackAndFetched() async throws {
        let m = try Mirrored(skipsWaitsUpTo: 10)
        let bytes = StageWorld.bytes(2_500, seed: 30)
        let md5 = m.phone(bytes, date: 1_650_000_000, storageClass: "GLACIER")
        m.publish()
        let plain = m.service()
        var running = Running { try await plain.run() }
        try await m.world.waitUntil("counted as archived") { await m.status(plain).archived == 1 }
        #expect(m.world.bucket.requests("RestoreObject") == 0 && m.files().isEmpty)
        await running.stop()

        let thawing = m.service { $0.thawArchived = true }
        running = Running { try await thawing.run() }
        try await m.world.waitUntil("asked back") { m.world.bucket.requests("RestoreObject") == 1 }
        m.world.bucket.finishRestore(m.world.photoKey(md5.hex))
        m.world.clock.advance(by: 61)
        try await m.world.waitUntil("fetched once readable") { m.files()[Self.name(1_650_000_000, md5, "jpg")] == bytes }
        #expect(m.world.bucket.requests("RestoreObject") == 1, "asked once")
        await running.stop()
    }

    @Test func itWaitsForTheAccountTheUserAndAMissingFolder() async throws {
        let m = try Mirrored()
        m.phone(StageWorld.bytes(1_000, seed: 40), date: 1_650_000_000)
        m.publish()
        let service = m.service()
        let running = Running { try await service.run() }
        try await m.world.waitUntil("one copy") { await m.status(service).present == 1 }
        // The volume goes away: the folder and its marker with it.
        try FileManager.default.moveItem(atPath: m.folder, toPath: m.folder + ".away")
        _ = await service.requestPass()
        try await m.world.waitUntil("paused for the folder") { await m.status(service).pauseReason == .folder }
        #expect(!FileManager.default.fileExists(atPath: m.folder), "never made again underneath")
        try FileManager.default.moveItem(atPath: m.folder + ".away", toPath: m.folder)
        m.world.clock.advance(by: 31)
        try await m.world.waitUntil("going on") { await m.status(service).state == .idle }
        await running.stop()
    }
}
