import Foundation

/// One file as `photolalactl files` shows it: where it stands and, once backed up, when.
package struct FileRecord: Sendable, Equatable {
    package var path: String
    package var state: FileState
    package var size: Int64
    package var md5: String?
    /// When its object went up (or was found in the bucket); nil until it is uploaded.
    package var uploadedAt: Date?
    package var lastError: String?
    package var updatedAt: Date

    package init(path: String, state: FileState, size: Int64, md5: String?, uploadedAt: Date?, lastError: String?, updatedAt: Date) {
        self.path = path
        self.state = state
        self.size = size
        self.md5 = md5
        self.uploadedAt = uploadedAt
        self.lastError = lastError
        self.updatedAt = updatedAt
    }
}
