import PhotolalaCore

/// `photolalactl mirror --json` (mirror.md): the status's `mirror` and, at most `limit`
/// each, the objects waiting, archived, refused and only on this NAS.
package struct MirrorListing: Codable, Sendable, Equatable {
    package struct Item: Codable, Sendable, Equatable {
        package var md5: String
        package var size: Int64
        /// Below the folder; null when not named yet, or for a caller who may not see names.
        @Null package var path: String?
        @Null package var storageClass: String?
        /// The date the copy is (or will be) named and stamped with.
        @Null package var date: String?
        @Null package var lastError: String?
        package var refusals: Int

        package init(md5: String, size: Int64, path: String? = nil, storageClass: String? = nil, date: String? = nil,
                     lastError: String? = nil, refusals: Int = 0) {
            self.md5 = md5
            self.size = size
            self.path = path
            self.storageClass = storageClass
            self.date = date
            self.lastError = lastError
            self.refusals = refusals
        }
    }

    package var mirror: DaemonStatus.Mirror
    package var pending: [Item]
    package var archived: [Item]
    package var refused: [Item]
    package var onlyHere: [Item]
    package var limit: Int

    package init(mirror: DaemonStatus.Mirror, pending: [Item] = [], archived: [Item] = [], refused: [Item] = [], onlyHere: [Item] = [],
                 limit: Int) {
        self.mirror = mirror
        self.pending = pending
        self.archived = archived
        self.refused = refused
        self.onlyHere = onlyHere
        self.limit = limit
    }

    package static let defaultLimit = 20
    package static let maxLimit = 10_000
}
