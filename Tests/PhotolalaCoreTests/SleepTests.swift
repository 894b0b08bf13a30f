import Foundation
import CLinux
import Synchronization
import Testing
import PhotolalaCore

@Suite struct SleepTests {
    @Test func returnsAtTheDeadline() async throws {
        let start = ContinuousClock.now
        try await Sleep.for(.milliseconds(50))
        #expect(ContinuousClock.now - start >= .milliseconds(50))
    }

    @Test func aPastDeadlineReturnsAtOnceAndACancelledTaskThrows() async throws {
        try await Sleep.until(.now.advanced(by: .seconds(-1)))
        let task = Task { try await Sleep.for(.seconds(3600)) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    /// The reason it exists: the stages race a sleep against their wake signal and cancel
    /// it about a hundred times a second. Task.sleep keeps a cancelled sleep's job and task
    /// until the deadline: here 200,000 of them held 149 MiB for the hour. `Sleep` measured
    /// 0.3 MiB in a process of its own and up to 21 MiB inside this test runner (its own
    /// tasks; heaptrack finds 0.4 MiB left at exit), hence the margin.
    @Test func cancelledSleepsLetGoOfTheirMemoryAtOnce() async throws {
        func heapInUse() -> Int { Int(photolala_heap_in_use()) }
        let table = SleepTable()
        var before = heapInUse()
        for round in 0..<220 {
            // The first rounds warm the pool's threads and caches up.
            if round == 20 { before = heapInUse() }
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<1000 { group.addTask { try? await table.sleep(until: .now.advanced(by: .seconds(3600))) } }
                // Asleep first: a task cancelled before it sleeps never arms a timer.
                try? await Task.sleep(for: .milliseconds(20))
                group.cancelAll()
            }
        }
        #expect(table.waiting == 0)
        let grown = heapInUse() - before
        #expect(grown < 64 << 20, "the heap grew \(grown >> 20) MiB over 200,000 cancelled sleeps")
    }

    /// A cancellation that comes after the deadline woke the sleep leaves nothing behind,
    /// and sleeps with different deadlines each wake at their own: never before it, and
    /// the early ones long before a late one (the timer moves on to the next deadline).
    /// Not their order: on a loaded machine a late timer finds two due at once.
    @Test(.timeLimit(.minutes(1))) func sleepsWakeAtTheirOwnDeadlinesAndALateCancelKeepsNothing() async throws {
        final class Woken: Sendable { let at = Mutex<[Int: ContinuousClock.Instant]>([:]) }
        let woken = Woken()
        let table = SleepTable()
        let start = ContinuousClock.now
        let deadlines: [Duration] = [.seconds(30), .milliseconds(40), .milliseconds(80)]
        await withTaskGroup(of: Void.self) { group in
            for (i, after) in deadlines.enumerated() {
                group.addTask {
                    do {
                        try await table.sleep(until: start.advanced(by: after))
                        woken.at.withLock { $0[i] = .now }
                    } catch {}
                }
            }
            while woken.at.withLock({ $0.count }) < 2 { try? await Task.sleep(for: .milliseconds(5)) }
            group.cancelAll()
        }
        let at = woken.at.withLock { $0 }
        #expect(at[0] == nil, "the 30 s sleep was cancelled, not woken")
        for i in [1, 2] {
            let woke = try #require(at[i])
            #expect(woke >= start.advanced(by: deadlines[i]), "sleep \(i) woke before its deadline")
            #expect(woke < start.advanced(by: .seconds(20)), "sleep \(i) waited for a later deadline")
        }
        #expect(table.waiting == 0)
        let late = Task { try await table.sleep(until: .now.advanced(by: .milliseconds(10))) }
        try await late.value
        late.cancel()
        #expect(table.waiting == 0)
    }
}
