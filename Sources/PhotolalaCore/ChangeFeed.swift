import Synchronization

/// "Something the status shows changed": every stage says so here, and whoever renders
/// the status (the systemd STATUS= line) subscribes. A value the stages are given, not a
/// closure into the daemon, so no stage depends on who listens.
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

    /// Counts changes (tests and the watchdog compare two readings).
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
}
