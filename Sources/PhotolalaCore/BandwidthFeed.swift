import Foundation
import Synchronization

/// The upload rate in force now: the daemon's bandwidth schedule publishes here when a
/// slot of the timetable begins (or the settings change), and whoever spends upload
/// bandwidth reads it or subscribes. A value the stages are given, like `ChangeFeed`, so
/// the upload stage depends on no service to learn its rate.
package final class BandwidthFeed: Sendable {
    /// What is in force: the rate, and until when (nil: no timetable, until the settings change).
    package struct Current: Sendable, Equatable {
        package var rate: BandwidthTimetable.Rate
        package var until: Date?
        /// Whether the rate comes from a timetable (so a `0` is the timetable's pause).
        package var scheduled: Bool

        package init(rate: BandwidthTimetable.Rate, until: Date? = nil, scheduled: Bool = false) {
            self.rate = rate
            self.until = until
            self.scheduled = scheduled
        }

        package var isPaused: Bool { rate == .paused }
    }

    private struct State {
        var current: Current
        var subscribers: [Int: AsyncStream<Current>.Continuation] = [:]
        var next = 0
    }

    private let state: Mutex<State>
    /// Changed with every new rate: what a stage's `StageLoop` wakes on (`.signal`) when it
    /// needs only to know that the rate moved, not to follow it.
    package let changes = ChangeFeed()

    package init(_ current: Current = Current(rate: .unlimited)) {
        state = Mutex(State(current: current))
    }

    package var current: Current { state.withLock { $0.current } }

    /// Publishes `new` to every subscriber, if it differs from what is in force.
    package func publish(_ new: Current) {
        let subscribers = state.withLock { s -> [AsyncStream<Current>.Continuation]? in
            guard s.current != new else { return nil }
            s.current = new
            return Array(s.subscribers.values)
        }
        guard let subscribers else { return }
        changes.changed()
        for c in subscribers { c.yield(new) }
    }

    /// What is in force now, then each change (only the newest is kept for a slow
    /// reader); ends when the subscriber's task is cancelled.
    package func updates() -> AsyncStream<Current> {
        let (stream, continuation) = AsyncStream<Current>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let (id, now) = state.withLock { s -> (Int, Current) in
            defer { s.next += 1 }
            s.subscribers[s.next] = continuation
            return (s.next, s.current)
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        continuation.yield(now)
        return stream
    }
}
