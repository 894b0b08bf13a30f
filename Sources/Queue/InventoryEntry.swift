import Foundation

/// One key the bucket holds, as the last listing saw it (or as this daemon's own upload
/// left it).
package struct InventoryEntry: Sendable, Equatable {
    package var key: String
    package var size: Int64
    /// Without quotes: an MD5 for a single PUT, `md5-N` for a multipart upload (unless the
    /// bucket encrypts with SSE-KMS).
    package var etag: String
    package var storageClass: String
    /// When a listing (or an upload) last saw it.
    package var seenAt: Date

    package init(key: String, size: Int64, etag: String, storageClass: String = "STANDARD", seenAt: Date) {
        self.key = key
        self.size = size
        self.etag = etag
        self.storageClass = storageClass
        self.seenAt = seenAt
    }
}
