import Foundation

/// One key the bucket holds, as the last listing saw it (or as this daemon's own upload
/// left it).
public struct InventoryEntry: Sendable, Equatable {
    public var key: String
    public var size: Int64
    /// Without quotes: an MD5 for a single PUT, `md5-N` for a multipart upload (unless the
    /// bucket encrypts with SSE-KMS).
    public var etag: String
    public var storageClass: String
    /// When a listing (or an upload) last saw it.
    public var seenAt: Date

    public init(key: String, size: Int64, etag: String, storageClass: String = "STANDARD", seenAt: Date) {
        self.key = key
        self.size = size
        self.etag = etag
        self.storageClass = storageClass
        self.seenAt = seenAt
    }
}
