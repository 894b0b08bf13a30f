import Foundation

/// One key of a bucket listing (`ListObjectsV2`): what the S3 client reads from a page and
/// what the inventory records, the same value on both sides.
package struct ListedObject: Sendable, Equatable {
    package var key: String
    package var size: Int64
    /// Without the quotes: the hex MD5 of a single-PUT object, `md5-N` for a multipart
    /// one (unless the bucket encrypts with SSE-KMS).
    package var etag: String
    /// STANDARD when S3 says nothing.
    package var storageClass: String
    /// When it was written to the bucket, if S3 said: the "went up" time of a photo found
    /// there (uploaded by a phone, another NAS, an earlier install).
    package var lastModified: Date?

    package init(key: String, size: Int64, etag: String, storageClass: String = "STANDARD", lastModified: Date? = nil) {
        self.key = key
        self.size = size
        self.etag = etag
        self.storageClass = storageClass
        self.lastModified = lastModified
    }
}
