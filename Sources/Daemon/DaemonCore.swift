import Foundation
import Logging
import PhotolalaCore
import Queue

/// The daemon's shared state: the settings in force, the queue database, the pause and
/// sign-in state, and the status snapshot assembled from every part. Services ask it;
/// it never does slow I/O while holding its own state.
public actor DaemonCore {
    public private(set) var settings: Settings
    public let database: QueueDatabase
    let logger: Logger
    private var state: DaemonStatus.State = .starting
    private var userPaused: Bool
    private var startedAt = Date()
    private var problems: [String: String] = [:]
    /// Parts fill these in as they come to exist (watcher, credentials, account).
    private var statusContributors: [@Sendable (inout DaemonStatus) async -> Void] = []

    static let userPauseKey = "userPaused"

    public init(settings: Settings, database: QueueDatabase, logger: Logger) throws {
        self.settings = settings
        self.database = database
        self.logger = logger
        self.userPaused = (try database.setting(Self.userPauseKey)) == "1"
    }

    public func addStatusContributor(_ f: @escaping @Sendable (inout DaemonStatus) async -> Void) {
        statusContributors.append(f)
    }

    // MARK: lifecycle

    public func markRunning() {
        state = .running
        changed()
    }

    public func markStopping() {
        state = .stopping
        changed()
    }

    public func apply(_ newSettings: Settings) {
        settings = newSettings
        changed()
    }

    // MARK: pause

    public var isUserPaused: Bool { userPaused }

    public func setUserPaused(_ paused: Bool) throws {
        try database.setSetting(Self.userPauseKey, paused ? "1" : nil)
        userPaused = paused
        logger.notice(paused ? "uploads paused by the user" : "uploads resumed by the user")
        changed()
    }

    // MARK: problems shown in status (disk full, database errors, unreadable folders)

    public func setProblem(_ key: String, _ message: String?) {
        if problems[key] != message {
            problems[key] = message
            changed()
        }
    }

    // MARK: change notification (drives STATUS= lines without polling)

    /// Every stage says here that something it shows changed.
    public nonisolated let statusChanges = ChangeFeed()

    public nonisolated func changed() {
        statusChanges.changed()
    }

    /// A stream that yields after each change (bursts coalesce into one element) and
    /// ends when the subscriber's task is cancelled.
    public nonisolated func changes() -> AsyncStream<Void> {
        statusChanges.changes()
    }

    public nonisolated var changeGeneration: Int { statusChanges.generation }

    // MARK: status

    public func status() async -> DaemonStatus {
        var s = DaemonStatus(state: state)
        s.startedAt = Timestamp.string(startedAt)
        s.watch.folders = settings.watch.folders.count
        s.watch.paths = settings.watch.folders
        do {
            let c = try database.counts()
            s.queue.pending = c.pending
            s.queue.uploading = c.uploading
            s.queue.uploaded = c.uploaded
            s.queue.failed = c.failed
            s.queue.pendingBytes = c.pendingBytes + c.uploadingBytes
            s.queue.uploadedBytes = c.uploadedBytes
        } catch {
            s.problems.append("The queue database cannot be read: \(error)")
        }
        for f in statusContributors { await f(&s) }
        // `hashing` counts files being read now, which the database still holds as pending.
        s.queue.pending = max(0, s.queue.pending - s.queue.hashing)
        // A reason that needs the user (login, revoked Apple ID, quota) outranks their own pause.
        if s.state == .running && userPaused {
            s.state = .paused
            s.pauseReason = .user
        }
        s.problems += problems.keys.sorted().compactMap { problems[$0] }
        if let problem = database.currentProblem { s.problems.append(problem) }
        return s
    }
}
