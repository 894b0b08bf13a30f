import Foundation
import Logging
import PhotolalaCore
import Queue

/// The daemon's shared state: the settings in force, the queue database, the user's pause,
/// and the status snapshot assembled from every part. Services ask it; it never does slow
/// I/O while holding its own state.
package actor DaemonCore {
    package private(set) var settings: Settings
    package let database: QueueDatabase
    let logger: Logger
    private var state: DaemonStatus.State = .starting
    private var userPaused: Bool
    private var startedAt = Date()
    private var contributors: [any StatusContributor] = []
    private var witnesses: [any AttentionWitness] = []
    /// What makes the status say "Action needed" (and the notifications tell).
    private let attentionRules: AttentionRules

    static let userPauseKey = "userPaused"

    package init(settings: Settings, database: QueueDatabase, logger: Logger,
                attentionRules: AttentionRules = AttentionRules(environment: ProcessInfo.processInfo.environment)) async throws {
        self.settings = settings
        self.attentionRules = attentionRules
        self.database = database
        self.logger = logger
        self.userPaused = (try await database.setting(Self.userPauseKey)) == "1"
    }

    /// The parts whose fields the status shows and whose facts the attention rules read.
    package func add(_ parts: [DaemonPart]) {
        contributors += parts.compactMap(\.status)
        witnesses += parts.compactMap(\.witness)
    }

    // MARK: lifecycle

    package func markRunning() {
        state = .running
        changed()
    }

    package func markStopping() {
        state = .stopping
        changed()
    }

    package func apply(_ newSettings: Settings) {
        settings = newSettings
        changed()
    }

    // MARK: pause

    package var isUserPaused: Bool { userPaused }

    package func setUserPaused(_ paused: Bool) async throws {
        try await database.setSetting(Self.userPauseKey, paused ? "1" : nil)
        userPaused = paused
        logger.notice(paused ? "uploads paused by the user" : "uploads resumed by the user")
        changed()
    }

    // MARK: change notification (drives STATUS= lines without polling)

    /// Every stage says here that something it shows changed.
    package nonisolated let statusChanges = ChangeFeed()

    package nonisolated func changed() {
        statusChanges.changed()
    }

    /// A stream that yields after each change (bursts coalesce into one element) and
    /// ends when the subscriber's task is cancelled.
    package nonisolated func changes() -> AsyncStream<Void> {
        statusChanges.changes()
    }

    package nonisolated var changeGeneration: Int { statusChanges.generation }

    // MARK: status

    /// The queue's counts first, then every part's own fields, then what is derived from
    /// several parts (the pause shown, files being read counted out of pending).
    package func status() async -> DaemonStatus {
        var s = DaemonStatus(state: state)
        s.startedAt = Timestamp.string(startedAt)
        s.watch.folders = settings.watch.folders.count
        s.watch.paths = settings.watch.folders
        do {
            await s.queue.apply(try database.counts())
        } catch {
            s.problems.append("The queue database cannot be read: \(error)")
        }
        for part in contributors { await part.contribute(to: &s) }
        let databaseProblem = database.currentProblem
        Self.finish(&s, userPaused: userPaused, databaseProblem: databaseProblem)
        var facts = AttentionRules.Facts(databaseProblem: databaseProblem)
        for witness in witnesses { await witness.note(&facts) }
        s.attention = attentionRules.items(for: s, facts: facts, now: Date())
        if let instance = settings.instance { s.address(to: instance) }
        return s
    }

    /// The part of the assembly that reads more than one part's fields: pure, so tests
    /// can check it on plain values.
    package static func finish(_ s: inout DaemonStatus, userPaused: Bool, databaseProblem: String?) {
        // `hashing` counts files being read now, which the database still holds as pending.
        s.queue.pending = max(0, s.queue.pending - s.queue.hashing)
        // A reason that needs the user (login, revoked Apple ID, quota) outranks their own pause.
        if s.state == .running && userPaused {
            s.state = .paused
            s.pauseReason = .user
        }
        // The timetable's pause comes last: the user's own pause says what they must undo.
        if s.state == .running && s.bandwidth.timetable != nil && s.bandwidth.limit == 0 {
            s.state = .paused
            s.pauseReason = .schedule
        }
        if let databaseProblem { s.problems.append(databaseProblem) }
    }
}

extension DaemonStatus.Queue {
    /// The counts the queue database holds (files being read are added by ingest).
    package mutating func apply(_ c: QueueCounts) {
        pending = c.pending
        uploading = c.uploading
        uploaded = c.uploaded
        failed = c.failed
        pendingBytes = c.pendingBytes + c.uploadingBytes
        uploadedBytes = c.uploadedBytes
        oldestPendingAt = c.oldestWaitingAt.map(Timestamp.string)
        lastUploadAt = c.lastUploadAt.map(Timestamp.string)
    }
}
