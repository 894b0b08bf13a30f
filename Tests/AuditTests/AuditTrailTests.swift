#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import PhotolalaCore
import Queue
import Synchronization
import Testing
import Audit

/// The trail on a real directory and a real queue database: files, modes, the seal,
/// rotation, a damaged trail, and secrets it refuses to write.
@Suite struct AuditTrailTests {
    let dir: String
    let database: QueueDatabase

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("audit-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        database = try QueueDatabase.open(path: dir + "/queue.db")
    }

    func trail(maxSize: Int64 = AuditTrail.defaultMaxSize, logs: LogCapture? = nil) -> AuditTrail {
        var logger = Logger(label: "audit-test") { _ in logs ?? LogCapture() }
        logger.logLevel = .debug
        return AuditTrail(directory: dir, database: database, maxSize: maxSize, logger: logger,
                          userName: { $0 == 0 ? "root" : nil })
    }

    func path(_ name: String = "audit.log") -> String { "\(dir)/\(name)" }

    func lines(_ name: String = "audit.log") -> [String] {
        ((try? String(contentsOfFile: path(name), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func write(_ lines: [String], _ name: String = "audit.log") throws {
        try (lines.map { $0 + "\n" }.joined()).write(toFile: path(name), atomically: false, encoding: .utf8)
    }

    static func pause(uid: UInt32 = 0, _ details: AuditDetails = [:]) -> AuditEvent {
        AuditEvent(.pause, by: .caller(uid: uid), .ok, details)
    }

    @Test func recordsAreChainedSealedAndPrivate() async throws {
        let t = trail()
        t.record(Self.pause())
        t.record(AuditEvent(.controlRefused, by: .caller(uid: 4242), .refused, ["call": "POST /v1/pause"]))
        t.record(AuditEvent(.configReload, by: .systemd, .ok))
        await t.flush()
        let written = lines()
        #expect(written.count == 3)
        var st = stat()
        #expect(stat(path(), &st) == 0 && st.st_mode & 0o777 == 0o600)
        let records = try written.map { try JSONDecoder().decode(AuditRecord.self, from: Data($0.utf8)) }
        #expect(records.map(\.seq) == [1, 2, 3])
        #expect(records[0].actor == .caller(uid: 0, user: "root"))
        #expect(records[1].actor == .caller(uid: 4242, user: nil) && written[1].contains("\"user\":null"))
        #expect(records[2].actor == .systemd && written[2].contains("\"actor\":\"systemd\""))
        #expect(records[0].prev == AuditMark.origin.hash)
        #expect(records[1].prev == AuditLine.hash(written[0]) && records[2].prev == AuditLine.hash(written[1]))
        #expect(try await database.setting("audit.seal") == "3 \(AuditLine.hash(written[2]))")
        #expect(await t.verify().whole)
        let listed = await t.records(since: nil, limit: 2)
        #expect(listed.records.map(\.seq) == [2, 3] && listed.more)
    }

    @Test func sinceKeepsTheNewerRecords() async throws {
        let clock = Ticks(from: Date(timeIntervalSince1970: 1_800_000_000), step: 60)
        let t = AuditTrail(directory: dir, database: database, logger: Logger(label: "audit-test"), now: { clock.next() })
        for _ in 0..<5 { t.record(Self.pause()) }
        let listed = await t.records(since: Date(timeIntervalSince1970: 1_800_000_000 + 150), limit: 100)
        #expect(listed.records.map(\.seq) == [4, 5] && !listed.more)
        #expect(listed.records[0].at == "2027-01-15T08:03:00.000Z")
    }

    @Test func rotationKeepsThreeFilesEachBoundedAndTheChainWhole() async throws {
        let maxSize: Int64 = 2000
        let t = trail(maxSize: maxSize)
        var longest = 0
        for i in 0..<300 {
            t.record(Self.pause(["n": .int(Int64(i)), "note": .string(String(repeating: "x", count: i % 7 * 20))]))
            if i % 13 == 0 { await t.flush() }
        }
        await t.flush()
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix("audit.log") }.sorted()
        #expect(names == ["audit.log", "audit.log.1", "audit.log.2"])
        for name in names {
            for line in lines(name) { longest = max(longest, line.utf8.count + 1) }
        }
        for name in names {
            let size = try FileManager.default.attributesOfItem(atPath: path(name))[.size] as! Int
            #expect(size <= Int(maxSize) + longest, "\(name) is \(size) bytes")
            var st = stat()
            #expect(stat(path(name), &st) == 0 && st.st_mode & 0o777 == 0o600)
        }
        let v = await t.verify()
        #expect(v.whole, "\(String(describing: v.problem))")
        #expect(v.lastSeq == 300 && v.firstSeq! > 1)
        // The head says where the oldest kept file starts: a cut start would be caught.
        let head = try #require(try await database.setting("audit.head").flatMap(AuditMark.init))
        #expect(head.seq == v.firstSeq! - 1)
        var oldest = lines("audit.log.2")
        oldest.removeFirst()
        try write(oldest, "audit.log.2")
        #expect(await t.verify().problem?.kind == .truncatedStart)
    }

    @Test func aDamagedTrailKeepsAppendingAndKeepsShowingTheBreak() async throws {
        let first = trail()
        for i in 0..<5 { first.record(Self.pause(["n": .int(Int64(i))])) }
        await first.flush()
        // Record 3 edited while the daemon was stopped.
        var edited = lines()
        edited[2] = edited[2].replacingOccurrences(of: "\"n\":2", with: "\"n\":9")
        try write(edited)
        let logs = LogCapture()
        let second = trail(logs: logs)
        second.record(Self.pause(["n": 5]))
        second.record(Self.pause(["n": 6]))
        await second.flush()
        #expect(lines().count == 7)
        let v = await second.verify()
        #expect(v.problem?.kind == .edited && v.problem?.seq == 3 && v.problem?.line == 3)
        #expect(v.lastSeq == 7)
        // A whole chain otherwise: record 6 follows record 5 as sealed.
        #expect(logs.lines.isEmpty, "the last record still matched the seal: nothing to say at start")
    }

    @Test func aCutTailIsLoggedOnceAndTheGapStays() async throws {
        let first = trail()
        for _ in 0..<5 { first.record(Self.pause()) }
        await first.flush()
        try write(Array(lines().prefix(3)))
        let logs = LogCapture()
        let second = trail(logs: logs)
        #expect(await second.verify().problem?.kind == .cut)
        second.record(Self.pause())
        await second.flush()
        second.record(Self.pause())
        await second.flush()
        let v = await second.verify()
        #expect(v.problem?.kind == .removed && v.problem?.seq == 6)
        #expect(v.problem?.message.contains("records 4–5 are missing before record 6") == true)
        #expect(logs.lines.filter { $0.contains("does not end with the record the queue database sealed") }.count == 1)
    }

    @Test func aDeletedTrailStartsAfterTheSeal() async throws {
        let first = trail()
        for _ in 0..<3 { first.record(Self.pause()) }
        await first.flush()
        unlink(path())
        let second = trail()
        second.record(Self.pause())
        await second.flush()
        #expect(lines().count == 1 && lines()[0].hasPrefix("{\"seq\":4,"))
        #expect(await second.verify().problem?.kind == .truncatedStart)
    }

    @Test func aTornLastLineIsDroppedAndTheChainStaysWhole() async throws {
        let first = trail()
        for _ in 0..<3 { first.record(Self.pause()) }
        await first.flush()
        let handle = try #require(FileHandle(forWritingAtPath: path()))
        handle.seekToEndOfFile()
        handle.write(Data("{\"seq\":4,\"at\":\"20".utf8))
        try handle.close()
        let second = trail()
        second.record(Self.pause())
        await second.flush()
        #expect(lines().count == 4)
        #expect(await second.verify().whole)
    }

    @Test func recordsWrittenButNotSealedAreTakenBack() async throws {
        // A power cut can lose the seal's last commits (WAL, synchronous=NORMAL) while the
        // synced lines survive: records that chain from the seal are the daemon's own.
        let first = trail()
        for _ in 0..<5 { first.record(Self.pause()) }
        await first.flush()
        try await database.setSetting("audit.seal", "3 \(AuditLine.hash(lines()[2]))")
        let logs = LogCapture()
        let second = trail(logs: logs)
        second.record(Self.pause())
        await second.flush()
        let v = await second.verify()
        #expect(v.whole && v.lastSeq == 6, "\(String(describing: v.problem))")
        #expect(logs.lines.contains { $0.contains("sealed audit records 4–5") })
    }

    @Test func aNewDatabaseAdoptsTheTrailAsItStands() async throws {
        let first = trail()
        for _ in 0..<3 { first.record(Self.pause()) }
        await first.flush()
        try await database.setSetting("audit.seal", nil)
        let second = trail()
        second.record(Self.pause())
        #expect(await second.verify().whole)
        #expect(try await database.setting("audit.seal")?.hasPrefix("4 ") == true)
    }

    @Test func nothingIsWrittenWithoutAnEvent() async throws {
        let t = trail()
        t.record(Self.pause())
        await t.flush()
        var before = stat()
        _ = stat(path(), &before)
        let seal = try await database.setting("audit.seal")
        await t.flush()
        _ = await t.records(since: nil, limit: 10)
        _ = await t.verify()
        var after = stat()
        _ = stat(path(), &after)
        #expect(after.st_size == before.st_size && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec && after.st_mtim.tv_sec == before.st_mtim.tv_sec)
        #expect(try await database.setting("audit.seal") == seal)
    }

    @Test func theServiceWritesWhatIsRecorded() async throws {
        let t = trail()
        let running = Task { try await t.run() }
        t.record(Self.pause())
        // The whole suite runs at once on two cores: the bound is for a hang, not for speed.
        let deadline = ContinuousClock.now + .seconds(120)
        while lines().isEmpty && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(lines().count == 1)
        running.cancel()
        _ = await running.result
    }

    @Test func aSecretIsNeverWritten() async throws {
        let secret = "tok_" + UUID().uuidString
        SecretRedactor.shared.register(secret)
        let logs = LogCapture()
        var logger = Logger(label: "audit-test") { _ in logs }
        logger.logLevel = .debug
        let t = AuditTrail(directory: dir, database: database, logger: logger, userName: { _ in secret })
        t.record(AuditEvent(.login, by: .caller(uid: 1000), .refused,
                            ["method": "token", "reason": .string("backend said: \(secret) is invalid"), "token": .string(secret)]))
        await t.flush()
        let text = try String(contentsOfFile: path(), encoding: .utf8)
        #expect(!text.contains(secret))
        let record = try JSONDecoder().decode(AuditRecord.self, from: Data(lines()[0].utf8))
        #expect(record.details["method"] == "token")
        #expect(record.details["reason"] == "[redacted]" && record.details["token"] == "[redacted]")
        #expect(record.actor == .caller(uid: 1000, user: "[redacted]"))
        #expect(logs.lines.contains { $0.contains("was given a secret in reason, token") })
        #expect(!logs.lines.joined().contains(secret))
    }

    @Test func detailsAreBounded() async throws {
        let t = trail()
        var many = AuditDetails()
        for i in 0..<40 { many["k\(i)"] = .string(String(repeating: "v", count: 1000)) }
        t.record(Self.pause(many))
        await t.flush()
        let record = try JSONDecoder().decode(AuditRecord.self, from: Data(lines()[0].utf8))
        #expect(record.details.values.count == AuditTrail.maxDetails)
        #expect(record.details.values.values.allSatisfy { $0.description.count <= AuditTrail.maxValueLength })
    }
}

/// A clock that moves on by `step` each time it is read.
final class Ticks: Sendable {
    private let now: Mutex<Date>
    private let step: TimeInterval
    init(from start: Date, step: TimeInterval) {
        now = Mutex(start)
        self.step = step
    }
    func next() -> Date {
        now.withLock { d in
            defer { d += step }
            return d
        }
    }
}

/// A log handler that keeps the messages, for tests that check what the journal is told.
final class LogCapture: LogHandler, @unchecked Sendable {
    private let stored = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    var lines: [String] { stored.withLock { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        stored.withLock { $0.append(event.message.description) }
    }
}
