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

        package init(state: State = .none, fingerprint: String? = nil, outdated: Bool = false, message: String? = nil,
                     lastError: String? = nil) {
            self.state = state
            self.fingerprint = fingerprint
            self.outdated = outdated
            self.message = message
            self.lastError = lastError
        }
    }
}
