import Foundation

/// One file as `photolalactl files` shows it: where it stands and, once backed up, when.
public struct FileRecord: Sendable, Equatable {
    public var path: String
    public var state: FileState
    public var size: Int64
    public var md5: String?
    /// When its object went up (or was found in the bucket); nil until it is uploaded.
    public var uploadedAt: Date?
    public var lastError: String?
    public var updatedAt: Date

    public init(path: String, state: FileState, size: Int64, md5: String?, uploadedAt: Date?, lastError: String?, updatedAt: Date) {
        self.path = path
        self.state = state
        self.size = size
        self.md5 = md5
        self.uploadedAt = uploadedAt
        self.lastError = lastError
        self.updatedAt = updatedAt
    }
}
