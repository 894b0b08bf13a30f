import Foundation

/// An object the daemon holds as backed up, beside what the inventory lists under its key:
/// what `verify` and the end of a listing compare.
package struct UploadedObject: Sendable, Equatable {
    package var md5: String
    package var size: Int64
    /// The ETag S3 must list for it if this daemon sent it; nil if it was found there.
    package var expectedETag: String?
    package var uploadedAt: Date?
    /// The inventory's row for its key, if any.
    package var listed: InventoryEntry?
    /// A file still holds these bytes, so the object can be sent again if it must.
    package var hasLiveFile: Bool

    package init(md5: String, size: Int64, expectedETag: String?, uploadedAt: Date?, listed: InventoryEntry?, hasLiveFile: Bool) {
        self.md5 = md5
        self.size = size
        self.expectedETag = expectedETag
        self.uploadedAt = uploadedAt
        self.listed = listed
        self.hasLiveFile = hasLiveFile
    }
}
