import Bucket
import Foundation
import Testing
@testable import Upload

@Suite struct UploadPolicyTests {
    let policy = UploadPolicy()

    func error(_ kind: S3Error.Kind, _ code: String = "X", status: Int? = nil) -> S3Error {
        S3Error(kind: kind, status: status, code: code, message: "m")
    }

    func action(_ e: S3Error, credentialRetries: Int = 0, skewRetries: Int = 0) -> UploadPolicy.Action {
        policy.action(for: e, credentialRetries: credentialRetries, skewRetries: skewRetries)
    }

    @Test func expiredCredentialsAreRefreshedOnceThenTheWholePoolBacksOff() {
        let e = error(.credentialsExpired, "ExpiredToken", status: 400)
        #expect(action(e) == .refreshCredentials)
        #expect(action(e, credentialRetries: 1) == .retry(e.description, countAttempt: true, after: nil, outage: true))
    }

    @Test func aSkewedClockIsCorrectedOnceThenTheWholePoolBacksOff() {
        let e = error(.clockSkew, "RequestTimeTooSkewed", status: 403)
        #expect(action(e) == .correctClock)
        #expect(action(e, skewRetries: 1) == .retry(e.description, countAttempt: true, after: nil, outage: true))
        // A credentials refresh earlier in the attempt does not use up the clock's one fix.
        #expect(action(e, credentialRetries: 1) == .correctClock)
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
        #expect(policy.headVerdict(error(.forbidden, "Forbidden", status: 403), freshCredentials: false) == .unknown)
        let bare400 = error(.permanent, "BadRequest", status: 400)
        #expect(policy.headVerdict(bare400, freshCredentials: false) == .staleCredentials)
        #expect(policy.headVerdict(bare400, freshCredentials: true) == .unknown)
        #expect(policy.headVerdict(error(.permanent, "HTTP405", status: 405), freshCredentials: false) == .unknown)
        #expect(policy.headVerdict(error(.transient, "SlowDown", status: 503), freshCredentials: false) == .fail)
        #expect(policy.headVerdict(error(.credentialsExpired, "ExpiredToken", status: 400), freshCredentials: false) == .fail)
    }

    @Test func aRequestIsRetriedInPlaceTwiceForTransientFailuresOnly() {
        let slow = error(.transient, "SlowDown", status: 503)
        #expect(policy.retriesRequest(slow, retriesSoFar: 0))
        #expect(policy.retriesRequest(slow, retriesSoFar: 1))
        #expect(!policy.retriesRequest(slow, retriesSoFar: 2))
        // An answer that may have taken effect is not repeated blindly.
        #expect(!policy.retriesRequest(error(.transient, "MalformedResponse", status: 200), retriesSoFar: 0))
        #expect(!policy.retriesRequest(error(.forbidden, "AccessDenied", status: 403), retriesSoFar: 0))
        #expect(!policy.retriesRequest(error(.contentMismatch, "BadDigest", status: 400), retriesSoFar: 0))
    }

    @Test func requestRetriesWaitASecondAtMost() {
        #expect(policy.requestDelay(retry: 1, random: 0) == 0.1)
        #expect(policy.requestDelay(retry: 1, random: 0.999) < 0.5)
        #expect(policy.requestDelay(retry: 2, random: 0.999) < 1)
        #expect(policy.requestDelay(retry: 2, random: 0.5) == 0.5)
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
