#if canImport(Glibc)
import Glibc
#endif
import Bucket
import BucketTesting
import Control
import Digests
import Foundation
import Logging
import ManifestFormat
import PhotolalaCore
import RestoreCtl
import Synchronization
import RestoreFiles
import Testing
import RestoreRelay

/// `restore --by-date` in-process: the daemon's side (`RestoreService` → `PhotoExport`)
/// against the in-memory bucket behind a real `BucketSession`, the command's side
/// (`ExportRun`) through a real control socket, writing real files.
@Suite struct PhotoExportTests {
    let clock = TestClock(skipsWaits: true)
    let bucket: InMemoryBucket
    let grants = FixedGrants(userId: "U", deviceId: "dev-1")
    let audit = RecordedAudit()
    let restore: RestoreService
    let dir: String

    /// What each object is, and where the export must put it.
    struct Photo {
        var bytes: [UInt8]
        var path: String
        var mtime: Int64
    }
    var photos: [Photo] = []

    static func md5(_ bytes: [UInt8]) -> String { Hex.string(MD5.digest(bytes)) }
    static func at(_ seconds: Int64) -> Date { Date(timeIntervalSince1970: TimeInterval(seconds)) }

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir + "/state", withIntermediateDirectories: true)
        bucket = InMemoryBucket(clock: clock)
        var options = RestoreService.Options(Settings())
        options.scratchDirectory = dir + "/state"
        let logger = Logger(label: "export-tests")
        restore = RestoreService(bucket: BucketSession(grants: grants, transport: bucket, clock: clock, logger: logger),
                                 options: options, clock: clock, logger: logger, audit: audit)

        func body(_ head: [UInt8], _ seed: Int) -> [UInt8] { head + (0..<(2000 + seed)).map { UInt8(truncatingIfNeeded: $0 &* (seed + 3)) } }
        // A phone's photo: the catalog says HEIF (the bytes' own JPEG magic is not asked).
        let phone = body([0xFF, 0xD8, 0xFF, 0xE1], 1)
        // The NAS's photo, its catalog date outside 1970–2099: its object's time.
        let nas = body([0xFF, 0xD8, 0xFF, 0xE0], 2)
        // A video (no row): its content type and original-format say .mov.
        let video = body([0, 0, 0, 20] + Array("ftypqt  ".utf8), 3)
        // No row, nothing in its headers: a PNG by its first bytes.
        let png = body([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], 4)
        // Nothing tells what it is.
        let blob = body(Array("no magic here".utf8), 5)
        bucket.store("photos/U/\(Self.md5(phone)).dat", bytes: phone, contentType: "image/jpeg", metadata: ["original-format": "JPEG"],
                     lastModified: Self.at(1_700_000_000))
        bucket.store("photos/U/\(Self.md5(nas)).dat", bytes: nas, contentType: "image/jpeg", lastModified: Self.at(1_600_000_000))
        bucket.store("photos/U/\(Self.md5(video)).dat", bytes: video, contentType: "video/quicktime", metadata: ["original-format": "MOV"],
                     lastModified: Self.at(1_500_000_000))
        bucket.store("photos/U/\(Self.md5(png)).dat", bytes: png, lastModified: Self.at(1_400_000_000))
        bucket.store("photos/U/\(Self.md5(blob)).dat", bytes: blob, metadata: ["original-format": "UNKNOWN"], lastModified: Self.at(1_300_000_000))
        photos = [
            Photo(bytes: phone, path: "2022/04/2022-04-15 05.20.00 \(Self.md5(phone).prefix(8)).heic", mtime: 1_650_000_000),
            Photo(bytes: nas, path: "2020/09/2020-09-13 12.26.40 \(Self.md5(nas).prefix(8)).jpg", mtime: 1_600_000_000),
            Photo(bytes: video, path: "2017/07/2017-07-14 02.40.00 \(Self.md5(video).prefix(8)).mov", mtime: 1_500_000_000),
            Photo(bytes: png, path: "2014/05/2014-05-13 16.53.20 \(Self.md5(png).prefix(8)).png", mtime: 1_400_000_000),
            Photo(bytes: blob, path: "2011/03/2011-03-13 07.06.40 \(Self.md5(blob).prefix(8)).bin", mtime: 1_300_000_000),
        ]
        publishCatalog([
            "h,\(phone.count),\(Self.md5(phone)),1650000000,HEIF",
            "h,\(nas.count),\(Self.md5(nas).uppercased()),4200000000,JPEG",
            "h,5,\(String(repeating: "e", count: 32)),1650000000,JPEG",   // a row whose object is gone
            "h,not a row at all",
        ])
    }

    /// The apps' catalog: a snapshot named by its MD5, then the pointer.
    func publishCatalog(_ rows: [String]) {
        let snapshot = Array((["photo_head_md5,file_size,photo_md5,photo_date,format"] + rows).joined(separator: "\n").utf8) + [0x0A]
        bucket.store("catalogs/U/.photolala.\(Self.md5(snapshot)).csv", bytes: snapshot, contentType: "text/csv")
        bucket.store("catalogs/U/.photolala.md5", bytes: Array(Self.md5(snapshot).utf8), contentType: "text/plain")
    }

    /// Runs the command's side against the daemon's through a control socket.
    func export(dryRun: Bool = false, workers: Int = 3, interrupted: @escaping @Sendable () -> Bool = { false }) async throws -> ExportSummary {
        let socket = dir + "/s.sock"
        let server = try await ControlServer.start(path: socket, group: "photolala",
                                                   policy: AccessPolicy(daemonUID: getuid(), readerGroup: nil, readerGroupName: "photolala"),
                                                   handler: Routes(restore: restore), logger: Logger(label: "export-tests"))
        let request = ExportRun.Request(to: dir + "/out/", dryRun: dryRun, json: true, workers: workers)
        let result: Result<ExportSummary, RestoreRun.Stop>
        do throws(RestoreRun.Stop) {
            result = .success(try await ExportRun(client: ControlClient(socketPath: socket), request: request, interrupted: interrupted).run())
        } catch {
            result = .failure(error)
        }
        await server.stop()
        return try result.get()
    }

    func files(under root: String) -> [String] {
        (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []).filter { path in
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDir) && !isDir.boolValue
        }.sorted()
    }

    @Test func everyObjectIsWrittenOnceNamedAndDatedAndASecondRunWritesNothing() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let summary = try await export()
        #expect(summary.files == 5 && summary.restored == 5 && summary.failed == 0 && summary.skipped == 0, "\(summary)")
        #expect(summary.catalog == .init(state: "read", rows: 4, malformed: 1))
        #expect(summary.dated == .init(catalog: 1, object: 4, none: 0))
        #expect(summary.exitCode == 0 && summary.problems.isEmpty)
        #expect(files(under: dir + "/out") == photos.map(\.path).sorted())
        for p in photos {
            #expect(FileManager.default.contents(atPath: dir + "/out/" + p.path).map(Array.init) == p.bytes, "\(p.path)")
            var st = stat()
            #expect(stat(dir + "/out/" + p.path, &st) == 0 && st.st_mtim.tv_sec == p.mtime && st.st_mtim.tv_nsec == 0, "\(p.path)")
        }
        // Sniffed from its first bytes: one ranged GET, for the object nothing else described.
        #expect(bucket.requests("HeadObject") >= 4)

        let again = try await export()
        #expect(again.restored == 0 && again.alreadyThere == 5 && again.exitCode == 0, "\(again)")
        #expect(files(under: dir + "/out") == photos.map(\.path).sorted())

        // The trail: each run's start and end, by the caller, with where and how many.
        let events = audit.events
        #expect(events.map(\.kind) == [.restore, .restore, .restore, .restore])
        #expect(events.map { $0.details["step"] } == ["started", "finished", "started", "finished"])
        #expect(events.allSatisfy { $0.details["byDate"] == true && $0.details["to"] == .string(dir + "/out/") && $0.actor == .caller(uid: getuid()) })
        #expect(events[1].details["written"] == 5 && events[3].details["written"] == 0 && events[3].details["alreadyThere"] == 5)
        #expect(events.allSatisfy { $0.outcome == .ok })
    }

    @Test func anInterruptedExportResumesWithoutReadingACompleteFileAgain() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let out = dir + "/out"
        // One worker, stopped once two files are on their way (what Ctrl-C does between
        // files): it reads no other object, and the two it read are still checked and put
        // in place (a worker goes on to the next file while the last one is read back).
        let first = try await export(workers: 1) { [self] in files(under: out).count >= 2 }
        #expect(first.interrupted && first.restored == 2 && first.exitCode == 1, "\(first)")
        #expect(first.text.contains("run the same command again to resume"))
        let done = files(under: out)
        #expect(done.count == 2)

        let before = bucket.requestLog.count
        let second = try await export()
        #expect(!second.interrupted && second.restored == 3 && second.alreadyThere == 2 && second.exitCode == 0, "\(second)")
        #expect(files(under: out) == photos.map(\.path).sorted())
        // The two complete files were not read again: their objects were at most sniffed
        // (a ranged read of the first bytes, for the two that nothing else describes).
        let sniffed: Set<String> = [Self.md5(photos[3].bytes), Self.md5(photos[4].bytes)]
        let reads = bucket.requestLog.dropFirst(before).filter { $0.operation == "GetObject" && $0.key.hasPrefix("photos/U/") }.map(\.key)
        for path in done {
            let md5 = try #require(photos.first { $0.path == path }).bytes
            let key = "photos/U/\(Self.md5(md5)).dat"
            #expect(reads.filter { $0 == key }.count == (sniffed.contains(Self.md5(md5)) ? 1 : 0), "\(path)")
        }
        #expect(reads.count == 3 + 2)
    }

    @Test func anArchivedObjectIsAskedBackBeforeAnyIsReadThenWritten() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cold = [0xFF, 0xD8, 0xFF, 0xE0] + Array("cold photo".utf8)
        let key = "photos/U/\(Self.md5(cold)).dat"
        bucket.store(key, bytes: cold, contentType: "image/jpeg", storageClass: "DEEP_ARCHIVE", lastModified: Self.at(1_700_000_000))
        // The archive gives it back once it has been asked (the test's stand-in for hours).
        let thawer = Task { [bucket] in
            while bucket.requests("RestoreObject") == 0 { try await Task.sleep(for: .milliseconds(20)) }
            bucket.finishRestore(key)
        }
        defer { thawer.cancel() }
        let summary = try await export()
        #expect(summary.restored == 6 && summary.waitingArchived == 0 && summary.exitCode == 0, "\(summary)")
        let path = dir + "/out/2023/11/2023-11-14 22.13.20 \(Self.md5(cold).prefix(8)).jpg"
        #expect(FileManager.default.contents(atPath: path).map(Array.init) == cold)
        // Asked back once, before any photo's bytes were read.
        let log = bucket.requestLog
        let asked = try #require(log.firstIndex { $0.operation == "RestoreObject" })
        #expect(log.filter { $0.operation == "RestoreObject" }.map(\.key) == [key])
        let firstRead = log.firstIndex { $0.operation == "GetObject" && $0.key.hasPrefix("photos/U/") && !$0.key.hasSuffix("\(Self.md5(photos[3].bytes)).dat")
            && !$0.key.hasSuffix("\(Self.md5(photos[4].bytes)).dat") }
        #expect(firstRead.map { asked < $0 } == true)
    }

    @Test func twoObjectsThatWouldShareANameBothComeBackTheLaterWithItsWholeMD5() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Their MD5s share the first 8 hex digits (508efc84), the catalog dates them the same second.
        let early = Array("collide 57155".utf8)
        let late = Array("collide 165688".utf8)
        #expect(Self.md5(early).prefix(8) == Self.md5(late).prefix(8) && Self.md5(early) < Self.md5(late))
        for body in [late, early] { bucket.store("photos/U/\(Self.md5(body)).dat", bytes: body, contentType: "image/jpeg") }
        publishCatalog(["h,13,\(Self.md5(early)),1650000000,JPEG", "h,14,\(Self.md5(late)),1650000000,JPEG"])
        let summary = try await export()
        #expect(summary.restored == 7 && summary.exitCode == 0, "\(summary)")
        let folder = dir + "/out/2022/04/2022-04-15 05.20.00 "
        #expect(FileManager.default.contents(atPath: folder + "508efc84.jpg").map(Array.init) == early)
        #expect(FileManager.default.contents(atPath: folder + Self.md5(late) + ".jpg").map(Array.init) == late)
        let again = try await export()
        #expect(again.restored == 0 && again.alreadyThere == 7 && again.exitCode == 0, "\(again)")
    }

    @Test func hostileKeysAreReportedAndNothingIsWrittenOutsideTheFolder() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let evil = Array("evil".utf8)
        let hostile = ["photos/U/../x.dat", "photos/U/\(Self.md5(evil).uppercased()).dat", "photos/U/sub/\(Self.md5(evil)).dat",
                       "photos/U/\(Self.md5(evil)).dat.jpg", "photos/U/\n\(Self.md5(evil).dropFirst()).dat", "photos/U/x/../../../etc/passwd"]
        for key in hostile { bucket.store(key, bytes: evil) }
        // An object whose bytes are not those its key names.
        let liar = "photos/U/\(String(repeating: "a", count: 32)).dat"
        bucket.store(liar, bytes: Array("other bytes".utf8), lastModified: Self.at(1_700_000_000))
        let summary = try await export()
        #expect(summary.skipped == hostile.count && summary.restored == 5 && summary.failed == 1 && summary.exitCode == 1, "\(summary)")
        #expect(Set(summary.problems.filter { $0.kind == "skipped" }.compactMap(\.path)) == Set(hostile.map(RestorePlan.shown)))
        #expect(summary.problems.contains { $0.kind == "failed" && $0.message.contains("holds other bytes") })
        #expect(files(under: dir + "/out") == photos.map(\.path).sorted())
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["out", "state"])
    }

    @Test func aDryRunListsWhatWouldBeWrittenAndWritesNothing() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        bucket.store("photos/U/\(Self.md5(Array("cold".utf8))).dat", bytes: Array("cold".utf8), storageClass: "DEEP_ARCHIVE",
                     lastModified: Self.at(1_700_000_000))
        let summary = try await export(dryRun: true)
        #expect(summary.dryRun && summary.files == 6 && summary.waitingArchived == 1 && summary.exitCode == 0, "\(summary)")
        #expect(Set(summary.items?.map(\.action) ?? []) == ["restore", "waitArchived"])
        #expect(summary.items?.first { $0.action == "waitArchived" }?.path.hasSuffix(".bin") == true)
        #expect(!FileManager.default.fileExists(atPath: dir + "/out"))
        #expect(audit.events.isEmpty)
        // Still there in DEEP_ARCHIVE: a dry run asks nothing back.
        #expect(bucket.requests("RestoreObject") == 0)
    }

    @Test func aCatalogThatDoesNotCheckOutDatesEveryFileByItsObject() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        bucket.store("catalogs/U/.photolala.md5", bytes: Array(String(repeating: "b", count: 32).utf8))
        let summary = try await export()
        #expect(summary.catalog.state == "unreadable" && summary.catalog.message?.contains("not in the bucket") == true)
        #expect(summary.restored == 5 && summary.dated == .init(catalog: 0, object: 5, none: 0) && summary.exitCode == 0)
        // The phone's photo: its own time, and its extension from its headers.
        #expect(FileManager.default.fileExists(atPath: dir + "/out/2023/11/2023-11-14 22.13.20 \(Self.md5(photos[0].bytes).prefix(8)).jpg"))

        // A snapshot whose bytes are not those its name says.
        bucket.store("catalogs/U/.photolala.\(String(repeating: "b", count: 32)).csv", bytes: Array("photo_head_md5\n".utf8))
        let again = try await export()
        #expect(again.catalog.message?.contains("holds other bytes") == true && again.alreadyThere == 5)
    }

    @Test func withoutASignInTheCommandIsToldBeforeAnythingIsListed() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        await grants.refuse(.signedOut)
        let answer = await restore.answer(ControlRequest(route: .restoreExport, peer: PeerCredentials(pid: 1, uid: 0, gid: 0)))
        #expect(answer.status == 409 && answer.stream == nil)
        #expect(bucket.requests("ListObjectsV2") == 0)
    }

    @Test func theDaemonSideReadsTheCatalogOnceAndListsEveryPage() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // More than a page of objects, each in the catalog.
        var rows: [String] = []
        for i in 0..<1100 {
            let bytes = [0xFF, 0xD8, 0xFF] + Array("photo \(i)".utf8)
            bucket.store("photos/U/\(Self.md5(bytes)).dat", bytes: bytes)
            rows.append("h,\(bytes.count),\(Self.md5(bytes)),\(1_500_000_000 + i),JPEG")
        }
        publishCatalog(rows)
        let summary = try await export(dryRun: true)
        #expect(summary.files == 1105 && summary.dated.catalog == 1100)
        #expect(bucket.requests("ListObjectsV2") == 2)
        // Only the five objects the catalog does not describe are asked what they are.
        #expect(bucket.requests("HeadObject") == 5 + 1)
    }
}

/// The events a part gives the trail, in order.
final class RecordedAudit: AuditRecorder {
    private let recorded = Mutex<[AuditEvent]>([])
    func record(_ event: AuditEvent) { recorded.withLock { $0.append(event) } }
    var events: [AuditEvent] { recorded.withLock { $0 } }
}

/// The restore's calls on the control socket, as the daemon routes them.
private struct Routes: ControlHandler {
    let restore: RestoreService

    func handle(_ request: ControlRequest) async -> ControlResponse {
        await restore.answer(request)
    }
}
