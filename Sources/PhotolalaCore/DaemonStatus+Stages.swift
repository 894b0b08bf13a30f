/// The status of the stages after the upload: the apps' catalog and thumbnails, what the
/// bucket is known to hold, and the last `verify` (cli.md).
extension DaemonStatus {
    public struct Catalog: Codable, Sendable, Equatable {
        public enum State: String, Codable, Sendable {
            /// `catalog.enabled = false`.
            case off
            /// Nothing to publish.
            case idle
            /// Rows waiting for the next publish.
            case pending
            case publishing
            /// Every row of ours is in the current catalog.
            case published
            /// The current catalog cannot be read; nothing is published over it (`lastError` says why).
            case blocked
        }
        public var state: State
        /// Our rows in the catalog as last published or checked.
        public var rows: Int
        @Null public var publishedAt: String?
        @Null public var lastError: String?
        public init(state: State = .off, rows: Int = 0, publishedAt: String? = nil, lastError: String? = nil) {
            self.state = state
            self.rows = rows
            self.publishedAt = publishedAt
            self.lastError = lastError
        }
    }

    public struct Thumbnails: Codable, Sendable, Equatable {
        public var done: Int
        public var pending: Int
        /// Photos that could not be decoded: backed up, but without a preview or a row.
        public var failed: Int
        public init(done: Int = 0, pending: Int = 0, failed: Int = 0) {
            self.done = done
            self.pending = pending
            self.failed = failed
        }
    }

    public struct Inventory: Codable, Sendable, Equatable {
        /// Objects the last listing found under this user's prefixes.
        public var objects: Int
        @Null public var listedAt: String?
        public init(objects: Int = 0, listedAt: String? = nil) {
            self.objects = objects
            self.listedAt = listedAt
        }
    }

    public struct Verify: Codable, Sendable, Equatable {
        @Null public var checkedAt: String?
        public var checked: Int
        public var missing: Int
        public var mismatched: Int
        public init(checkedAt: String? = nil, checked: Int = 0, missing: Int = 0, mismatched: Int = 0) {
            self.checkedAt = checkedAt
            self.checked = checked
            self.missing = missing
            self.mismatched = mismatched
        }
    }
}
