import BucketTesting
import Foundation
import Synchronization
import Testing
import PhotolalaCore

@Suite struct StageLoopTests {
    /// Steps counted; the loop ends when the test cancels it.
    final class Steps: Sendable {
        let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func waitFor(_ n: Int) async throws {
            for _ in 0..<500 where value < n { try await Task.sleep(for: .milliseconds(10)) }
            #expect(value >= n)
        }
    }

    @Test func aSignalWakesTheStage() async throws {
        let signal = ChangeFeed()
        let steps = Steps()
        let loop = StageLoop(clock: TestClock(), wakes: [.signal(signal)])
        let run = Task { await loop.run { _ in steps.count.withLock { $0 += 1 }; return .wake } }
        try await steps.waitFor(1)
        signal.changed()
        try await steps.waitFor(2)
        run.cancel()
        await run.value
        #expect(steps.value == 2)
    }

    @Test func aStreamAndTheStagesOwnWakeWakeItToo() async throws {
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        let steps = Steps()
        let loop = StageLoop(clock: TestClock(), wakes: [.stream(stream)])
        let run = Task { await loop.run { _ in steps.count.withLock { $0 += 1 }; return .wake } }
        try await steps.waitFor(1)
        continuation.yield()
        try await steps.waitFor(2)
        loop.wake()
        try await steps.waitFor(3)
        run.cancel()
        await run.value
    }

    @Test func theDeadlineAStepReturnsIsWaitedOnTheInjectedClock() async throws {
        let clock = TestClock()
        let steps = Steps()
        let loop = StageLoop(clock: clock)
        let run = Task { await loop.run { _ in steps.count.withLock { $0 += 1 }; return .wait(until: clock.now().addingTimeInterval(60)) } }
        try await steps.waitFor(1)
        for _ in 0..<500 where clock.sleepers == 0 { try await Task.sleep(for: .milliseconds(5)) }
        clock.advance(by: 59)
        try await Task.sleep(for: .milliseconds(50))
        #expect(steps.value == 1)
        clock.advance(by: 1)
        try await steps.waitFor(2)
        run.cancel()
        await run.value
    }

    @Test func workersRunConcurrentlyAndAllStopOnCancel() async throws {
        let seen = Mutex(Set<Int>())
        let loop = StageLoop(clock: TestClock())
        let run = Task { await loop.run(workers: 3) { worker in seen.withLock { _ = $0.insert(worker) }; return .wake } }
        for _ in 0..<500 where seen.withLock({ $0.count }) < 3 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(seen.withLock { $0 } == [0, 1, 2])
        run.cancel()
        await run.value
    }

    @Test func aWakeDuringAStepIsNotLost() async throws {
        let steps = Steps()
        let loop = StageLoop(clock: TestClock())
        let run = Task {
            await loop.run { _ in
                let n = steps.count.withLock { $0 += 1; return $0 }
                // Someone wakes the stage while its first step runs.
                if n == 1 { loop.wake() }
                return .wake
            }
        }
        try await steps.waitFor(2)
        run.cancel()
        await run.value
    }
}
