import PhotolalaCore
import Synchronization

/// The next batch of a scan, listed while the consumer works on the current one. The
/// listing is a job on the scan thread (`LowPriorityWorker.start`), never a task: what it
/// finds waits in a `WorkerResult` until the consumer asks for it.
final class ScanReadAhead: Sendable {
    private let cursor: ScanCursor
    private let pending = Mutex<WorkerResult<ScanOutput?>?>(nil)

    init(_ cursor: ScanCursor) {
        self.cursor = cursor
    }

    /// Called by one consumer at a time (AsyncStream's unfolding closure): the cursor is
    /// driven by at most one listing job at any moment.
    func next() async -> ScanOutput? {
        let current = pending.withLock { $0.take() } ?? list()
        let output = await current.value
        if case .directories = output {
            let following = list()
            pending.withLock { $0 = following }
        }
        return output
    }

    private func list() -> WorkerResult<ScanOutput?> {
        let cursor = self.cursor
        return LowPriorityWorker.shared.start { cursor.next() }
    }
}
