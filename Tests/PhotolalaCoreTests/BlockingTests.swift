import Dispatch
import Foundation
import PhotolalaCore
import Synchronization
import Testing

/// The one way off the cooperative pool: blocking work runs beside it, a stop need not
/// wait for long work that looks at its flag, and work without one runs to its end.
@Suite struct BlockingTests {
    final class Count: Sendable {
        let value = Atomic<Int>(0)
    }

    @Test func cancellingTheWaiterStopsTheWorkAtItsNextCheck() async throws {
        // Work that ends by itself only after about a minute of checks: a cancellation that
        // is not honoured shows as a value returned instead of CancellationError (no timing
        // bound, which a busy machine would break).
        let task = Task {
            try await Blocking.run { stop in
                for _ in 0..<60_000 {
                    try stop.check()
                    usleep(1000)
                }
                return "ran to the end"
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func workThatIsNotCancelledReturnsItsValue() async throws {
        #expect(try await Blocking.run { stop in try stop.check(); return 42 } == 42)
    }

    /// A write begun is not given up halfway because its caller stops.
    @Test func workWithoutAFlagRunsToItsEndWhenTheCallerIsCancelled() async {
        let started = Count()
        let task = Task {
            await Blocking.run {
                started.value.add(1, ordering: .relaxed)
                usleep(100_000)
                return "ran to the end"
            }
        }
        while started.value.load(ordering: .relaxed) == 0 { await Task.yield() }
        task.cancel()
        #expect(await task.value == "ran to the end")
    }

    /// More blocked calls than the cooperative pool has threads, each waiting for a signal
    /// that only a task on the pool sends: if they blocked the pool, nothing would send it
    /// and each would give up after 10 s.
    @Test func blockedCallsLeaveThePoolFree() async {
        let waiters = ProcessInfo.processInfo.activeProcessorCount * 2 + 2
        let gate = DispatchSemaphore(value: 0)
        let waiting = Count()
        let gaveUp = Count()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<waiters {
                group.addTask {
                    await Blocking.run {
                        waiting.value.add(1, ordering: .relaxed)
                        if gate.wait(timeout: .now() + 10) == .timedOut { gaveUp.value.add(1, ordering: .relaxed) }
                    }
                }
            }
            group.addTask {
                while waiting.value.load(ordering: .relaxed) < waiters { try? await Task.sleep(for: .milliseconds(5)) }
                for _ in 0..<waiters { gate.signal() }
            }
        }
        #expect(gaveUp.value.load(ordering: .relaxed) == 0)
    }

    @Test func aCompletionHandlerAnswersTheWaiter() async {
        let queue = DispatchQueue(label: "test.completion")
        let value = await Blocking.completion { done in queue.async { done(7) } }
        #expect(value == 7)
    }
}
