import Bucket
import BucketTesting
import Digests
import Foundation
import GRDB
import Ingest
import Logging
import PhotolalaCore
import Testing
import Queue

/// One stage's world in-process: a temporary state directory with the real queue
/// database, the in-memory bucket behind the real session and rule, a fixed grant source
/// and a test clock. Files are real files, queued the way ingest queues them.
final class StageWorld: Sendable {
    let dir: String
    let database: QueueDatabase
    let clock: TestClock
    let bucket: InMemoryBucket
    let grants: FixedGrants
    let userId = "8F1E2D3C-0000-4000-8000-000000000001"
    let logger = Logger(label: "stage-tests") { _ in SwiftLogNoOpLogHandler() }

    /// - Parameters:
    ///   - skipsWaits: every wait on the clock is over at once (backoffs, outages).
    ///   - skipsWaitsUpTo: only waits this short are (backoffs; schedules wait for `advance`).
    init(skipsWaits: Bool = true, skipsWaitsUpTo: TimeInterval = 0) throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("stage-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/photos", withIntermediateDirectories: true)
        database = try QueueDatabase.open(path: dir + "/queue.db")
        clock = TestClock(now: Date(), skipsWaits: skipsWaits && skipsWaitsUpTo == 0, skipsWaitsUpTo: skipsWaitsUpTo)
        bucket = InMemoryBucket(clock: clock)
        grants = FixedGrants(userId: userId)
    }

    deinit { try? FileManager.default.removeItem(atPath: dir) }

    /// What a stage stands on here: this world's queue, clock and log.
    func context(statusChanges: ChangeFeed = ChangeFeed(), audit: (any AuditRecorder)? = nil) -> StageContext {
        StageContext(database: database, clock: clock, logger: logger, statusChanges: statusChanges, audit: audit)
    }

    /// A session of the stage's own over the in-memory bucket.
    func session() -> BucketSession {
        BucketSession(grants: grants, transport: bucket, clock: clock, logger: logger)
    }

    /// A file written under `photos/`: its path, identity and MD5.
    func write(_ name: String, _ bytes: [UInt8]) throws -> (path: String, identity: FileIdentity, md5: String) {
        let path = dir + "/photos/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var st = stat()
        guard stat(path, &st) == 0 else { throw StageTestError("cannot stat \(path)") }
        return (path, FileIdentity(st), Hex.string(MD5.digest(bytes)))
    }

    /// A file seen and hashed, as ingest leaves it: its object waits for the upload.
    @discardableResult
    func queue(_ name: String, _ bytes: [UInt8]) async throws -> String {
        let file = try write(name, bytes)
        _ = try await database.observe([ObservedFile(path: file.path, identity: file.identity)], now: clock.now())
        _ = try await database.recordHash(path: file.path, identity: file.identity, md5: file.md5, now: clock.now())
        return file.md5
    }

    func objectState(_ md5: String) async throws -> String? {
        try await database.read { try String.fetchOne($0, sql: "SELECT state FROM object WHERE md5 = ?", arguments: [md5]) }
    }

    func photoKey(_ md5: String) -> String { "photos/\(userId)/\(md5).dat" }

    /// Waits (in real time) until `done`, or records an issue and throws. Generous: alone
    /// these tests take a second, but a whole `swift test` on two busy cores starves them.
    func waitUntil(_ what: String, timeout: Double = 120, _ done: () async throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try await done() { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("timed out waiting for \(what)")
        throw StageTestError("timed out waiting for \(what)")
    }

    /// Some bytes that differ by `seed`.
    static func bytes(_ count: Int, seed: Int) -> [UInt8] {
        var generator = SplitMix(seed: UInt64(seed))
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
    }
}

/// Runs a service until the test is done with it.
struct Running: Sendable {
    let task: Task<Void, Never>

    init(_ run: @escaping @Sendable () async throws -> Void) {
        task = Task { try? await run() }
    }

    func stop() async {
        task.cancel()
        await task.value
    }
}

/// Uploads may run, always.
struct OpenGate: StageGate {
    let feed = ChangeFeed()
    func blockReason() async -> String? { nil }
    func changes() -> AsyncStream<Void> { feed.changes() }
}

struct StageTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A small deterministic generator for test bytes.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
