/// The queue counts of `status`, read in one query.
public struct QueueCounts: Sendable, Equatable {
    public var pending = 0
    public var uploading = 0
    public var uploaded = 0
    public var failed = 0
    public var pendingBytes: Int64 = 0
    public var uploadingBytes: Int64 = 0
    public var uploadedBytes: Int64 = 0
    public init() {}
}
