import Bucket
import Queue

/// "Is this thumbnail already in the bucket?" (a phone may have made it; app-catalog.md
/// says an existing one is kept). The bucket's inventory answers when a complete listing
/// of `thumbnails/{userId}/` knows (s3-layout.md: listed, not asked one key at a time);
/// only without one is S3 asked with a HEAD.
struct ThumbnailPresence: Sendable {
    let database: QueueDatabase

    /// nil when nobody can say (no listing, HEAD forbidden by a stricter policy): then the
    /// upload's `If-None-Match: *` keeps whatever is there.
    func exists(key: String, client: S3Client, credentials: S3Credentials) async throws(S3Error) -> Bool? {
        switch try? database.inventoryPresence(key: key) {
        case .present?: return true
        case .absent?: return false
        case .unknown?, nil: break
        }
        do {
            return try await client.headObject(key: key, credentials: credentials) != nil
        } catch where error.kind == .forbidden {
            return nil
        }
    }

    /// A thumbnail just written (or found taken by a 412) is in the bucket: the inventory
    /// learns it at once instead of at the next listing.
    func stored(key: String, size: Int64, etag: String) {
        try? database.recordStored(key: key, size: size, etag: etag)
    }
}
