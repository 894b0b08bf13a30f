// The account key on this NAS
extension DaemonStatus {
    /// status `recovery` (cli.md, privacy.md "Status"): whether this NAS holds the account
    /// key that seals the manifest. Never the recovery key, never the account key.
    package struct Recovery: Codable, Sendable, Equatable {
        package enum State: String, Codable, Sendable {
            /// Not signed in.
            case none
            /// Signed in, and the bucket not yet asked (or not answering) whether the account
            /// has a key: neither made nor asked for yet. Photos go on meanwhile.
            case checking
            /// This NAS holds the account key.
            case ready
            /// The account already has a recovery key this NAS does not hold.
            case needed
            /// The key object is missing or does not check out; `message` says what to do.
            case unreadable
        }

        package var state: State
        /// The account key's fingerprint (the same on every NAS of the account), when ready.
        @Null package var fingerprint: String?
        /// This NAS's copy of the recovery key no longer opens the key object in the bucket
        /// (`recovery-key --rotate` on another NAS); the account key still serves.
        package var outdated: Bool
        /// What the state means and what to do, in words (null when ready and current).
        @Null package var message: String?
        /// The last failure to reach the bucket while checking, retried with backoff.
        @Null package var lastError: String?
        /// The key object was found replaced (or an older copy put back) and this NAS wrote
        /// its own over it: what happened and what to do, and when (privacy.md "No side doors").
        @Null package var keyObjectReplaced: String?
        @Null package var replacedAt: String?
        /// While a new account key is put in place here: objects sealed again so far.
        @Null package var resealed: Int?

        package init(state: State = .none, fingerprint: String? = nil, outdated: Bool = false, message: String? = nil,
                     lastError: String? = nil, keyObjectReplaced: String? = nil, replacedAt: String? = nil, resealed: Int? = nil) {
            self.state = state
            self.fingerprint = fingerprint
            self.outdated = outdated
            self.message = message
            self.lastError = lastError
            self.keyObjectReplaced = keyObjectReplaced
            self.replacedAt = replacedAt
            self.resealed = resealed
        }
    }
}
