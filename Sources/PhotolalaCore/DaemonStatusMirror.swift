extension DaemonStatus {
    /// status `mirror` (mirror.md "Status, command, metrics").
    package struct Mirror: Codable, Sendable, Equatable {
        package enum State: String, Codable, Sendable {
            /// No `[mirror] folder`.
            case off
            case idle
            /// Fetching objects (or listing the account for them).
            case pulling
            /// Waiting: `pauseReason` says why.
            case paused
        }

        package enum PauseReason: String, Codable, Sendable, CaseIterable {
            /// Signed out, or the Apple ID revoked (or not found, transferred), or the account paused.
            case account
            /// `photolalactl pause`.
            case user
            /// A `0` slot of the bandwidth timetable.
            case schedule
            /// The folder is missing, unmarked (a volume not mounted) or not writable.
            case folder
            /// The folder's filesystem has less free space than `min_free`.
            case diskFull
        }

        package var state: State
        @Null package var pauseReason: PauseReason?
        @Null package var folder: String?
        /// Objects the account holds (as the last listing and checks found them).
        package var inAccount: Int
        /// Objects with a copy on this NAS (`copied` + `adopted`).
        package var present: Int
        package var pending: Int
        package var pendingBytes: Int64
        package var copied: Int
        package var adopted: Int
        /// In an archive class (asked back or not).
        package var archived: Int
        /// Copies whose object the account no longer holds.
        package var onlyHere: Int
        /// Copies the user renamed, moved out or deleted: not fetched again until `--refill`.
        package var removedHere: Int
        package var refused: Int
        /// Copies moved into `.trash/` after the account lost their object.
        package var trashed: Int
        /// Archived objects asked back and not yet readable.
        package var thawing: Int
        /// Objects refused `AttentionRules.mirrorRefusalsForAttention` times or more.
        package var refusedRepeatedly: Int
        /// Bytes per second over the last seconds (0 when not pulling).
        package var rate: Double
        @Null package var lastPassAt: String?
        @Null package var nextCheckAt: String?
        @Null package var lastError: String?

        package init(state: State = .off, pauseReason: PauseReason? = nil, folder: String? = nil, inAccount: Int = 0, present: Int = 0,
                     pending: Int = 0, pendingBytes: Int64 = 0, copied: Int = 0, adopted: Int = 0, archived: Int = 0, onlyHere: Int = 0,
                     removedHere: Int = 0, refused: Int = 0, trashed: Int = 0, thawing: Int = 0, refusedRepeatedly: Int = 0, rate: Double = 0,
                     lastPassAt: String? = nil, nextCheckAt: String? = nil, lastError: String? = nil) {
            self.state = state
            self.pauseReason = pauseReason
            self.folder = folder
            self.inAccount = inAccount
            self.present = present
            self.pending = pending
            self.pendingBytes = pendingBytes
            self.copied = copied
            self.adopted = adopted
            self.archived = archived
            self.onlyHere = onlyHere
            self.removedHere = removedHere
            self.refused = refused
            self.trashed = trashed
            self.thawing = thawing
            self.refusedRepeatedly = refusedRepeatedly
            self.rate = rate
            self.lastPassAt = lastPassAt
            self.nextCheckAt = nextCheckAt
            self.lastError = lastError
        }

        /// Reading a status of a daemon without a mirror: off.
        package init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(state: try c.decode(State.self, forKey: .state))
            _pauseReason = try c.decode(Null<PauseReason>.self, forKey: .pauseReason)
            _folder = try c.decode(Null<String>.self, forKey: .folder)
            inAccount = try c.decodeIfPresent(Int.self, forKey: .inAccount) ?? 0
            present = try c.decodeIfPresent(Int.self, forKey: .present) ?? 0
            pending = try c.decodeIfPresent(Int.self, forKey: .pending) ?? 0
            pendingBytes = try c.decodeIfPresent(Int64.self, forKey: .pendingBytes) ?? 0
            copied = try c.decodeIfPresent(Int.self, forKey: .copied) ?? 0
            adopted = try c.decodeIfPresent(Int.self, forKey: .adopted) ?? 0
            archived = try c.decodeIfPresent(Int.self, forKey: .archived) ?? 0
            onlyHere = try c.decodeIfPresent(Int.self, forKey: .onlyHere) ?? 0
            removedHere = try c.decodeIfPresent(Int.self, forKey: .removedHere) ?? 0
            refused = try c.decodeIfPresent(Int.self, forKey: .refused) ?? 0
            trashed = try c.decodeIfPresent(Int.self, forKey: .trashed) ?? 0
            thawing = try c.decodeIfPresent(Int.self, forKey: .thawing) ?? 0
            refusedRepeatedly = try c.decodeIfPresent(Int.self, forKey: .refusedRepeatedly) ?? 0
            rate = try c.decodeIfPresent(Double.self, forKey: .rate) ?? 0
            _lastPassAt = try c.decode(Null<String>.self, forKey: .lastPassAt)
            _nextCheckAt = try c.decode(Null<String>.self, forKey: .nextCheckAt)
            _lastError = try c.decode(Null<String>.self, forKey: .lastError)
        }
    }
}
