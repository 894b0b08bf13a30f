import Dispatch
import Synchronization

/// The one way off Swift's cooperative pool. The pool has a thread per core (two on a
/// NAS), so one blocking call on it stalls every stage: blocking system calls and file
/// work run on a utility queue's threads instead (`run`), and work another queue performs
/// and reports through a completion handler (the queue database's reads and writes on
/// GRDB's own queues) is awaited with `completion`. Nothing else in the daemon makes a
/// continuation or a dispatch queue to leave the pool.
package enum Blocking {
    /// Threads made on demand: as many as blocking calls wait at once.
    private static let queue = DispatchQueue(label: "photolala.blocking", qos: .utility, attributes: .concurrent)

    /// Runs `work` (a blocking system call, file I/O, a library that blocks) on a thread
    /// of its own and returns its result. Begun, it runs to its end: the caller's
    /// cancellation does not stop it (see the other `run` for work that can stop early).
    package static func run<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await completion { done in
            queue.async { done(Result { () throws(E) -> T in try work() }) }
        }
        return try result.get()
    }

    /// The same for long work that looks at a `CancelFlag` now and then: the caller's
    /// cancellation sets it, so a stop need not wait for a million-row merge to finish
    /// (ServiceLifecycle allows 3 s once it cancels).
    package static func run<T: Sendable, E: Error>(_ work: @escaping @Sendable (CancelFlag) throws(E) -> T) async throws(E) -> T {
        let flag = CancelFlag()
        let result: Result<T, E> = await withTaskCancellationHandler {
            await completion { done in
                queue.async { done(Result { () throws(E) -> T in try work(flag) }) }
            }
        } onCancel: {
            flag.cancel()
        }
        return try result.get()
    }

    /// Awaits work that `start` hands to another queue or thread, which calls `done` once
    /// with its result. Not cancelled with the caller: what was handed over finishes.
    package static func completion<T: Sendable>(_ start: (_ done: @escaping @Sendable (T) -> Void) -> Void) async -> T {
        await withCheckedContinuation { continuation in
            start { continuation.resume(returning: $0) }
        }
    }
}

/// Set when the task waiting for blocking work was cancelled: long loops look at it every
/// few thousand rows and stop with `CancellationError`.
package final class CancelFlag: Sendable {
    private let flag = Atomic<Bool>(false)

    package init() {}

    package func cancel() { flag.store(true, ordering: .relaxed) }

    package var isSet: Bool { flag.load(ordering: .relaxed) }

    package func check() throws(CancellationError) {
        if isSet { throw CancellationError() }
    }
}
