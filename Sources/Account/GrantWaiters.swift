import Foundation
import Synchronization

/// The callers of `credentials()` waiting for the fetch in flight. Behind a lock rather
/// than in the actor: a waiter's cancellation handler runs synchronously, off the actor,
/// and must take it out itself instead of sending a task to do it.
final class GrantWaiters: Sendable {
    private let waiting = Mutex<[UUID: CheckedContinuation<STSGrant?, Never>]>([:])

    /// False when the calling task was cancelled first (its handler may have run already).
    func add(_ id: UUID, _ continuation: CheckedContinuation<STSGrant?, Never>) -> Bool {
        waiting.withLock { w in
            guard !Task.isCancelled else { return false }
            w[id] = continuation
            return true
        }
    }

    func remove(_ id: UUID) -> CheckedContinuation<STSGrant?, Never>? {
        waiting.withLock { $0.removeValue(forKey: id) }
    }

    func resumeAll(with grant: STSGrant?) {
        let all = waiting.withLock { w in
            defer { w.removeAll() }
            return w.values
        }
        for c in all { c.resume(returning: grant) }
    }
}
