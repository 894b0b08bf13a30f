import Foundation
import Testing
@testable import Catalog

/// A stop must not wait for a million-row merge: cancelling the waiting task stops the
/// blocking work at its next look at the flag.
@Suite struct BlockingTests {
    @Test func cancellingTheWaiterStopsTheWorkAtItsNextCheck() async throws {
        let started = ContinuousClock.now
        let task = Task {
            try await Blocking.run { stop in
                while true {
                    try stop.check()
                    usleep(1000)
                }
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test func workThatIsNotCancelledReturnsItsValue() async throws {
        #expect(try await Blocking.run { stop in try stop.check(); return 42 } == 42)
    }
}
