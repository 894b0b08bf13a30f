import Bucket
import Testing
@testable import Keys

/// When a look at the account key that ended early is tried again.
@Suite struct KeyLookRetryTests {
    let down = S3Error(kind: .transient, status: 503, code: "ServiceUnavailable", message: "down")

    func delay(_ next: KeyLookRetry.Next) -> Double? {
        if case .after(let seconds, _) = next { return seconds }
        return nil
    }

    @Test func aLostRaceIsLookedAtAgainAtOnceButAStoreThatKeepsRefusingIsNotRaced() {
        var retry = KeyLookRetry()
        for _ in 1..<KeyLookRetry.conflictsInARow { #expect(retry.failed(.again, random: 0) == .now) }
        guard case .after(let seconds, let why) = retry.failed(.again, random: 0) else {
            Issue.record("the last conflict in a row backs off")
            return
        }
        #expect(seconds == 1 && why.contains("If-Match"))
        // Counted afresh after it was said.
        #expect(retry.failed(.again, random: 0) == .now)
    }

    @Test func aLookThatEndedWellForgetsTheConflictsAndTheBackoff() {
        var retry = KeyLookRetry()
        #expect(retry.failed(.again, random: 0) == .now)
        #expect(delay(retry.failed(.bucket(down), random: 0)) == 1)
        #expect(delay(retry.failed(.bucket(down), random: 0)) == 2)
        retry.succeeded()
        #expect(delay(retry.failed(.bucket(down), random: 0)) == 1)
        for _ in 1..<KeyLookRetry.conflictsInARow { #expect(retry.failed(.again, random: 0) == .now) }
    }

    @Test func anotherSignInStartsTheBackoffAgainButKeepsCountingConflicts() {
        var retry = KeyLookRetry()
        #expect(retry.failed(.again, random: 0) == .now)
        _ = retry.failed(.local("x"), random: 0)
        _ = retry.failed(.local("x"), random: 0)
        retry.restart()
        #expect(delay(retry.failed(.local("x"), random: 0)) == 1)
        #expect(retry.failed(.again, random: 0) == .now)
        #expect(delay(retry.failed(.again, random: 0)) != nil)
    }

    @Test func failuresBackOffUpToFiveMinutesWithTheirSentence() {
        var retry = KeyLookRetry()
        #expect(retry.failed(.bucket(down), random: 1) == .after(2, why: "cannot check this account's key in the bucket: \(down)"))
        #expect(retry.failed(.local("cannot save this NAS's key file: EIO"), random: 1)
                == .after(4, why: "cannot save this NAS's key file: EIO"))
        for _ in 0..<20 { _ = retry.failed(.bucket(down), random: 1) }
        #expect(delay(retry.failed(.bucket(down), random: 1)) == 300)
    }

    @Test func noGrantWaitsForTheAccountWithoutCountingAFailure() {
        var retry = KeyLookRetry()
        #expect(retry.failed(.unavailable, random: 0) == .wake)
        #expect(delay(retry.failed(.bucket(down), random: 0)) == 1)
        #expect(KeyLookFailure(S3Error(kind: .unavailable, code: "", message: "")).isUnavailable)
        #expect(KeyLookFailure(S3Error(kind: .cancelled, code: "", message: "")).isUnavailable)
        #expect(!KeyLookFailure(down).isUnavailable)
    }
}

extension KeyLookFailure {
    var isUnavailable: Bool {
        if case .unavailable = self { return true }
        return false
    }
}
