import Bucket
import Foundation
import Testing
import Upload

@Suite struct UploadPolicyTests {
    let policy = UploadPolicy()

    func error(_ kind: S3Error.Kind, _ code: String = "X", status: Int? = nil) -> S3Error {
        S3Error(kind: kind, status: status, code: code, message: "m")
    }

    func action(_ e: S3Error) -> UploadPolicy.Action {
        policy.action(for: e)
    }

    /// What the bucket session decides for one of the uploader's requests, under its budget.
    func inPlace(_ e: S3Error, retriesSoFar: Int = 0, random: Double = 0.5) -> BucketRetryRule.Decision {
        BucketRetryRule().decide(e, after: .init(refreshed: true, corrected: true, transientRetries: retriesSoFar),
                                 budget: policy.request, now: Date(timeIntervalSince1970: 0), random: random)
    }

    // The first refusal and the first skew of a request are the session's to fix
    // (BucketRetryRuleTests); what still comes back is S3 refusing everyone.
    @Test func credentialsRefusedAfterTheSessionsRefreshBackTheWholePoolOff() {
        let e = error(.credentialsExpired, "ExpiredToken", status: 400)
        #expect(action(e) == .retry(e.description, countAttempt: true, after: nil, outage: true))
    }

    @Test func aClockStillSkewedAfterTheSessionsCorrectionBacksTheWholePoolOff() {
        let e = error(.clockSkew, "RequestTimeTooSkewed", status: 403)
        #expect(action(e) == .retry(e.description, countAttempt: true, after: nil, outage: true))
    }

    @Test func transientFailuresAreOutagesUnlessTheyAreOurDatabase() {
        let slow = error(.transient, "SlowDown", status: 503)
        #expect(action(slow) == .retry(slow.description, countAttempt: true, after: nil, outage: true))
        let reset = error(.transient, "NetworkError")
        #expect(action(reset) == .retry(reset.description, countAttempt: true, after: nil, outage: true))
        let local = error(.transient, "LocalDatabase")
        #expect(action(local) == .retry(local.description, countAttempt: true, after: nil, outage: false))
    }

    @Test func aBadDigestMeansTheFileChangedAndIsReadAgain() {
        #expect(action(error(.contentMismatch, "BadDigest", status: 400)) == .sourceChanged)
        #expect(action(error(.contentMismatch, "XAmzContentSHA256Mismatch", status: 400)) == .sourceChanged)
    }

    @Test func aLocalReadErrorLooksAtTheFileAgain() {
        let e = error(.localFile, "LocalFileError")
        #expect(action(e) == .recheckSource(e.description))
    }

    @Test func aForgottenMultipartUploadStartsAgainButAMissingKeyFails() {
        #expect(action(error(.notFound, "NoSuchUpload", status: 404)) == .restartMultipart)
        let bucket = error(.notFound, "NoSuchBucket", status: 404)
        #expect(action(bucket) == .failed(bucket.description))
    }

    @Test func refusalsS3WillRepeatMakeTheFileFailed() {
        for e in [error(.forbidden, "AccessDenied", status: 403), error(.permanent, "SignatureDoesNotMatch", status: 403),
                  error(.permanent, "EntityTooLarge", status: 400)] {
            #expect(action(e) == .failed(e.description))
        }
    }

    @Test func cancellationIsNeitherARetryNorAFailure() {
        #expect(action(error(.cancelled, "Cancelled")) == .cancelled)
    }

    @Test func aHeadIsOnlyAHint() {
        #expect(policy.headLeavesPresenceUnknown(error(.forbidden, "Forbidden", status: 403)))
        // A bare 400 is taken for stale credentials once by the session; handed back after
        // that, it leaves existence unknown.
        #expect(policy.headLeavesPresenceUnknown(error(.permanent, "BadRequest", status: 400)))
        #expect(policy.headLeavesPresenceUnknown(error(.permanent, "HTTP405", status: 405)))
        #expect(!policy.headLeavesPresenceUnknown(error(.transient, "SlowDown", status: 503)))
        #expect(!policy.headLeavesPresenceUnknown(error(.credentialsExpired, "ExpiredToken", status: 400)))
    }

    @Test func aRequestIsRetriedInPlaceTwiceForTransientFailuresOnly() {
        let slow = error(.transient, "SlowDown", status: 503)
        #expect(inPlace(slow, retriesSoFar: 0) != .handBack)
        #expect(inPlace(slow, retriesSoFar: 1) != .handBack)
        #expect(inPlace(slow, retriesSoFar: 2) == .handBack)
        // An answer that may have taken effect is not repeated blindly.
        #expect(inPlace(error(.transient, "MalformedResponse", status: 200)) == .handBack)
        #expect(inPlace(error(.forbidden, "AccessDenied", status: 403)) == .handBack)
        #expect(inPlace(error(.contentMismatch, "BadDigest", status: 400)) == .handBack)
    }

    @Test func requestRetriesWaitASecondAtMost() {
        let slow = error(.transient, "SlowDown", status: 503)
        #expect(inPlace(slow, retriesSoFar: 0, random: 0) == .retry(after: 0.1))
        guard case .retry(let first) = inPlace(slow, retriesSoFar: 0, random: 0.999),
              case .retry(let second) = inPlace(slow, retriesSoFar: 1, random: 0.999) else {
            Issue.record("a transient failure is retried in place")
            return
        }
        #expect(first < 0.5)
        #expect(second < 1)
        #expect(inPlace(slow, retriesSoFar: 1, random: 0.5) == .retry(after: 0.5))
    }

    @Test func objectRetriesGrowToFiveMinutesAndNeverUnderASecond() {
        #expect(policy.objectDelay(attempts: 1, random: 0) == 1)
        #expect(policy.objectDelay(attempts: 1, random: 0.5) == 2)
        #expect(policy.objectDelay(attempts: 3, random: 1) == 16)
        #expect(policy.objectDelay(attempts: 20, random: 1) == 300)
        #expect(policy.objectDelay(attempts: 0, random: 1) == 1)
    }

    @Test func recordingRetriesDoubleToHalfAMinute() {
        var r = policy.recording
        let waits = (0..<7).map { _ in r.fail(random: 0.3) }
        #expect(waits == [1, 2, 4, 8, 16, 30, 30])
    }

    @Test func theOutageScheduleIsOneSecondToFiveMinutes() {
        #expect(policy.outage.schedule.base == 1 && policy.outage.schedule.cap == 300)
        #expect(!policy.outage.isActive)
    }
}
