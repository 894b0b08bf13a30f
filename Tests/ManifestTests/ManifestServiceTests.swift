import Bucket
import BucketTesting
import Digests
import Foundation
import Ingest
import Logging
import ManifestFormat
import PhotolalaCore
import Queue
import Testing
import Upload
@testable import Manifest

/// The manifest stage run in-process: a temporary queue database, the in-memory bucket
/// behind a real `BucketSession`, a clock the test moves. Files become `uploaded` in the
/// queue as the uploader leaves them; what reaches the bucket is read back with the
/// format's own reader.
@Suite struct ManifestServiceTests {
    let clock = TestClock()
    let bucket: InMemoryBucket
    let grants = FixedGrants(userId: "U", deviceId: "dev-1")
    let db: QueueDatabase
    let keys = ManifestKeys(userId: "U", deviceId: "dev-1")
    let audit = CollectedAudit()

    init() throws {
        bucket = InMemoryBucket(clock: clock)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("manifest-stage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        db = try QueueDatabase.open(path: dir.appendingPathComponent("queue.db").path)
    }

    /// A stage as the daemon builds one; a second call on the same database is a restart.
    func service(compactAfter segments: Int? = nil) -> ManifestService {
        var settings = Settings()
        settings.watch.folders = ["/srv/photos"]
        settings.account.deviceName = "nas"
        let environment = segments.map { ["PHOTOLALAD_MANIFEST_COMPACT_SEGMENTS": "\($0)"] } ?? [:]
        let logger = Logger(label: "manifest-stage-tests")
        return ManifestService(database: db, bucket: BucketSession(grants: grants, transport: bucket, clock: clock, logger: logger),
                               options: .init(settings, environment: environment), clock: clock, logger: logger, audit: audit)
    }

    static func md5(_ name: String) -> String { Hex.string(MD5.digest(Array(name.utf8))) }

    /// Files under /srv/photos backed up: hashed, then their objects uploaded.
    func backedUp(_ names: [String], inodes: UInt64 = 1) throws {
        for (i, name) in names.enumerated() {
            let path = "/srv/photos/" + name
            let id = FileIdentity(device: 1, inode: inodes + UInt64(i), size: 100 + Int64(i), mtimeSec: 1_700_000_000, mtimeNsec: 5)
            _ = try db.observe([ObservedFile(path: path, identity: id)], now: clock.now())
            _ = try db.recordHash(path: path, identity: id, md5: Self.md5(name), now: clock.now())
        }
        while let job = try db.claimObject(now: clock.now()) { try db.markUploaded(md5: job.md5, now: clock.now()) }
    }

    /// Steps until nothing is due, moving the clock to each time the stage asks for.
    func settle(_ stage: ManifestService) async {
        for _ in 0..<20 {
            guard let next = await stage.step() else { return }
            clock.advance(by: max(0, next.timeIntervalSince(clock.now())))
        }
        Issue.record("the stage never settled")
    }

    func segment(_ key: String) throws -> ManifestSegment {
        try ManifestSegment.decode(try #require(bucket.object(key)).bytes)
    }

    /// The device's manifest as a reader replays it from the bucket.
    func replay(asOf: Int64? = nil) async throws -> (files: [String], report: ManifestReader.Report) {
        var replay = ManifestReplay(asOf: asOf)
        let report = try await ManifestReader(store: Peek(bucket: bucket), keys: keys).read { segment, _ in replay.apply(segment.entries) }
        return (replay.files.map { String(decoding: $0.path, as: UTF8.self) }, report)
    }

    func status(_ stage: ManifestService) async -> DaemonStatus.Manifest? {
        var s = DaemonStatus()
        await stage.contribute(to: &s)
        return s.manifest
    }

    @Test func aSegmentIsWrittenOnceTheUploadsAreDoneThenRecorded() async throws {
        try backedUp(["a.jpg", "2024/b.jpg"])
        let stage = service()
        // Gathered for the quiet delay first: nothing is sent yet.
        let due = try #require(await stage.step())
        #expect(due == clock.now().addingTimeInterval(2))
        #expect(bucket.keys.isEmpty)
        clock.advance(by: 2)
        #expect(await stage.step() == nil)
        #expect(bucket.keys == [keys.record, keys.log(1)].sorted())
        let log = try segment(keys.log(1))
        #expect(log.header.kind == .log && log.header.seq == 1 && log.header.device == "dev-1")
        #expect(log.entries.map { String(decoding: $0.path, as: UTF8.self) } == ["a.jpg", "2024/b.jpg"])
        #expect(log.entries.allSatisfy { $0.kind == .appeared && $0.folder == "/srv/photos" })
        #expect(log.entries[0].version?.md5.hex == Self.md5("a.jpg"))
        let recordBytes = try #require(bucket.object(keys.record)).bytes
        let record = try #require(DeviceRecord.decode(recordBytes))
        #expect(record.name == "nas" && record.files == 2 && record.bytes == 201 && record.logSeq == 1 && record.folders == ["/srv/photos"])
        #expect(try db.manifestLedger()?.seq == 1)
        #expect(try !db.hasManifestChanges())
        let shown = try #require(await status(stage))
        #expect(shown.state == .idle && shown.segments == 1 && shown.files == 2 && shown.deviceId == "dev-1" && shown.lastError == nil)
    }

    @Test func aSegmentWrittenButNotRecordedIsTakenBackAtTheNextStart() async throws {
        try backedUp(["a.jpg"])
        await settle(service())
        try backedUp(["b.jpg"], inodes: 10)
        // What the stage PUT just before a kill -9: segment 2 of the changes waiting, by
        // this database, never recorded in it.
        let ledger = try #require(try db.manifestLedger())
        let batch = try #require(try db.manifestCandidates(limit: 100))
        var encoder = ManifestSegmentEncoder(header: ManifestHeader(kind: .log, device: "dev-1", seq: 2, createdAt: Timestamp.string(clock.now()),
                                                                    writer: ledger.writer, through: batch.through))
        for candidate in batch.candidates {
            if let record = ManifestChanges.record(for: candidate, folders: ["/srv/photos"], now: clock.now()),
               let entry = ManifestChanges.entry(record) { encoder.append(entry) }
        }
        let written = encoder.finish()
        bucket.store(keys.log(2), bytes: written)

        await settle(service())
        #expect(try db.manifestLedger()?.seq == 2)
        #expect(try !db.hasManifestChanges())
        #expect(bucket.object(keys.log(2))?.bytes == written)
        #expect(bucket.object(keys.log(3)) == nil)
        #expect(bucket.object(keys.record).flatMap { DeviceRecord.decode($0.bytes) }?.logSeq == 2)
        #expect(try await replay().files == ["a.jpg", "b.jpg"])
    }

    @Test func anUnrecordedSegmentThatDoesNotCheckOutIsWrittenAgain() async throws {
        try backedUp(["a.jpg"])
        await settle(service())
        try backedUp(["b.jpg"], inodes: 10)
        bucket.store(keys.log(2), bytes: Array("PLMANIF cut short".utf8))

        await settle(service())
        let log = try segment(keys.log(2))
        #expect(log.entries.map { String(decoding: $0.path, as: UTF8.self) } == ["b.jpg"])
        #expect(try db.manifestLedger()?.seq == 2)
    }

    @Test func theLogIsCompactedIntoASnapshotAReaderReplays() async throws {
        let stage = service(compactAfter: 2)
        try backedUp(["a.jpg"])
        await settle(stage)
        try backedUp(["b.jpg"], inodes: 10)
        await settle(stage)
        // Two segments: the mirror went up as snapshot 2, then the logs it covers went away.
        let part = keys.snapshotPart(2, part: 1)
        #expect(bucket.keys == [keys.record, part, keys.snapshotIndex(2)].sorted())
        let index = try segment(keys.snapshotIndex(2))
        #expect(index.header.kind == .snapshotIndex && index.header.entries == 2)
        let partBytes = try #require(bucket.object(part)).bytes
        let digest = try #require(ManifestSegment.digestHex(of: partBytes))
        #expect(index.header.parts == [ManifestHeader.Part(part: 1, sha256: digest, entries: 2)])
        #expect(try db.manifestLedger()?.snapshot == 2)
        // The two logs the snapshot covers, deleted: the audit trail says where and how many.
        #expect(audit.all == [
            AuditEvent(.s3Delete, by: .daemon, .ok, ["prefix": .string(keys.prefix), "count": 2, "why": "compaction"]),
        ])

        let beforeGone = clock.now()
        clock.advance(by: 60)
        try db.markGone(path: "/srv/photos/a.jpg", now: clock.now())
        await settle(stage)
        #expect(try segment(keys.log(3)).entries.map(\.kind) == [.gone])
        let now = try await replay()
        #expect(now.files == ["b.jpg"] && now.report.lastSeq == 3 && now.report.complete && now.report.problems.isEmpty)
        #expect(try await replay(asOf: Int64(beforeGone.timeIntervalSince1970 * 1000)).files == ["a.jpg", "b.jpg"])
        #expect(bucket.object(keys.record).flatMap { DeviceRecord.decode($0.bytes) }?.files == 1)
    }

    @Test func anExpiredGrantIsRefreshedInPlaceAndA503WaitsForTheBackoff() async throws {
        let stage = service()
        try backedUp(["a.jpg"])
        await settle(stage)
        bucket.expireTokensSeenSoFar()
        try backedUp(["b.jpg"], inodes: 10)
        await settle(stage)
        #expect(bucket.object(keys.log(2)) != nil)
        #expect(await grants.rejections == 1)

        try backedUp(["c.jpg"], inodes: 20)
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
        let stage = service()
        let running = Task { try await stage.run() }
        try backedUp(["a.jpg"])
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
        try backedUp(["a.jpg"])
        let stage = service()
        #expect(await stage.step() == nil)
        #expect(await status(stage)?.state == .off)
        #expect(bucket.keys.isEmpty)
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
