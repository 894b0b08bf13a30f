import Foundation

/// The queue counts of `status`, read in one transaction.
public struct QueueCounts: Sendable, Equatable {
    public var pending = 0
    public var uploading = 0
    public var uploaded = 0
    public var failed = 0
    public var pendingBytes: Int64 = 0
    public var uploadingBytes: Int64 = 0
    public var uploadedBytes: Int64 = 0
    /// When the file waiting longest (pending, queued or uploading) last changed state; nil when none waits.
    public var oldestWaitingAt: Date? = nil
    /// When an object last reached S3 (sent, or found there); nil before the first.
    public var lastUploadAt: Date? = nil
    public init() {}
}
