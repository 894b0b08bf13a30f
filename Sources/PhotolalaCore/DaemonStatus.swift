/// The one status snapshot: the daemon fills it, the control socket carries it as JSON,
/// and `photolalactl status` renders it (human and `--json` print the same value).
/// Field names are the stable contract of shared/spec/cli.md; more may be added.
public struct DaemonStatus: Codable, Sendable, Equatable {
    public enum State: String, Codable, Sendable { case starting, running, paused, needsLogin, stopping }

    public enum PauseReason: String, Codable, Sendable, CaseIterable {
        case user, appleRevoked, appleNotFound, appleTransferred
        case subscriptionRequired, quotaExceeded, accountRevoked

        /// Plain words and what to do about it.
        public var explanation: String {
            switch self {
            case .user: "Paused by you. Run `photolalactl resume` to continue uploading."
            case .appleRevoked: "Your Apple ID no longer authorizes Photolala on this NAS. Run `photolalactl login`."
            case .appleNotFound: "Apple does not know this sign-in any more. Run `photolalactl login`."
            case .appleTransferred: "Your Apple ID was transferred to another team. Run `photolalactl login`."
            case .subscriptionRequired: "Your Photolala subscription has ended. Renew it in the Photolala app; uploads resume by themselves within 15 minutes (or run `photolalactl resume`)."
            case .quotaExceeded: "Your Photolala storage is full. Free space or upgrade in the Photolala app; uploads resume by themselves within 15 minutes (or run `photolalactl resume`)."
            case .accountRevoked: "Your Photolala account was disabled. Contact Photolala support, then run `photolalactl login`."
            }
        }
    }

    public struct Account: Codable, Sendable, Equatable {
        public var signedIn: Bool
        public var userId: String?
        public init(signedIn: Bool = false, userId: String? = nil) {
            self.signedIn = signedIn
            self.userId = userId
        }
    }

    public struct AppleCredential: Codable, Sendable, Equatable {
        public enum State: String, Codable, Sendable { case unknown, authorized, revoked, notFound, transferred }
        public var state: State
        public var checkedAt: String?
        public var nextCheckAt: String?
        /// The last failed check, if the latest attempt failed (shown, never treated as revocation).
        public var lastError: String?
        public init(state: State = .unknown, checkedAt: String? = nil, nextCheckAt: String? = nil, lastError: String? = nil) {
            self.state = state
            self.checkedAt = checkedAt
            self.nextCheckAt = nextCheckAt
            self.lastError = lastError
        }
    }

    public struct Credentials: Codable, Sendable, Equatable {
        public enum State: String, Codable, Sendable { case none, fetching, valid, refreshing, backoff, failed }
        public var state: State
        public var expiresAt: String?
        public var lastError: String?
        public var nextAttemptAt: String?
        public init(state: State = .none, expiresAt: String? = nil, lastError: String? = nil, nextAttemptAt: String? = nil) {
            self.state = state
            self.expiresAt = expiresAt
            self.lastError = lastError
            self.nextAttemptAt = nextAttemptAt
        }
    }

    public struct Queue: Codable, Sendable, Equatable {
        public var pending: Int = 0
        public var hashing: Int = 0
        public var uploading: Int = 0
        public var uploaded: Int = 0
        public var failed: Int = 0
        public var pendingBytes: Int64 = 0
        public var uploadedBytes: Int64 = 0
        /// Bytes per second hashed / uploaded over the last few seconds (0 when idle).
        public var hashRate: Double = 0
        public var uploadRate: Double = 0
        /// Seconds until the pending bytes are uploaded at the current rate; nil when unknown.
        public var etaSeconds: Double? = nil
        public init() {}
    }

    public struct Watch: Codable, Sendable, Equatable {
        public var folders: Int = 0
        public var directories: Int = 0
        public var missingFolders: [String] = []
        public var paths: [String] = []
        /// Set when inotify ran out of watches: the limit and how many directories are scanned instead.
        public var watchLimitReached: Bool = false
        public var maxUserWatches: Int? = nil
        public var unwatchedDirectories: Int = 0
        public var lastScanAt: String? = nil
        public var scanning: Bool = false
        public init() {}
    }

    /// S3 as a whole: `backoff` while every upload waits after S3 failed to answer
    /// properly (5xx, throttling, resets, time-outs), with when the next try is due.
    public struct S3Health: Codable, Sendable, Equatable {
        public enum State: String, Codable, Sendable { case ok, backoff }
        public var state: State
        /// Failed attempts in a row (0 when `ok`).
        public var failures: Int
        public var since: String?
        public var nextAttemptAt: String?
        public var lastError: String?
        public init(state: State = .ok, failures: Int = 0, since: String? = nil, nextAttemptAt: String? = nil, lastError: String? = nil) {
            self.state = state
            self.failures = failures
            self.since = since
            self.nextAttemptAt = nextAttemptAt
            self.lastError = lastError
        }
    }

