import Bucket
import BucketTesting
import Digests
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Ingest
import Logging
import ManifestFormat
import PhotolalaCore
import Queue
import Testing
import Upload
import Vault
@testable import Manifest

/// The manifest stage run in-process: a temporary queue database, the in-memory bucket
/// behind a real `BucketSession`, a clock the test moves. Files become `uploaded` in the
/// queue as the uploader leaves them; what reaches the bucket is read back with the
/// format's own reader.
@Suite struct ManifestServiceTests {
    let clock = TestClock()
    let bucket: InMemoryBucket
    let grants = FixedGrants(userId: "U", deviceId: "dev-1")
    let accountKeys = FixedKeys()
    let db: QueueDatabase
    let keys = ManifestKeys(userId: "U", deviceId: "dev-1")
    let audit = CollectedAudit()
    var metadataKey: MetadataKey { accountKeys.accountKey!.metadataKey }

    init() throws {
        bucket = InMemoryBucket(clock: clock)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("manifest-stage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        db = try QueueDatabase.open(path: dir.appendingPathComponent("queue.db").path)
    }

    /// A stage as the daemon builds one; a second call on the same database is a restart.
    func service(compactAfter segments: Int? = nil, folders: [String] = ["/srv/photos"]) async -> ManifestService {
        var settings = Settings()
        settings.watch.folders = folders
        settings.account.deviceName = "nas"
        let environment = segments.map { ["PHOTOLALAD_MANIFEST_COMPACT_SEGMENTS": "\($0)"] } ?? [:]
        let logger = Logger(label: "manifest-stage-tests")
        return await ManifestService(context: StageContext(database: db, clock: clock, logger: logger, audit: audit),
                                     bucket: BucketSession(grants: grants, transport: bucket, clock: clock, logger: logger),
                                     keys: accountKeys, options: .init(settings, environment: environment))
    }

    static func md5(_ name: String) -> String { Hex.string(MD5.digest(Array(name.utf8))) }

    /// Files under /srv/photos backed up: hashed, then their objects uploaded.
    func backedUp(_ names: [String], inodes: UInt64 = 1) async throws {
        for (i, name) in names.enumerated() {
            let path = "/srv/photos/" + name
            let id = FileIdentity(device: 1, inode: inodes + UInt64(i), size: 100 + Int64(i), mtimeSec: 1_700_000_000, mtimeNsec: 5)
            _ = try await db.observe([ObservedFile(path: path, identity: id)], now: clock.now())
            _ = try await db.recordHash(path: path, identity: id, md5: Self.md5(name), now: clock.now())
        }
        while let job = try await db.claimObject(now: clock.now()) { try await db.markUploaded(md5: job.md5, now: clock.now()) }
    }

    /// Steps until nothing is due, moving the clock to each time the stage asks for.
    func settle(_ stage: ManifestService) async {
        for _ in 0..<20 {
            guard let next = await stage.step() else { return }
            clock.advance(by: max(0, next.timeIntervalSince(clock.now())))
        }
        Issue.record("the stage never settled")
    }

    /// A sealed segment, opened for its key.
    func segment(_ key: String) throws -> ManifestSegment {
        try ManifestSegment.open(try #require(bucket.object(key)).bytes, key: metadataKey, objectKey: key).segment
    }

    func record() throws -> DeviceRecord {
        try DeviceRecord.open(try #require(bucket.object(keys.record)).bytes, key: metadataKey, objectKey: keys.record)
    }

    /// The device's manifest as a reader replays it from the bucket.
    func replay(asOf: Int64? = nil) async throws -> (files: [String], report: ManifestReader.Report) {
        var replay = ManifestReplay(asOf: asOf)
        let report = try await ManifestReader(store: Peek(bucket: bucket), keys: keys, key: metadataKey, remembered: nil).read { segment, _ in
            replay.apply(segment.entries)
        }
        return (replay.files.map { String(decoding: $0.path, as: UTF8.self) }, report)
    }

    func status(_ stage: ManifestService) async -> DaemonStatus.Manifest? {
        var s = DaemonStatus()
        await stage.contribute(to: &s)
        return s.manifest
    }

    @Test func aSegmentIsWrittenOnceTheUploadsAreDoneThenRecorded() async throws {
        try await backedUp(["a.jpg", "2024/b.jpg"])
        let stage = await service()
        // Gathered for the quiet delay first: nothing is sent yet.
        let due = try #require(await stage.step())
        #expect(due == clock.now().addingTimeInterval(2))
        #expect(bucket.keys.isEmpty)
        clock.advance(by: 2)
        #expect(await stage.step() == nil)
        #expect(bucket.keys == [keys.record, keys.log(1)].sorted())
        let log = try segment(keys.log(1))
        #expect(log.header.kind == .log && log.header.seq == 1 && log.header.device == "dev-1")
        // A first start lists what is backed up by path, bytes in order ("2" before "a").
        #expect(log.entries.map { String(decoding: $0.path, as: UTF8.self) } == ["2024/b.jpg", "a.jpg"])
        #expect(log.entries.allSatisfy { $0.kind == .appeared && $0.folder == "/srv/photos" })
        #expect(log.entries[1].version?.md5.hex == Self.md5("a.jpg"))
        let record = try record()
        #expect(record.name == "nas" && record.files == 2 && record.bytes == 201 && record.logSeq == 1 && record.folders == ["/srv/photos"])
        // Sealed, chained: the record names the head, the log its (empty) predecessor.
        #expect(record.format == 2 && record.counter == 1 && record.head == ManifestHead(seq: 1, sha256: SHA256.hexDigest(bucket.object(keys.log(1))!.bytes)))
        #expect(log.header.prev == ManifestHeader.noPrevious && log.header.format == 2)
        #expect(try await db.manifestHead(userId: "U", device: "dev-1") == RememberedHead(counter: 1, head: record.head!))
        #expect(try await db.manifestLedger()?.seq == 1)
        #expect(try await !db.hasManifestChanges())
        let shown = try #require(await status(stage))
        #expect(shown.state == .idle && shown.segments == 1 && shown.files == 2 && shown.deviceId == "dev-1" && shown.lastError == nil)
    }

    @Test func aSegmentWrittenButNotRecordedIsTakenBackAtTheNextStart() async throws {
        try await backedUp(["a.jpg"])
        await settle(service())
        try await backedUp(["b.jpg"], inodes: 10)
        // What the stage PUT just before a kill -9: segment 2 of the changes waiting, by
        // this database, never recorded in it.
        let ledger = try #require(try await db.manifestLedger())
        let batch = try #require(try await db.manifestCandidates(limit: 100))
        var encoder = ManifestSegmentEncoder(header: ManifestHeader(kind: .log, device: "dev-1", seq: 2, createdAt: Timestamp.string(clock.now()),
                                                                    writer: ledger.writer, through: batch.through, prev: ledger.headSHA))
        for candidate in batch.candidates {
            if let record = ManifestChanges.record(for: candidate, folders: ["/srv/photos"], now: clock.now()),
               let entry = ManifestChanges.entry(record) { encoder.append(entry) }
        }
        let written = encoder.sealed(key: metadataKey, objectKey: keys.log(2))
        bucket.store(keys.log(2), bytes: written)

        await settle(service())
        #expect(try await db.manifestLedger()?.seq == 2)
        #expect(try await !db.hasManifestChanges())
        #expect(bucket.object(keys.log(2))?.bytes == written)
        #expect(bucket.object(keys.log(3)) == nil)
        #expect(try record().logSeq == 2)
        #expect(try await replay().files == ["a.jpg", "b.jpg"])
    }

    /// A segment 2 or 3 planted in the bucket as if written before a kill -9.
    func planted(seq: Int64, prev: String?, key: MetadataKey, writer: String?, through: Int64?) -> [UInt8] {
        var encoder = ManifestSegmentEncoder(header: ManifestHeader(kind: .log, device: "dev-1", seq: seq, createdAt: Timestamp.string(clock.now()),
                                                                    writer: writer, through: through, prev: prev))
        encoder.append(ManifestEntry(kind: .appeared, folder: "/srv/photos", path: Array("planted.jpg".utf8), time: 1,
                                     version: FileVersion(size: 1, md5: MD5Value(high: 1, low: 1), mtimeSec: 0, mtimeNsec: 0)))
        return encoder.sealed(key: key, objectKey: keys.log(seq))
    }

    @Test func aSegmentFoundAfterACrashIsTakenBackOnlyIfItAuthenticatesAndChains() async throws {
        try await backedUp(["a.jpg"])
        await settle(service())
        try await backedUp(["b.jpg"], inodes: 10)
        let ledger = try #require(try await db.manifestLedger())
        let batch = try #require(try await db.manifestCandidates(limit: 100))
        // Sealed with another account's key: it does not authenticate, and is written again.
        bucket.store(keys.log(2), bytes: planted(seq: 2, prev: ledger.headSHA, key: AccountKey.generate().metadataKey,
                                                 writer: ledger.writer, through: batch.through))
        await settle(service())
        #expect(try segment(keys.log(2)).entries.map { String(decoding: $0.path, as: UTF8.self) } == ["b.jpg"])
        // Authentic, but it does not follow segment 2 (a stale copy): not taken back as 3.
        try await backedUp(["c.jpg"], inodes: 20)
        bucket.store(keys.log(3), bytes: planted(seq: 3, prev: ManifestHeader.noPrevious, key: metadataKey, writer: nil, through: nil))
        await settle(service())
        #expect(try segment(keys.log(3)).entries.map { String(decoding: $0.path, as: UTF8.self) } == ["c.jpg"])
        let now = try await replay()
        #expect(now.files == ["a.jpg", "b.jpg", "c.jpg"] && now.report.complete && now.report.problems.isEmpty)
    }

    @Test func anUnrecordedSegmentThatDoesNotCheckOutIsWrittenAgain() async throws {
        try await backedUp(["a.jpg"])
        await settle(service())
        try await backedUp(["b.jpg"], inodes: 10)
        bucket.store(keys.log(2), bytes: Array("PLMANIF cut short".utf8))

        await settle(service())
        let log = try segment(keys.log(2))
        #expect(log.entries.map { String(decoding: $0.path, as: UTF8.self) } == ["b.jpg"])
        #expect(try await db.manifestLedger()?.seq == 2)
    }

    @Test func theLogIsCompactedIntoASnapshotAReaderReplays() async throws {
        let stage = await service(compactAfter: 2)
        try await backedUp(["a.jpg"])
        await settle(stage)
        try await backedUp(["b.jpg"], inodes: 10)
        await settle(stage)
        // Two segments: the mirror went up as snapshot 2, then the logs it covers went away.
        let part = keys.snapshotPart(2, part: 1)
        #expect(bucket.keys == [keys.record, part, keys.snapshotIndex(2)].sorted())
        let index = try segment(keys.snapshotIndex(2))
        #expect(index.header.kind == .snapshotIndex && index.header.entries == 2)
        let partBytes = try #require(bucket.object(part)).bytes
        let digest = ManifestSegment.sealedDigestHex(of: partBytes)
        #expect(index.header.parts == [ManifestHeader.Part(part: 1, sha256: digest, entries: 2)])
        #expect(try await db.manifestLedger()?.snapshot == 2)
        // The two logs the snapshot covers, deleted: the audit trail says where and how many.
        #expect(audit.all == [
            AuditEvent(.s3Delete, by: .daemon, .ok, ["prefix": .string(keys.prefix), "count": 2, "why": "compaction"]),
        ])

        let beforeGone = clock.now()
        clock.advance(by: 60)
        try await db.markGone(path: "/srv/photos/a.jpg", now: clock.now())
        await settle(stage)
        #expect(try segment(keys.log(3)).entries.map(\.kind) == [.gone])
        let now = try await replay()
        #expect(now.files == ["b.jpg"] && now.report.lastSeq == 3 && now.report.complete && now.report.problems.isEmpty)
        #expect(try await replay(asOf: Int64(beforeGone.timeIntervalSince1970 * 1000)).files == ["a.jpg", "b.jpg"])
        #expect(try record().files == 1)
    }

    @Test func anExpiredGrantIsRefreshedInPlaceAndA503WaitsForTheBackoff() async throws {
        let stage = await service()
        try await backedUp(["a.jpg"])
        await settle(stage)
        bucket.expireTokensSeenSoFar()
        try await backedUp(["b.jpg"], inodes: 10)
        await settle(stage)
        #expect(bucket.object(keys.log(2)) != nil)
        #expect(await grants.rejections == 1)

        try await backedUp(["c.jpg"], inodes: 20)
        bucket.failNext(1, with: .slowDown, operations: ["PutObject"])
        let gathered = try #require(await stage.step())
        clock.advance(by: gathered.timeIntervalSince(clock.now()))
        // The manifest's budget hands the 503 back: the step waits for its own backoff.
        let retry = try #require(await stage.step())
        #expect(retry > clock.now())
        #expect(bucket.object(keys.log(3)) == nil)
        let failing = try #require(await status(stage))
        #expect(failing.state == .backoff && failing.lastError?.contains("SlowDown") == true)
        await settle(stage)
        #expect(bucket.object(keys.log(3)) != nil)
        #expect(await status(stage)?.lastError == nil)
    }

    @Test func theLoopWritesWhatTheUploaderSignalsAndStopsWhenCancelled() async throws {
        let stage = await service()
        let running = Task { try await stage.run() }
        try await backedUp(["a.jpg"])
        for _ in 0..<400 where bucket.object(keys.log(1)) == nil {
            clock.advance(by: 1)
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(bucket.object(keys.log(1)) != nil)
        running.cancel()
        try await running.value
    }

    @Test func signedOutTheStageIsOffAndSendsNothing() async throws {
        await grants.refuse(.signedOut)
        try await backedUp(["a.jpg"])
        let stage = await service()
        #expect(await stage.step() == nil)
        #expect(await status(stage)?.state == .off)
        #expect(bucket.keys.isEmpty)
    }

    // MARK: format 2: the key, sealed objects, owners and folders, the upgrade

    @Test func nothingIsWrittenWhileTheKeyIsNeededThenAllOfItOnceItIsEntered() async throws {
        let key = try #require(accountKeys.accountKey)
        accountKeys.set(.needed)
        try await backedUp(["a.jpg", "b.jpg"])
        let stage = await service()
        #expect(await stage.step() == nil)
        #expect(await status(stage)?.state == .waitingForKey)
        #expect(bucket.keys.isEmpty && bucket.requests("ListObjectsV2") == 0)
        #expect(try await db.hasManifestChanges())
        accountKeys.set(.unreadable("the key object does not check out"))
        #expect(await stage.step() == nil && bucket.keys.isEmpty)
        accountKeys.set(.ready(key))
        await settle(stage)
        #expect(try await replay().files == ["a.jpg", "b.jpg"])
        let settled = await status(stage)
        #expect(settled?.state == .idle && settled?.format == 2)
    }

    @Test func everyObjectIsSealedAndNamesNoPathNameOrHost() async throws {
        let marker = "MARK-\(UUID().uuidString.prefix(8))"
        let stage = await service(compactAfter: 2)
        try await backedUp(["\(marker)/a.jpg"])
        await settle(stage)
        try await backedUp(["\(marker)/b.jpg"], inodes: 10)
        await settle(stage)
        try await db.markGone(path: "/srv/photos/\(marker)/a.jpg", now: clock.now())
        await settle(stage)
        #expect(bucket.keys.contains(keys.snapshotIndex(2)) && bucket.keys.contains(keys.log(3)))
        for key in bucket.keys {
            #expect(!key.contains(marker) && !key.contains("srv") && key.hasPrefix(keys.prefix))
            let bytes = try #require(bucket.object(key)).bytes
            // Segments are sealed objects; the record is a sealed record (it may carry the wrapped key).
            let magic = key.hasSuffix("/device.json") ? SealedRecord.magic : SealedObject.magic
            #expect(Array(bytes.prefix(8)) == magic, "\(key) is not sealed")
            for secret in [marker, "/srv/photos", "nas", "dev-1"] {
                #expect(!bytes.windows(ofCount: secret.utf8.count).contains { $0.elementsEqual(secret.utf8) }, "\(key) holds \(secret)")
            }
        }
        #expect(try await replay().files == ["\(marker)/b.jpg"])
    }

    @Test func ownersSHA256sAndFoldersAreRecordedOnceAndAgainWhenTheyChange() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("manifest-owners-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/2024/trip", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        chmod(root + "/2024", 0o750)
        let stage = await service(folders: [root])
        let owner = FileOwner(uid: getuid(), gid: getgid(), mode: 0o640)
        func add(_ name: String, inode: UInt64) async throws {
            let id = FileIdentity(device: 1, inode: inode, size: 10, mtimeSec: 1_700_000_000, mtimeNsec: 0)
            _ = try await db.observe([ObservedFile(path: root + "/" + name, identity: id)], now: clock.now())
            _ = try await db.recordHash(path: root + "/" + name, identity: id, md5: Self.md5(name), sha256: SHA256.digest(Array(name.utf8)),
                                  owner: owner, now: clock.now())
            while let job = try await db.claimObject(now: clock.now()) { try await db.markUploaded(md5: job.md5, now: clock.now()) }
        }
        try await add("2024/trip/a.jpg", inode: 1)
        await settle(stage)
        let first = try segment(keys.log(1))
        #expect(first.entries.map(\.kind) == [.folder, .folder, .folder, .appeared])
        #expect(first.entries.prefix(3).map { String(decoding: $0.path, as: UTF8.self) } == ["", "2024", "2024/trip"])
        #expect(first.entries[1].owner?.mode == 0o750 && first.entries[1].owner?.uid == getuid())
        let file = first.entries[3]
        #expect(file.owner?.uid == owner.uid && file.owner?.mode == 0o640 && file.owner?.user != nil)
        #expect(file.version?.sha256 == SHA256Value(bytes: SHA256.digest(Array("2024/trip/a.jpg".utf8))))
        // Another file in the same folders: no folder record again.
        try await add("2024/trip/b.jpg", inode: 2)
        await settle(stage)
        #expect(try segment(keys.log(2)).entries.map(\.kind) == [.appeared])
        // A folder's mode changed: recorded with the next file below it.
        chmod(root + "/2024", 0o700)
        try await add("2024/c.jpg", inode: 3)
        await settle(stage)
        let third = try segment(keys.log(3))
        #expect(third.entries.map(\.kind) == [.folder, .appeared] && third.entries[0].owner?.mode == 0o700)
        var replay = ManifestReplay(asOf: nil)
        for seq: Int64 in 1...3 { replay.apply(try segment(keys.log(seq)).entries) }
        #expect(replay.folderOwners[root]?[Array("2024".utf8)]?.mode == 0o700)
        #expect(replay.files.allSatisfy { $0.owner?.mode == 0o640 && $0.version.sha256 != nil })
    }

    /// What a release writing format 1 left: its ledger (no format), its mirror of two
    /// files in segment 1, and its plaintext objects in the bucket.
    func formatOneLeftovers() async throws {
        try await backedUp(["a.jpg", "b.jpg"])
        var old = ManifestLedger(userId: "U", deviceId: "dev-1")
        old.format = nil
        try await db.resetManifest(old)
        let batch = try #require(try await db.manifestCandidates(limit: 100))
        let records = batch.candidates.compactMap { ManifestChanges.record(for: $0, folders: ["/srv/photos"], now: clock.now()) }
        _ = try await db.recordManifestSegment(seq: 1, records: records, through: batch.through) { $0.logged(1, records: records, writtenAt: nil) }
        let plain = ManifestSegment(header: ManifestHeader(kind: .log, device: "dev-1", seq: 1, createdAt: "x"),
                                    entries: records.compactMap(ManifestChanges.entry)).encoded()
        bucket.store(keys.plaintext.log(1), bytes: plain)
        bucket.store(keys.record, bytes: DeviceRecord(deviceId: "dev-1", name: "nas", folders: ["/srv/photos"], lastBackupAt: nil, files: 2,
                                                      bytes: 201, logSeq: 1, snapshotSeq: 0, updatedAt: "x", software: "old").encoded())
        #expect(try await db.manifestLedger()?.isPlaintext == true)
    }

    func assertUpgraded() async throws {
        #expect(bucket.keys == [keys.record, keys.snapshotPart(1, part: 1), keys.snapshotIndex(1)].sorted())
        #expect(bucket.keys.allSatisfy { !ManifestKeys.isPlaintextSegment($0) })
        let ledger = try await db.manifestLedger()
        #expect(try await record().head?.seq == 1 && ledger?.format == 2)
        let now = try await replay()
        #expect(now.files == ["a.jpg", "b.jpg"] && now.report.complete && now.report.problems.isEmpty)
    }

    @Test func aFormat1ManifestIsWrittenAgainSealedFromTheMirrorThenItsPlaintextDeleted() async throws {
        try await formatOneLeftovers()
        // The bucket's plaintext is not what the upgrade reads: change it, nothing follows.
        bucket.store(keys.plaintext.log(1), bytes: Array("not read".utf8))
        let stage = await service()
        await settle(stage)
        try await assertUpgraded()
        #expect(await status(stage)?.format == 2)
        // Then the log goes on from the snapshot.
        try await backedUp(["c.jpg"], inodes: 10)
        await settle(stage)
        #expect(try segment(keys.log(2)).header.prev == ManifestHeader.noPrevious)
        #expect(try await replay().files == ["a.jpg", "b.jpg", "c.jpg"])
    }

    @Test func anUpgradeCutShortResumesAtTheNextStart() async throws {
        try await formatOneLeftovers()
        // Killed before the snapshot was whole: still format 1, done again.
        bucket.failNext(1, with: .internalError, operations: ["PutObject"])
        #expect(await service().step() != nil)
        #expect(try await db.manifestLedger()?.isPlaintext == true && bucket.object(keys.plaintext.log(1)) != nil)
        // Killed between the sealed record and the deletion: the next start deletes.
        bucket.failNext(1, with: .internalError, operations: ["DeleteObject"])
        #expect(await service().step() != nil)
        #expect(try await db.manifestLedger()?.format == 2 && bucket.object(keys.plaintext.log(1)) != nil)
        await settle(service())
        try await assertUpgraded()
    }

}

/// The bucket as another tool reads it: no session, no retries.
private struct Peek: ManifestObjects {
    let bucket: InMemoryBucket

    func keys(under prefix: String, from token: String?) async throws -> (keys: [String], next: String?) {
        (bucket.keys.filter { $0.hasPrefix(prefix) }, nil)
    }

    func bytes(_ key: String) async throws -> [UInt8]? {
        bucket.object(key)?.bytes
    }
}
