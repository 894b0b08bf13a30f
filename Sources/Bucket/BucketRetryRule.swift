import Foundation
import PhotolalaCore

/// How many times a stage lets its `BucketSession` try a request again in place when S3
/// (or the way to it) fails transiently, and how long it waits in between. Each stage
/// passes its own: the uploader few and short (its queue retries the object), the
/// inventory more (a listing cut short starts over).
package struct BucketBudget: Sendable, Equatable {
    /// Transient failures (5xx, throttling, resets, time-outs) tried again in place; 0:
    /// each is handed back at once, for the stage's own schedule.
    package var transientRetries: Int
    /// The wait before each of those tries.
    package var backoff: Backoff
    /// Whether an answer that arrived but could not be read (`MalformedResponse`) is asked
    /// again: yes for reads, which are idempotent; no where the request may have taken
    /// effect and the caller looks first (HEAD, ListParts).
    package var repeatsUnreadableAnswers: Bool

    package init(transientRetries: Int, backoff: Backoff, repeatsUnreadableAnswers: Bool) {
        self.transientRetries = transientRetries
        self.backoff = backoff
        self.repeatsUnreadableAnswers = repeatsUnreadableAnswers
    }

    /// Nothing tried again in place: every transient failure goes back to the caller.
    package static let handBack = BucketBudget(transientRetries: 0, backoff: Backoff(base: 1, cap: 1),
                                               repeatsUnreadableAnswers: false)
}

/// The one rule for a failed bucket request, as a pure value (tested with plain numbers;
/// `BucketSession` performs it): S3 refused the credentials → refresh once and retry; the
/// clock is off → correct once and retry; transient → retry within the caller's budget;
/// anything else (and cancellation) → hand the error back.
package struct BucketRetryRule: Sendable, Equatable {
    /// What one request went through so far.
    package struct Attempt: Sendable, Equatable {
        /// The grant was refreshed once already.
        package var refreshed = false
        /// The clock was corrected once already.
        package var corrected = false
        /// Transient failures tried again so far.
        package var transientRetries = 0

        package init(refreshed: Bool = false, corrected: Bool = false, transientRetries: Int = 0) {
            self.refreshed = refreshed
            self.corrected = corrected
            self.transientRetries = transientRetries
        }
    }

    package enum Decision: Sendable, Equatable {
        /// Tell the grant source these credentials were refused, and try again with new ones.
        case refreshGrant
        /// Sign with the local clock plus `offset` (S3's time minus ours; nil when S3 did not
        /// say its time) and try again.
        case correctClock(offset: TimeInterval?)
        /// Try again after `after` seconds.
        case retry(after: TimeInterval)
        /// Give the error to the caller.
        case handBack
    }

    package init() {}

    /// - Parameters:
    ///   - now: the local time the error arrived (the skew is measured from it).
    ///   - random: a draw in 0..<1 for the budget's jitter.
    package func decide(_ error: S3Error, after attempt: Attempt, budget: BucketBudget, now: Date,
                        random: Double) -> Decision {
        switch error.kind {
        case .credentialsExpired where !attempt.refreshed:
            return .refreshGrant
        // A HEAD answer has no body: a bare 400 is how ExpiredToken / InvalidToken arrive.
        case .permanent where error.status == 400 && error.operation == "HeadObject" && !attempt.refreshed:
            return .refreshGrant
        case .clockSkew where !attempt.corrected:
            return .correctClock(offset: error.clockOffset(localNow: now))
        case .transient where attempt.transientRetries < budget.transientRetries
            && (budget.repeatsUnreadableAnswers || error.code != "MalformedResponse"):
            return .retry(after: budget.backoff.delay(after: attempt.transientRetries + 1, random: random))
        default:
            return .handBack
        }
    }
}
