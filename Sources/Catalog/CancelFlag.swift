import Synchronization

/// Set when the task waiting for blocking work was cancelled: long loops look at it every
/// few thousand rows and stop with `CancellationError`.
final class CancelFlag: Sendable {
    private let flag = Atomic<Bool>(false)

    func cancel() { flag.store(true, ordering: .relaxed) }

    func check() throws {
        if flag.load(ordering: .relaxed) { throw CancellationError() }
    }
}
