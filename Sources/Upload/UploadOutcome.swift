import Foundation

/// What became of one attempt at one object. The uploader records it in the queue; the
/// outage backoff reads it to tell "S3 answered" from "S3 is failing".
enum UploadOutcome: Sendable, Equatable {
    /// `etag`: what S3 lists for the bytes sent (see `ETag`), recorded for `verify`.
    case uploaded(sent: Int64, etag: String, key: String)
    case alreadyPresent
    /// `outage`: S3 failed to answer properly (5xx, throttling, a reset, a time-out),
    /// which makes every worker back off, not just this object. `after` nil: the object's
    /// own backoff decides.
    case retry(String, countAttempt: Bool, after: TimeInterval?, outage: Bool = false)
    case failed(String)
    /// The file no longer holds the queued bytes: hashed again (or, gone, dropped).
    case sourceChanged(gone: Bool)
    case cancelled
}
