import Bucket
import Foundation
import PhotolalaCore

/// Every retry decision of the uploader, as a pure value: what an S3 error means for the
/// object (retry, refresh, re-read, give up) and how long each kind of wait is. A change
/// of the retry policy is this file and its test.
package struct UploadPolicy: Sendable, Equatable {
    /// An object put back in the queue: 4 s, 8 s, … up to 5 minutes, full jitter (AWS's
    /// advice for many clients), never under a second.
    package var object = Backoff(base: 4, cap: 300, jitter: .full, floor: 1)
    /// One request tried again in place, as the AWS SDKs do, before the object goes back
    /// to the queue: a flaky link costs a second here and there, not minutes.
    package var request = Backoff(base: 0.5, cap: 1, jitter: .full, floor: 0.1)
    package var requestRetries = 2
    /// S3 failing as a whole, shared by every worker (see `OutageBackoff`).
    package var outage = OutageBackoff(base: 1, cap: 300)
    /// Writing a result the database refused (a full disk): 1 s doubling to 30 s.
    package var recording = Backoff(base: 1, cap: 30, jitter: .none)

    package init() {}

    /// What to do after an attempt at an object failed.
    package enum Action: Sendable, Equatable {
        /// Fetch new STS credentials and try again at once (the first refusal only).
        case refreshCredentials
        /// Sign with S3's clock and try again at once (the first skew only).
        case correctClock
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

    /// - Parameters: `credentialRetries` / `skewRetries`: how often this attempt already
    ///   refreshed credentials or corrected the clock.
    package func action(for error: S3Error, credentialRetries: Int, skewRetries: Int) -> Action {
        switch error.kind {
        case .credentialsExpired where credentialRetries == 0:
            return .refreshCredentials
        case .clockSkew where skewRetries == 0:
            return .correctClock
        case .cancelled, .unavailable:
            // Stopping, signed out or paused: the object waits, uncounted.
            return .cancelled
        case .transient:
            // A local database error is not S3's: it does not hold back the other workers.
            return .retry(error.description, countAttempt: true, after: nil, outage: error.code != "LocalDatabase")
        case .credentialsExpired, .clockSkew:
            // Refused again with fresh credentials (or a corrected clock): S3 will refuse
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

    /// What a failed `HeadObject` means. A HEAD only saves sending bytes, so it never makes
    /// a file `failed` by itself.
    package enum HeadVerdict: Sendable, Equatable {
        /// Existence unknown: upload, and let the PUT's answer say what is wrong.
        case unknown
        /// A bare 400 is how `ExpiredToken` / `InvalidToken` arrive on a HEAD (no body):
        /// taken for stale credentials the first time.
        case staleCredentials
        /// Anything else: the attempt fails with this error.
        case fail
    }

    /// - Parameter freshCredentials: the credentials were already refreshed for this attempt.
    package func headVerdict(_ error: S3Error, freshCredentials: Bool) -> HeadVerdict {
        switch error.kind {
        case .forbidden: return .unknown
        case .permanent where error.status == 400 && !freshCredentials: return .staleCredentials
        case .permanent: return .unknown
        default: return .fail
        }
    }

    /// Whether a request that failed is tried again in place. An answer that arrived but
    /// could not be read (`MalformedResponse`) is not repeated blindly: the request may
    /// have taken effect, and the object-level retry looks (HEAD, ListParts) first.
    package func retriesRequest(_ error: S3Error, retriesSoFar: Int) -> Bool {
        error.kind == .transient && error.code != "MalformedResponse" && retriesSoFar < requestRetries
    }

    package func requestDelay(retry: Int, random: Double) -> TimeInterval {
        request.delay(after: retry, random: random)
    }

    /// - Parameter attempts: the object's failed attempts, this one included.
    package func objectDelay(attempts: Int, random: Double) -> TimeInterval {
        object.delay(after: attempts, random: random)
    }
}
