import Logging
import PhotolalaCore

/// What every stage around the queue stands on: the queue itself, the clock its timers
/// read, the log, the feed that tells the status something changed, and the audit trail.
/// The daemon makes one and hands it to each stage; a test makes one with its own clock.
/// A stage's own parts (its bucket session, its gate, its options) stay its own arguments.
package struct StageContext: Sendable {
    package let database: QueueDatabase
    package let clock: any DaemonClock
    package let logger: Logger
    package let statusChanges: ChangeFeed
    package let audit: (any AuditRecorder)?

    package init(database: QueueDatabase, clock: any DaemonClock = SystemClock(), logger: Logger = Logger(label: "photolalad"),
                 statusChanges: ChangeFeed = ChangeFeed(), audit: (any AuditRecorder)? = nil) {
        self.database = database
        self.clock = clock
        self.logger = logger
        self.statusChanges = statusChanges
        self.audit = audit
    }

    /// The same ground with another clock (a stage's test drives time itself).
    package func with(clock: any DaemonClock) -> StageContext {
        StageContext(database: database, clock: clock, logger: logger, statusChanges: statusChanges, audit: audit)
    }
}

/// A stage keeps its context and reads these through it, so the five are declared once
/// here instead of in every stage's stored properties and `init`.
package protocol Stage: Actor {
    nonisolated var context: StageContext { get }
}

extension Stage {
    package nonisolated var database: QueueDatabase { context.database }
    package nonisolated var clock: any DaemonClock { context.clock }
    package nonisolated var logger: Logger { context.logger }
    package nonisolated var statusChanges: ChangeFeed { context.statusChanges }
    package nonisolated var audit: (any AuditRecorder)? { context.audit }
}
