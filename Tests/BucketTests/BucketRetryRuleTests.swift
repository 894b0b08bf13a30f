import Foundation
import PhotolalaCore
import Testing
import Bucket

@Suite struct BucketRetryRuleTests {
    let rule = BucketRetryRule()
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    let inventory = BucketBudget(transientRetries: 4, backoff: Backoff(base: 0.5, cap: 4, jitter: .full, floor: 0.2),
                                 repeatsUnreadableAnswers: true)

    func error(_ kind: S3Error.Kind, _ code: String = "X", status: Int? = nil, operation: String = "PutObject",
               serverDate: Date? = nil) -> S3Error {
        S3Error(kind: kind, status: status, code: code, message: "m", serverDate: serverDate, operation: operation)
    }

    func decide(_ e: S3Error, _ attempt: BucketRetryRule.Attempt = .init(), budget: BucketBudget = .handBack,
                random: Double = 0.5) -> BucketRetryRule.Decision {
        rule.decide(e, after: attempt, budget: budget, now: now, random: random)
    }

    @Test func refusedCredentialsAreRefreshedOnceThenHandedBack() {
        let expired = error(.credentialsExpired, "ExpiredToken", status: 400)
        #expect(decide(expired) == .refreshGrant)
        #expect(decide(expired, .init(refreshed: true)) == .handBack)
        // A corrected clock does not use up the credentials' one refresh.
        #expect(decide(expired, .init(corrected: true)) == .refreshGrant)
    }

    @Test func aBare400OnAHeadIsTakenForStaleCredentialsOnce() {
        let bare = error(.permanent, "BadRequest", status: 400, operation: "HeadObject")
        #expect(decide(bare) == .refreshGrant)
        #expect(decide(bare, .init(refreshed: true)) == .handBack)
        // Anywhere else a 400 is what it says.
        #expect(decide(error(.permanent, "BadRequest", status: 400, operation: "PutObject")) == .handBack)
    }

    @Test func aSkewedClockIsCorrectedOnceFromS3sTime() {
        let skewed = error(.clockSkew, "RequestTimeTooSkewed", status: 403, serverDate: now.addingTimeInterval(1800))
        #expect(decide(skewed) == .correctClock(offset: 1800))
        #expect(decide(skewed, .init(corrected: true)) == .handBack)
        // A credentials refresh earlier in the request does not use up the clock's one fix.
        #expect(decide(skewed, .init(refreshed: true)) == .correctClock(offset: 1800))
        #expect(decide(error(.clockSkew, "RequestTimeTooSkewed", status: 403)) == .correctClock(offset: nil))
    }

    @Test func transientFailuresAreRetriedWithinTheBudgetOnly() {
        let slow = error(.transient, "SlowDown", status: 503)
        #expect(decide(slow) == .handBack)
        #expect(decide(slow, budget: inventory, random: 0) == .retry(after: 0.2))
        #expect(decide(slow, .init(transientRetries: 3), budget: inventory, random: 0.5) == .retry(after: 2))
        #expect(decide(slow, .init(transientRetries: 4), budget: inventory) == .handBack)
    }

    @Test func anUnreadableAnswerIsAskedAgainOnlyWhereTheBudgetSaysSo() {
        let garbled = error(.transient, "MalformedResponse", status: 200)
        #expect(decide(garbled, budget: inventory, random: 0) == .retry(after: 0.2))
        var writes = inventory
        writes.repeatsUnreadableAnswers = false
        #expect(decide(garbled, budget: writes) == .handBack)
    }

    @Test func everythingElseGoesBackToTheCaller() {
        for e in [error(.cancelled, "Cancelled"), error(.forbidden, "AccessDenied", status: 403),
                  error(.notFound, "NoSuchKey", status: 404), error(.preconditionFailed, "PreconditionFailed", status: 412),
                  error(.contentMismatch, "BadDigest", status: 400), error(.localFile, "LocalFileError"),
                  error(.unavailable, "NoCredentials")] {
            #expect(decide(e, budget: inventory) == .handBack)
        }
    }
}
