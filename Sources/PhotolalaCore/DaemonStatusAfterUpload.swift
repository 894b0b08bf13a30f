// After the upload: the apps' catalog and thumbnails, what the bucket is known
// to hold, the last `verify`
extension DaemonStatus {
    package struct Catalog: Codable, Sendable, Equatable {
        package enum State: String, Codable, Sendable {
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
        package var state: State
        /// Our rows in the catalog as last published or checked: the photos of this NAS
        /// the apps show.
        package var rows: Int
        @Null package var publishedAt: String?
        @Null package var lastError: String?
        /// Photos ready for the apps whose rows wait for the next publish.
        package var pending: Int
        /// Rows in the catalog from every device (phones, other NASes, this one).
        package var total: Int
        /// The last time the catalog was read (a check or a publish).
        @Null package var checkedAt: String?
        /// False when the store refused a conditional write whose condition held (Ceph
        /// Pacific does, for a quoted If-Match): the pointer is then written and read back.
        package var conditionalWrites: Bool
        package init(state: State = .off, rows: Int = 0, publishedAt: String? = nil, lastError: String? = nil,
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
        package init(from decoder: any Decoder) throws {
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

    package struct Thumbnails: Codable, Sendable, Equatable {
        package var done: Int
        package var pending: Int
        /// Photos that could not be decoded: backed up, but without a preview or a row.
        package var failed: Int
        package init(done: Int = 0, pending: Int = 0, failed: Int = 0) {
            self.done = done
            self.pending = pending
            self.failed = failed
        }
    }

    package struct Inventory: Codable, Sendable, Equatable {
        package enum State: String, Codable, Sendable {
            /// Not signed in, or no listing yet.
            case notListed
            /// A listing is under way (`seen` keys so far).
            case listing
            /// The last listing saw every key.
            case ok
            /// S3 refused to list (403: the backend's policy leaves out s3:ListBucket).
            case refused
            /// The last listing failed; it is tried again (`nextListingAt`).
            case failed
        }

        /// How uploads learn whether an object is already in the bucket.
        package enum Check: String, Codable, Sendable {
            /// From the inventory: nothing asked, `If-None-Match: *` on what is sent.
            case inventory
            /// A HEAD per object (no listing to trust).
            case head
            /// Uploads wait for the first listing after a sign-in.
            case waiting
        }

        /// Objects the last listing found under this user's prefixes.
        package var objects: Int
        @Null package var listedAt: String?
        package var state: State
        /// Keys the listing under way has seen so far.
        package var seen: Int
        package var uploadsCheck: Check
        @Null package var nextListingAt: String?
        @Null package var lastError: String?
        package init(objects: Int = 0, listedAt: String? = nil, state: State = .notListed, seen: Int = 0,
                    uploadsCheck: Check = .inventory, nextListingAt: String? = nil, lastError: String? = nil) {
            self.objects = objects
            self.listedAt = listedAt
            self.state = state
            self.seen = seen
            self.uploadsCheck = uploadsCheck
            self.nextListingAt = nextListingAt
            self.lastError = lastError
        }
    }

    /// The last `photolalactl verify` (kept across restarts), or the one under way.
    package struct Verify: Codable, Sendable, Equatable {
        @Null package var checkedAt: String?
        /// Objects backed up before the verify's listing began, compared with it.
        package var checked: Int
        /// Not in the bucket (or, read back, not found).
        package var missing: Int
        /// In the bucket with other bytes: `wrongSize` + `wrongETag` + `readBackWrong`.
        package var mismatched: Int
        package var running: Bool
        package var wrongSize: Int
        package var wrongETag: Int
        /// Objects whose ETag proves nothing about their bytes (multipart uploads by other
        /// tools, or every object of an SSE-KMS bucket): only `--deep` checks them.
        package var unproven: Int
        /// The bucket encrypts with SSE-KMS: its ETags are not MD5s.
        package var sseKms: Bool
        /// `--deep`: the share asked for, objects read back, and how many had other bytes.
        @Null package var deepPercent: Double?
        package var readBack: Int
        package var readBackWrong: Int
        /// Missing or wrong objects put back in the queue to be sent again.
        package var requeued: Int
        /// Missing or wrong, but no file holds their bytes any more to send them again from.
        package var lost: Int
        @Null package var lastError: String?
        package init(checkedAt: String? = nil, checked: Int = 0, missing: Int = 0, mismatched: Int = 0, running: Bool = false,
                    wrongSize: Int = 0, wrongETag: Int = 0, unproven: Int = 0, sseKms: Bool = false, deepPercent: Double? = nil,
                    readBack: Int = 0, readBackWrong: Int = 0, requeued: Int = 0, lost: Int = 0, lastError: String? = nil) {
            self.checkedAt = checkedAt
            self.checked = checked
            self.missing = missing
            self.mismatched = mismatched
            self.running = running
            self.wrongSize = wrongSize
            self.wrongETag = wrongETag
            self.unproven = unproven
            self.sseKms = sseKms
            self.deepPercent = deepPercent
            self.readBack = readBack
            self.readBackWrong = readBackWrong
            self.requeued = requeued
            self.lost = lost
            self.lastError = lastError
        }
    }
}
