import Foundation

/// The queue counts of `status`, read in one transaction.
package struct QueueCounts: Sendable, Equatable {
    package var pending = 0
    package var uploading = 0
    package var uploaded = 0
    package var failed = 0
    package var pendingBytes: Int64 = 0
    package var uploadingBytes: Int64 = 0
    package var uploadedBytes: Int64 = 0
    /// When the file waiting longest (pending, queued or uploading) last changed state; nil when none waits.
    package var oldestWaitingAt: Date? = nil
    /// When an object last reached S3 (sent, or found there); nil before the first.
    package var lastUploadAt: Date? = nil
    package init() {}
}
