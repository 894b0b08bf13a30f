import Foundation

/// The time a stage reads and waits on, injected so a Swift test can run a stage with a
/// clock it controls (`BucketTesting.TestClock`): no stage calls `Date()` itself.
package protocol DaemonClock: Sendable {
    /// The wall-clock time now (retry times are stored in the queue as wall-clock times).
    func now() -> Date
    /// Returns at `deadline` (at once when it is past); throws `CancellationError` when
    /// the task is cancelled first.
    func sleep(until deadline: Date) async throws
}

extension DaemonClock {
    /// Sleeps `seconds` from now.
    package func sleep(seconds: TimeInterval) async throws {
        try await sleep(until: now().addingTimeInterval(seconds))
    }
}

/// The system's clock: what the daemon runs on.
package struct SystemClock: DaemonClock {
    package init() {}

    package func now() -> Date { Date() }

    package func sleep(until deadline: Date) async throws {
        let seconds = deadline.timeIntervalSinceNow
        guard seconds > 0 else { return try Task.checkCancellation() }
        // Not Task.sleep: the stages cancel most of their sleeps (a wake comes first), and
        // a cancelled Task.sleep keeps its memory until the deadline (Sleep.swift).
        try await Sleep.for(.milliseconds(Int64((seconds * 1000).rounded(.up))))
    }
}
