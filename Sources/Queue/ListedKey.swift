import Foundation

/// One key of a listing page, as the inventory records it.
public struct ListedKey: Sendable, Equatable {
    public var key: String
    public var size: Int64
    public var etag: String
    public var storageClass: String
    /// When it was written to the bucket, if S3 said: the "went up" time of a photo found
    /// there (uploaded by a phone, another NAS, an earlier install).
    public var lastModified: Date?

    public init(key: String, size: Int64, etag: String, storageClass: String = "STANDARD", lastModified: Date? = nil) {
        self.key = key
        self.size = size
        self.etag = etag
        self.storageClass = storageClass
        self.lastModified = lastModified
    }
}
