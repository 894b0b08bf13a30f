import Foundation

/// Wakes idle uploaders when there may be work: a new hash, a retry falling due, the
/// gate opening, or shutdown. A waiter sleeps until notified or until its deadline.
actor WorkSignal {
    private var generation = 0
    private var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]

    func notify() {
        generation &+= 1
        let all = waiters
        waiters.removeAll()
        for (_, w) in all { w.resume() }
    }

    var current: Int { generation }

    /// Returns when `notify()` is called after `since`, or at `deadline`.
    func wait(since: Int, until deadline: Date?) async {
        if generation != since { return }
        let id = UUID()
        let timer: Task<Void, Never>? = deadline.map { d in
            Task {
                let delay = d.timeIntervalSinceNow
                if delay > 0 { try? await Task.sleep(for: .milliseconds(Int64(delay * 1000) + 1)) }
                self.resume(id)
            }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                if Task.isCancelled { c.resume() } else { waiters[id] = c }
            }
        } onCancel: {
            Task { await self.resume(id) }
        }
        timer?.cancel()
    }

    private func resume(_ id: UUID) {
        waiters.removeValue(forKey: id)?.resume()
    }
}
