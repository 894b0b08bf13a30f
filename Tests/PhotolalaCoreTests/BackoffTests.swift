import Foundation
import Testing
import PhotolalaCore

@Suite struct BackoffTests {
    @Test func stepsDoubleFromBaseUpToTheCap() {
        let b = Backoff(base: 2, cap: 300)
        #expect(b.step(after: 0) == 0)
        #expect((1...9).map { b.step(after: $0) } == [2, 4, 8, 16, 32, 64, 128, 256, 300])
        #expect(b.step(after: 10_000) == 300)
    }

    @Test func capBelowBaseIsRaisedToBase() {
        #expect(Backoff(base: 10, cap: 1).cap == 10)
    }

    @Test func jitterKinds() {
        let none = Backoff(base: 4, cap: 100, jitter: .none)
        #expect(none.delay(after: 2, random: 0) == 8)
        #expect(none.delay(after: 2, random: 0.99) == 8)
        let full = Backoff(base: 4, cap: 100, jitter: .full)
        #expect(full.delay(after: 2, random: 0) == 0)
        #expect(full.delay(after: 2, random: 0.5) == 4)
        let equal = Backoff(base: 4, cap: 100, jitter: .equal)
        #expect(equal.delay(after: 2, random: 0) == 4)
        #expect(equal.delay(after: 2, random: 0.5) == 6)
        #expect(equal.delay(after: 2, random: 0.999_999) < 8)
    }

    @Test func floorHoldsWhateverTheDraw() {
        let b = Backoff(base: 4, cap: 300, jitter: .full, floor: 1)
        #expect(b.delay(after: 1, random: 0) == 1)
        #expect(b.delay(after: 3, random: 0.5) == 8)
    }

    @Test func failCountsAndResetStartsOver() {
        var b = Backoff(base: 5, cap: 300, jitter: .none)
        #expect(b.fail(random: 0) == 5)
        #expect(b.fail(random: 0) == 10)
        #expect(b.fail(random: 0) == 20)
        #expect(b.failures == 3)
        b.reset()
        #expect(b.failures == 0)
        #expect(b.fail(random: 0) == 5)
    }

    @Test func durationRoundsToMilliseconds() {
        #expect(Backoff.duration(1.5) == .milliseconds(1500))
        #expect(Backoff.duration(0.0004) == .zero)
    }

    @Test func hugeFailureCountsStayFiniteAtTheCap() {
        var b = Backoff(base: 1, cap: 60, jitter: .equal)
        for _ in 0..<5000 { _ = b.fail(random: 0.3) }
        #expect(b.delay(after: b.failures, random: 0.3) == 60 * 0.65)
    }
}
