import Bucket

/// The bucket as the catalog stage uses it: the user's catalog objects, and whether a
/// photo is still there. `BucketCatalogStore` is the real one; tests of the publishing logic
/// may use one in memory.
package protocol CatalogStore: Sendable {
    var userId: String { get }
    /// The pointer, or nil when the user has no catalog yet.
    func readPointer() async throws(S3Error) -> StoredPointer?
    /// Streams the snapshot named `md5` into the file at `path` and returns the MD5 of the
    /// bytes that arrived, or nil when there is no such snapshot.
    func downloadSnapshot(md5: String, to path: String) async throws(S3Error) -> String?
    /// Uploads the file at `path` (whose MD5 is `md5`) as a snapshot, in one PUT or in parts.
    func uploadSnapshot(path: String, md5: String, size: Int64) async throws(S3Error)
    /// Replaces the pointer with one naming `md5`; returns its new ETag. A condition that
    /// does not hold throws `.preconditionFailed`.
    func writePointer(md5: String, condition: PointerCondition) async throws(S3Error) -> String
    /// Whether `photos/{userId}/{md5}.dat` is still there; true when the store will not say.
    func photoExists(md5: String) async throws(S3Error) -> Bool
    /// Every photo MD5 under `photos/{userId}/`, a page at a time.
    func listPhotos(_ page: @Sendable ([String]) throws -> Void) async throws(S3Error)
}

/// The catalog's pointer as read from the bucket.
package struct StoredPointer: Sendable, Equatable {
    package var body: [UInt8]
    /// Without quotes.
    package var etag: String

    package init(body: [UInt8], etag: String) {
        self.body = body
        self.etag = etag
    }
}

/// How the pointer is replaced (app-catalog.md step 4).
package enum PointerCondition: Sendable, Equatable {
    /// Only if it still has this ETag (it was read with it).
    case ifMatch(String)
    /// Only if there is none yet.
    case ifNoneMatch
    /// Whatever is there: only for a store that mishandles conditions, and then read back.
    case unconditional
}
