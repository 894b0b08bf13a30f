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
        @Null public var userId: String?
        public init(signedIn: Bool = false, userId: String? = nil) {
            self.signedIn = signedIn
            self.userId = userId
        }
    }

    public struct AppleCredential: Codable, Sendable, Equatable {
        public enum State: String, Codable, Sendable { case unknown, authorized, revoked, notFound, transferred }
        public var state: State
        @Null public var checkedAt: String?
        @Null public var nextCheckAt: String?
        /// The last failed check, if the latest attempt failed (shown, never treated as revocation).
        @Null public var lastError: String?
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
        @Null public var expiresAt: String?
        @Null public var lastError: String?
        @Null public var nextAttemptAt: String?
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
        @Null public var etaSeconds: Double? = nil
        /// When the file waiting longest (not yet uploaded nor failed) last changed state; null when none waits.
        @Null public var oldestPendingAt: String? = nil
        /// When an object last reached S3 (sent, or found already there); null before the first.
        @Null public var lastUploadAt: String? = nil
        public init() {}
    }

    public struct Watch: Codable, Sendable, Equatable {
        public var folders: Int = 0
        public var directories: Int = 0
        public var missingFolders: [String] = []
        public var paths: [String] = []
        /// Set when inotify ran out of watches: the limit and how many directories are scanned instead.
        public var watchLimitReached: Bool = false
        @Null public var maxUserWatches: Int? = nil
        public var unwatchedDirectories: Int = 0
        @Null public var lastScanAt: String? = nil
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
        @Null public var since: String?
        @Null public var nextAttemptAt: String?
        @Null public var lastError: String?
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
        @Null public var verificationUriComplete: String?
        @Null public var expiresAt: String?
        public init(userCode: String, verificationUri: String, verificationUriComplete: String?, expiresAt: String?) {
            self.userCode = userCode
            self.verificationUri = verificationUri
            self.verificationUriComplete = verificationUriComplete
            self.expiresAt = expiresAt
        }
    }

    public var version: String
    public var state: State
    @Null public var pauseReason: PauseReason?
    public var account: Account
    public var appleCredential: AppleCredential
    public var credentials: Credentials
    /// nil when no uploader runs (older daemons leave it out).
    @Null public var s3: S3Health?
    public var queue: Queue
    public var watch: Watch
    /// A problem the user should know about that is not a pause (disk full, database error).
    public var problems: [String]
    @Null public var startedAt: String?
    @Null public var pairing: Pairing?
    public var catalog: Catalog
    public var thumbnails: Thumbnails
    public var inventory: Inventory
    public var verify: Verify

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
        self.catalog = Catalog()
        self.thumbnails = Thumbnails()
        self.inventory = Inventory()
        self.verify = Verify()
    }
}

public enum PhotolalaVersion {
    public static let current = "0.1.0"
}
