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
        /// Our rows in the catalog as last published or checked: the photos of this NAS
        /// the apps show.
        public var rows: Int
        @Null public var publishedAt: String?
        @Null public var lastError: String?
        /// Photos ready for the apps whose rows wait for the next publish.
        public var pending: Int
        /// Rows in the catalog from every device (phones, other NASes, this one).
        public var total: Int
        /// The last time the catalog was read (a check or a publish).
        @Null public var checkedAt: String?
        /// False when the store refused a conditional write whose condition held (Ceph
        /// Pacific does, for a quoted If-Match): the pointer is then written and read back.
        public var conditionalWrites: Bool
        public init(state: State = .off, rows: Int = 0, publishedAt: String? = nil, lastError: String? = nil,
                    pending: Int = 0, total: Int = 0, checkedAt: String? = nil, conditionalWrites: Bool = true) {
            self.state = state
            self.rows = rows
            self.publishedAt = publishedAt
            self.lastError = lastError
            self.pending = pending
            self.total = total
            self.checkedAt = checkedAt
            self.conditionalWrites = conditionalWrites
        }

        /// Reading a status of a daemon older than these fields: what it did not say is zero.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            state = try c.decode(State.self, forKey: .state)
            rows = try c.decodeIfPresent(Int.self, forKey: .rows) ?? 0
            _publishedAt = try c.decode(Null<String>.self, forKey: .publishedAt)
            _lastError = try c.decode(Null<String>.self, forKey: .lastError)
            pending = try c.decodeIfPresent(Int.self, forKey: .pending) ?? 0
            total = try c.decodeIfPresent(Int.self, forKey: .total) ?? 0
            _checkedAt = try c.decode(Null<String>.self, forKey: .checkedAt)
            conditionalWrites = try c.decodeIfPresent(Bool.self, forKey: .conditionalWrites) ?? true
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
