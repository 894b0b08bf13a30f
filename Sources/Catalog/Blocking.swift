import Dispatch
import Synchronization

/// Runs the merge's file and SQLite work on a utility queue, off Swift's small
/// cooperative pool (a million-row merge takes seconds of blocking I/O). The work is
/// handed a `CancelFlag` that the waiting task's cancellation sets, so a stop does not
/// have to wait for a merge to finish (ServiceLifecycle allows 3 s once it cancels).
enum Blocking {
    static let queue = DispatchQueue(label: "photolala.catalog.io", qos: .utility)

    static func run<T: Sendable>(_ work: @escaping @Sendable (CancelFlag) throws -> T) async throws -> T {
        let flag = CancelFlag()
        let result: Result<T, any Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                queue.async { c.resume(returning: Result { try work(flag) }) }
            }
        } onCancel: {
            flag.cancel()
        }
        return try result.get()
    }
}

/// Set when the task waiting for blocking work was cancelled: long loops look at it every
/// few thousand rows and stop with `CancellationError`.
final class CancelFlag: Sendable {
    private let flag = Atomic<Bool>(false)

    func cancel() { flag.store(true, ordering: .relaxed) }

    func check() throws {
        if flag.load(ordering: .relaxed) { throw CancellationError() }
    }
}
