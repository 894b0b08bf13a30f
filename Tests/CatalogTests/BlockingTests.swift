import Foundation
import Testing
@testable import Catalog

/// A stop must not wait for a million-row merge: cancelling the waiting task stops the
/// blocking work at its next look at the flag.
@Suite struct BlockingTests {
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
}