    /// A device pairing waiting for the user to confirm the code on their phone.
    public struct Pairing: Codable, Sendable, Equatable {
        public var userCode: String
        public var verificationUri: String
        public var verificationUriComplete: String?
        public var expiresAt: String?
        public init(userCode: String, verificationUri: String, verificationUriComplete: String?, expiresAt: String?) {
            self.userCode = userCode
            self.verificationUri = verificationUri
            self.verificationUriComplete = verificationUriComplete
            self.expiresAt = expiresAt
        }
    }

    public var version: String
    public var state: State
    public var pauseReason: PauseReason?
    public var account: Account
    public var appleCredential: AppleCredential
    public var credentials: Credentials
    /// nil when no uploader runs (older daemons leave it out).
    public var s3: S3Health?
    public var queue: Queue
    public var watch: Watch
    /// A problem the user should know about that is not a pause (disk full, database error).
    public var problems: [String]
    public var startedAt: String?
    public var pairing: Pairing?

    public init(version: String = PhotolalaVersion.current, state: State = .starting) {
        self.version = version
        self.state = state
        self.pauseReason = nil
        self.account = Account()
        self.appleCredential = AppleCredential()
        self.credentials = Credentials()
        self.s3 = nil
        self.queue = Queue()
        self.watch = Watch()
        self.problems = []
        self.startedAt = nil
        self.pairing = nil
    }

    // Encode nils explicitly: the contract shows `"pauseReason": null`, and scripts test for it.
    enum CodingKeys: String, CodingKey {
        case version, state, pauseReason, account, appleCredential, credentials, s3, queue, watch, problems, startedAt, pairing
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(version, forKey: .version)
        try c.encode(state, forKey: .state)
        try c.encode(pauseReason, forKey: .pauseReason)
        try c.encode(account, forKey: .account)
        try c.encode(appleCredential, forKey: .appleCredential)
        try c.encode(credentials, forKey: .credentials)
        try c.encode(s3, forKey: .s3)
        try c.encode(queue, forKey: .queue)
        try c.encode(watch, forKey: .watch)
        try c.encode(problems, forKey: .problems)
        try c.encode(startedAt, forKey: .startedAt)
        try c.encode(pairing, forKey: .pairing)
    }
}

extension DaemonStatus.Account {
    enum CodingKeys: String, CodingKey { case signedIn, userId }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(signedIn, forKey: .signedIn)
        try c.encode(userId, forKey: .userId)
    }
}

extension DaemonStatus.AppleCredential {
    enum CodingKeys: String, CodingKey { case state, checkedAt, nextCheckAt, lastError }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(state, forKey: .state)
        try c.encode(checkedAt, forKey: .checkedAt)
        try c.encode(nextCheckAt, forKey: .nextCheckAt)
        try c.encode(lastError, forKey: .lastError)
    }
}

extension DaemonStatus.Credentials {
    enum CodingKeys: String, CodingKey { case state, expiresAt, lastError, nextAttemptAt }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(state, forKey: .state)
        try c.encode(expiresAt, forKey: .expiresAt)
        try c.encode(lastError, forKey: .lastError)
        try c.encode(nextAttemptAt, forKey: .nextAttemptAt)
    }
}

extension DaemonStatus.S3Health {
    enum CodingKeys: String, CodingKey { case state, failures, since, nextAttemptAt, lastError }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(state, forKey: .state)
        try c.encode(failures, forKey: .failures)
        try c.encode(since, forKey: .since)
        try c.encode(nextAttemptAt, forKey: .nextAttemptAt)
        try c.encode(lastError, forKey: .lastError)
    }
}

extension DaemonStatus.Queue {
    enum CodingKeys: String, CodingKey {
        case pending, hashing, uploading, uploaded, failed, pendingBytes, uploadedBytes, hashRate, uploadRate, etaSeconds
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(pending, forKey: .pending)
        try c.encode(hashing, forKey: .hashing)
        try c.encode(uploading, forKey: .uploading)
        try c.encode(uploaded, forKey: .uploaded)
        try c.encode(failed, forKey: .failed)
        try c.encode(pendingBytes, forKey: .pendingBytes)
        try c.encode(uploadedBytes, forKey: .uploadedBytes)
        try c.encode(hashRate, forKey: .hashRate)
        try c.encode(uploadRate, forKey: .uploadRate)
        try c.encode(etaSeconds, forKey: .etaSeconds)
    }
}

public enum PhotolalaVersion {
    public static let current = "0.1.0"
}
