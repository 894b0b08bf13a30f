import Foundation
import Synchronization

/// The one wake primitive: "something changed, look again". A queue signal (rows entered
/// a state), a stage's own wake, the status shown, the gate: each is a feed, told of a
/// change with `changed()`, which never waits and never starts a task (a commit tells its
/// signal inline). Whoever waits subscribes (`changes()`, a stream) or waits for the next
/// change (`wait(since:)`); bursts coalesce. A value the parts are given, not a closure into
/// whoever listens, so no part depends on who does.
package final class ChangeFeed: Sendable {
    private struct State {
        var subscribers: [Int: AsyncStream<Void>.Continuation] = [:]
        var next = 0
        var generation = 0
    }

    private let state = Mutex(State())

    package init() {}

    /// Cheap and never waits: bursts coalesce in each subscriber's stream.
    package func changed() {
        let subscribers = state.withLock { s -> [AsyncStream<Void>.Continuation] in
            s.generation &+= 1
            return Array(s.subscribers.values)
        }
        for c in subscribers { c.yield() }
    }

    /// Counts changes: a reader keeps one to wait for the next (`wait(since:)`), tests and
    /// the watchdog compare two.
    package var generation: Int { state.withLock { $0.generation } }

    /// A stream that yields once at once, then after each change (bursts coalesce into
    /// one element), and ends when the subscriber's task is cancelled.
    package func changes() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { s -> Int in
            defer { s.next += 1 }
            s.subscribers[s.next] = continuation
            return s.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        continuation.yield()
        return stream
    }

    /// Returns after a change later than generation `since` (at once if there was one),
    /// or when the task is cancelled.
    package func wait(since: Int) async {
        // Subscribed first: a change between the check and the wait is in the stream.
        for await _ in changes() where generation != since { return }
    }

    /// The same, or at `deadline`.
    package func wait(since: Int, until deadline: ContinuousClock.Instant?) async {
        guard let deadline else { return await wait(since: since) }
        await withTaskGroup(of: Void.self) { race in
            race.addTask { await self.wait(since: since) }
            // A cancelled `Sleep` frees its timer at once (Task.sleep would hold it until
            // the deadline; see Sleep.swift), and most of these lose the race.
            race.addTask { try? await Sleep.until(deadline) }
            await race.next()
            race.cancelAll()
        }
    }

    /// The same with a wall-clock deadline (a retry time stored in the queue).
    package func wait(since: Int, until date: Date?) async {
        await wait(since: since, until: date.map { ContinuousClock.now.advanced(by: .milliseconds(Int64($0.timeIntervalSinceNow * 1000))) })
    }
}
