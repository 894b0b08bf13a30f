import Bucket
import Foundation
import PhotolalaCore

/// Every retry decision of the uploader, as a pure value: what an S3 error the bucket
/// session handed back means for the object (retry, re-read, give up) and how long each
/// kind of wait is. Refreshing refused credentials and correcting a skewed clock are the
/// session's (`BucketRetryRule`), once per request: what reaches this policy already had
/// its one refresh or correction.
package struct UploadPolicy: Sendable, Equatable {
    /// An object put back in the queue: 4 s, 8 s, … up to 5 minutes, full jitter (AWS's
    /// advice for many clients), never under a second.
    package var object = Backoff(base: 4, cap: 300, jitter: .full, floor: 1)
    /// One request tried again in place by the bucket session, as the AWS SDKs do, before
    /// the object goes back to the queue: a flaky link costs a second here and there, not
    /// minutes. An answer that arrived but could not be read (`MalformedResponse`) is not
    /// repeated blindly: the request may have taken effect, and the object's next attempt
    /// looks (HEAD, ListParts) first.
    package var request = BucketBudget(transientRetries: 2, backoff: Backoff(base: 0.5, cap: 1, jitter: .full, floor: 0.1),
                                       repeatsUnreadableAnswers: false)
    /// S3 failing as a whole, shared by every worker (see `OutageBackoff`).
    package var outage = OutageBackoff(base: 1, cap: 300)
    /// Writing a result the database refused (a full disk): 1 s doubling to 30 s.
    package var recording = Backoff(base: 1, cap: 30, jitter: .none)

    package init() {}

    /// What to do after an attempt at an object failed.
    package enum Action: Sendable, Equatable {
        /// Back to the queue; `after` nil means the object's backoff.
        case retry(String, countAttempt: Bool, after: TimeInterval?, outage: Bool)
        /// The body S3 received does not match the MD5 the key names (`BadDigest`): the
        /// file changed under the upload, so it is hashed again — never a `failed` loop.
        case sourceChanged
        /// The file could not be read: what it is now decides (see `SourceCheck`).
        case recheckSource(String)
        /// S3 forgot the multipart upload: start it again, at once.
        case restartMultipart
        /// `If-None-Match: *` found the key taken: another device uploaded these bytes
        /// meanwhile (the key is the content's MD5), so it is backed up.
        case alreadyPresent
        case failed(String)
        case cancelled
    }

    package func action(for error: S3Error) -> Action {
        switch error.kind {
        case .cancelled, .unavailable:
            // Stopping, signed out or paused: the object waits, uncounted.
            return .cancelled
        case .transient:
            // A local database error is not S3's: it does not hold back the other workers.
            return .retry(error.description, countAttempt: true, after: nil, outage: error.code != "LocalDatabase")
        case .credentialsExpired, .clockSkew:
            // Refused again with fresh credentials (or a corrected clock: the session's
            // one refresh or correction is behind us): S3 will refuse
            // the next object too. Without the shared backoff each worker would fetch new
            // credentials for every object — the suite measured 25 sts-token calls and 100
            // S3 requests a second while S3 refused every key.
            return .retry(error.description, countAttempt: true, after: nil, outage: true)
        case .contentMismatch:
            return .sourceChanged
        case .localFile:
            return .recheckSource(error.description)
        case .notFound where error.code == "NoSuchUpload":
            return .restartMultipart
        case .preconditionFailed:
            return .alreadyPresent
        case .forbidden, .notFound, .permanent:
            return .failed(error.description)
        }
    }

    /// Whether a failed `HeadObject` still lets the upload go on. A HEAD only saves
    /// sending bytes, so it never makes a file `failed` by itself: a refusal (403, or a 4xx
    /// the session did not take for stale credentials) leaves existence unknown, and the
    /// PUT's answer says what is wrong; anything else fails the attempt.
    package func headLeavesPresenceUnknown(_ error: S3Error) -> Bool {
        error.kind == .forbidden || error.kind == .permanent
    }

    /// - Parameter attempts: the object's failed attempts, this one included.
    package func objectDelay(attempts: Int, random: Double) -> TimeInterval {
        object.delay(after: attempts, random: random)
    }
}
