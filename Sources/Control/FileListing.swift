import PhotolalaCore

/// `photolalactl files PATH`: one page of the files at or under a path, in path order.
/// The command asks again with `after` set to `next` until `next` is null.
package struct FileListing: Codable, Sendable, Equatable {
    package struct Item: Codable, Sendable, Equatable {
        package var path: String
        /// cli.md's words: `pending`, `uploading`, `uploaded`, `failed`, or `gone` (deleted
        /// from the folder since; its object stays in the bucket).
        package var state: String
        package var size: Int64
        @Null package var md5: String?
        /// `photos/{userId}/{md5}.dat` once hashed (null before, or while signed out).
        @Null package var key: String?
        @Null package var uploadedAt: String?
        @Null package var lastError: String?

        package init(path: String, state: String, size: Int64, md5: String?, key: String?, uploadedAt: String?, lastError: String?) {
            self.path = path
            self.state = state
            self.size = size
            self.md5 = md5
            self.key = key
            self.uploadedAt = uploadedAt
            self.lastError = lastError
        }
    }

    package var items: [Item]
    /// Where the next page starts; null on the last one.
    @Null package var next: String?
    /// When nothing at the path is tracked: why, in words (not a photo, not seen yet, …).
    @Null package var note: String?

    package init(items: [Item], next: String? = nil, note: String? = nil) {
        self.items = items
        self.next = next
        self.note = note
    }
}

/// `POST /v1/files`: the path (absolute) and the page wanted.
package struct FilesRequest: Codable, Sendable, Equatable {
    package var path: String
    @Null package var after: String?
    @Null package var limit: Int?

    package init(path: String, after: String? = nil, limit: Int? = nil) {
        self.path = path
        self.after = after
        self.limit = limit
    }
}
