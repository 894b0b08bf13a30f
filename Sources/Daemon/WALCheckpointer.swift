import Foundation
import PhotolalaCore
import Queue
import ServiceLifecycle

/// Checkpoints the queue's WAL a few seconds after the last transaction that changed a
/// row, so the database file is brought up to date while the disk is awake anyway. SQLite
/// checkpoints by itself only once the WAL holds 1,000 pages, and the idle release of
/// memory only after ingest's work: the pages of a stage's few writes would otherwise be
/// copied whenever that came, an hour later, waking a disk that had spun down (issue 25,
/// "disks left asleep"). A stream of writes (a first scan) is left to SQLite.
package actor WALCheckpointer: Service {
    private let database: QueueDatabase
    private let clock: any DaemonClock
    private let quiet: TimeInterval
    /// The change the last checkpoint covered.
    private var covered: Date?

    /// - Parameter quiet: how long no row may have changed before the checkpoint.
    package init(database: QueueDatabase, clock: any DaemonClock = SystemClock(), quiet: TimeInterval = 5) {
        self.database = database
        self.clock = clock
        self.quiet = quiet
    }

    package func run() async throws {
        let loop = StageLoop(clock: clock, wakes: [.signal(database.signals.wrote)])
        await loop.run { _ in await self.step() }
    }

    private func step() async -> StageLoop.Next {
        guard let last = database.lastChange, last != covered else { return .wake }
        let due = last.addingTimeInterval(quiet)
        guard clock.now() >= due else { return .wait(until: due) }
        await database.checkpoint()
        covered = last
        return .now
    }
}
