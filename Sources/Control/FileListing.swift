import PhotolalaCore

/// `photolalactl files PATH`: one page of the files at or under a path, in path order.
/// The command asks again with `after` set to `next` until `next` is null.
public struct FileListing: Codable, Sendable, Equatable {
    public struct Item: Codable, Sendable, Equatable {
        public var path: String
        /// cli.md's words: `pending`, `uploading`, `uploaded`, `failed`, or `gone` (deleted
        /// from the folder since; its object stays in the bucket).
        public var state: String
        public var size: Int64
        @Null public var md5: String?
        /// `photos/{userId}/{md5}.dat` once hashed (null before, or while signed out).
        @Null public var key: String?
        @Null public var uploadedAt: String?
        @Null public var lastError: String?

        public init(path: String, state: String, size: Int64, md5: String?, key: String?, uploadedAt: String?, lastError: String?) {
            self.path = path
            self.state = state
            self.size = size
            self.md5 = md5
            self.key = key
            self.uploadedAt = uploadedAt
            self.lastError = lastError
        }
    }

    public var items: [Item]
    /// Where the next page starts; null on the last one.
    @Null public var next: String?
    /// When nothing at the path is tracked: why, in words (not a photo, not seen yet, …).
    @Null public var note: String?

    public init(items: [Item], next: String? = nil, note: String? = nil) {
        self.items = items
        self.next = next
        self.note = note
    }
}

/// `POST /v1/files`: the path (absolute) and the page wanted.
public struct FilesRequest: Codable, Sendable, Equatable {
    public var path: String
    @Null public var after: String?
    @Null public var limit: Int?

    public init(path: String, after: String? = nil, limit: Int? = nil) {
        self.path = path
        self.after = after
        self.limit = limit
    }
}
