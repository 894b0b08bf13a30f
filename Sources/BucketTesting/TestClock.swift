import Foundation
import PhotolalaCore
import Synchronization

/// A clock a test moves. Manual (the default): sleepers wait until `advance` brings their
/// deadline. `skipsWaits`: every sleep moves the time to its deadline at once, so a stage
/// whose backoff would take minutes runs through it in milliseconds; `skipsWaitsUpTo`:
/// only sleeps that short do (backoffs), longer ones wait for `advance` (schedules).
package final class TestClock: DaemonClock {
    private struct Sleeper {
        var deadline: Date
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Date
        var sleepers: [UUID: Sleeper] = [:]
    }

    private let state: Mutex<State>
    /// Sleeps up to this long are over at once.
    private let skipped: TimeInterval

    package init(now: Date = Date(timeIntervalSince1970: 1_700_000_000), skipsWaits: Bool = false,
                 skipsWaitsUpTo: TimeInterval = 0) {
        state = Mutex(State(now: now))
        skipped = skipsWaits ? .infinity : skipsWaitsUpTo
    }

    package func now() -> Date {
        state.withLock { $0.now }
    }

    /// Tasks sleeping on this clock now.
    package var sleepers: Int {
        state.withLock { $0.sleepers.count }
    }

    /// Moves the time on and wakes whoever's deadline came.
    package func advance(by seconds: TimeInterval) {
        let due = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
            s.now = s.now.addingTimeInterval(seconds)
            let now = s.now
            let ids = s.sleepers.filter { $0.value.deadline <= now }.map(\.key)
            return ids.compactMap { s.sleepers.removeValue(forKey: $0)?.continuation }
        }
        for continuation in due { continuation.resume() }
    }

    package func sleep(until deadline: Date) async throws {
        try Task.checkCancellation()
        let skips = state.withLock { s -> Bool in
            guard deadline.timeIntervalSince(s.now) <= skipped else { return false }
            s.now = max(s.now, deadline)
            return true
        }
        if skips {
            await Task.yield()
            return try Task.checkCancellation()
        }
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Checked under the lock the cancellation handler takes: a cancellation
                // either finds the sleeper or is seen here.
                let early: Result<Void, any Error>? = state.withLock { s in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if s.now >= deadline { return .success(()) }
                    s.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let early { continuation.resume(with: early) }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}
