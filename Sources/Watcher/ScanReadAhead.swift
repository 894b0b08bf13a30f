import Synchronization

/// The next batch of a scan, listed while the consumer works on the current one.
final class ScanReadAhead: Sendable {
    private let cursor: ScanCursor
    private let pending = Mutex<Task<ScanOutput?, Never>?>(nil)

    init(_ cursor: ScanCursor) {
        self.cursor = cursor
    }

    /// Called by one consumer at a time (AsyncStream's unfolding closure): the cursor is
    /// driven by at most one listing task at any moment.
    func next() async -> ScanOutput? {
        let current = pending.withLock { $0.take() } ?? list()
        let output = await current.value
        if case .directories = output {
            let following = list()
            pending.withLock { $0 = following }
        }
        return output
    }

    private func list() -> Task<ScanOutput?, Never> {
        let cursor = self.cursor
        return Task { await LowPriorityWorker.shared.run { cursor.next() } }
    }
}
