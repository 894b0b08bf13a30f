import Foundation

/// Wakes a loop when something changed, or at a deadline: the ingest and upload loops
/// sleep on it instead of polling.
package actor WakeSignal {
    private var generation = 0
    private var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]

    package init() {}

    package func notify() {
        generation &+= 1
        let all = waiters
        waiters.removeAll()
        for (_, w) in all { w.resume() }
    }

    package var current: Int { generation }

    /// Returns after a `notify()` later than `since`, or at `deadline`, or on cancellation.
    package func wait(since: Int, until deadline: ContinuousClock.Instant?) async {
        if generation != since { return }
        guard let deadline else { return await waitForNotify() }
        // The deadline races the notify; the loser is cancelled, and a cancelled `Sleep`
        // frees its timer at once (Task.sleep would hold it until the deadline).
        await withTaskGroup(of: Void.self) { race in
            race.addTask { await self.waitForNotify() }
            race.addTask { try? await Sleep.until(deadline) }
            await race.next()
            race.cancelAll()
        }
    }

    private func waitForNotify() async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                if Task.isCancelled { c.resume() } else { waiters[id] = c }
            }
        } onCancel: {
            Task { await self.resume(id) }
        }
    }

    /// The same, with a wall-clock deadline (a retry time stored in the queue).
    package func wait(since: Int, until date: Date?) async {
        await wait(since: since, until: date.map { ContinuousClock.now.advanced(by: .milliseconds(Int64($0.timeIntervalSinceNow * 1000))) })
    }

    /// Runs `action` after every `notify()`, until the task is cancelled: how a stage hands
    /// another's signal (its queue rows changed) to its own loop.
    package func onEveryNotify(_ action: @Sendable () async -> Void) async {
        var since = generation
        while !Task.isCancelled {
            await wait(since: since, until: nil as Date?)
            since = generation
            await action()
        }
    }

    private func resume(_ id: UUID) {
        waiters.removeValue(forKey: id)?.resume()
    }
}
