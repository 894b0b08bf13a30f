import Bucket
import BucketTesting
import Foundation
import Logging
import PhotolalaCore
import Synchronization
import Vault
import Keys

/// NASes of one account on one in-memory bucket: each its own state directory, grant
/// source, session and key service, on one test clock.
final class KeyWorld: Sendable {
    static let user = "8F1E2D3C-0000-4000-8000-00000000000A"
    let bucket: InMemoryBucket
    let clock: TestClock
    let root: String
    let lines = LogLines()

    init() throws {
        // Backoffs inside a request pass at once; the service's own schedule waits for `advance`.
        clock = TestClock(skipsWaitsUpTo: 5)
        bucket = InMemoryBucket(clock: clock)
        root = NSTemporaryDirectory() + "keys-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// A NAS signed in as `user`, its state in `name` (the same name: the same NAS restarted).
    func nas(_ name: String, user: String = KeyWorld.user) throws -> NAS {
        let dir = root + "/" + name
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let grants = FixedGrants(userId: user, deviceId: name)
        let lines = self.lines
        let logger = Logger(label: "keys-\(name)") { _ in LineHandler(lines: lines) }
        let session = BucketSession(grants: grants, transport: bucket, clock: clock, logger: logger)
        let audit = Recorded()
        let keys = KeyService(stateDir: dir, grants: grants, bucket: session, clock: clock, logger: logger, audit: audit)
        return NAS(dir: dir, grants: grants, keys: keys, audit: audit)
    }

    var keyObjectKey: String { KeyObject.objectKey(userId: Self.user) }

    var keyObject: [UInt8]? { bucket.object(keyObjectKey)?.bytes }

    /// Objects under the user's `keys/`.
    var keyObjects: [String] { bucket.keys.filter { $0.hasPrefix("metadata/\(Self.user)/keys/") } }
}

struct NAS {
    let dir: String
    let grants: FixedGrants
    let keys: KeyService
    let audit: Recorded

    var store: AccountKeyStore { AccountKeyStore(directory: dir) }

    func saved() throws -> AccountKeyState? { try store.load() }

    func status() async -> DaemonStatus.Recovery {
        var s = DaemonStatus()
        await keys.contribute(to: &s)
        return s.recovery
    }

    /// Looks until the service has nothing left to do now.
    @discardableResult
    func settle() async -> DaemonStatus.Recovery {
        for _ in 0..<10 {
            if await keys.step() != .now { break }
        }
        return await status()
    }
}

/// The audit events a service recorded.
final class Recorded: AuditRecorder {
    private let events = Mutex<[AuditEvent]>([])
    func record(_ event: AuditEvent) { events.withLock { $0.append(event) } }
    var all: [AuditEvent] { events.withLock { $0 } }
}

/// Every log line, with its metadata, as text.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

struct LineHandler: LogHandler {
    let lines: LogLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.append("\(event.level) \(event.message) \(metadata.merging(event.metadata ?? [:]) { $1 })")
    }
}
