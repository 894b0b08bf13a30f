/// PhotolalaCore: Sendable value types shared by every module: the status snapshot, settings and their units. No I/O beyond time formatting.
/// The one status snapshot: the daemon fills it, the control socket carries it as JSON,
/// and `photolalactl status` renders it (human and `--json` print the same value).
/// Field names are the stable contract of shared/spec/cli.md; more may be added.
package struct DaemonStatus: Codable, Sendable, Equatable {
    package enum State: String, Codable, Sendable { case starting, running, paused, needsLogin, stopping }

    package enum PauseReason: String, Codable, Sendable, CaseIterable {
        case user, appleRevoked, appleNotFound, appleTransferred
        case subscriptionRequired, quotaExceeded, accountRevoked
        /// A `0` slot of the bandwidth timetable (`bandwidth.until` says when it ends).
        case schedule

        /// Plain words and what to do about it.
        package var explanation: String {
            switch self {
            case .user: "Paused by you. Run `photolalactl resume` to continue uploading."
            case .appleRevoked: "Your Apple ID no longer authorizes Photolala on this NAS. Run `photolalactl login`."
            case .appleNotFound: "Apple does not know this sign-in any more. Run `photolalactl login`."
            case .appleTransferred: "Your Apple ID was transferred to another team. Run `photolalactl login`."
            case .subscriptionRequired: "Your Photolala subscription has ended. Renew it in the Photolala app; uploads resume by themselves within 15 minutes (or run `photolalactl resume`)."
            case .quotaExceeded: "Your Photolala storage is full. Free space or upgrade in the Photolala app; uploads resume by themselves within 15 minutes (or run `photolalactl resume`)."
            case .accountRevoked: "Your Photolala account was disabled. Contact Photolala support, then run `photolalactl login`."
            case .schedule: "Paused by the bandwidth timetable (upload.bandwidth_limit); hashing, thumbnails and the catalog go on. `photolalactl resume` does not override it: change the timetable and reload."
            }
        }
    }

    package struct Account: Codable, Sendable, Equatable {
        package var signedIn: Bool
        @Null package var userId: String?
        package init(signedIn: Bool = false, userId: String? = nil) {
            self.signedIn = signedIn
            self.userId = userId
        }
    }

    package struct AppleCredential: Codable, Sendable, Equatable {
        package enum State: String, Codable, Sendable { case unknown, authorized, revoked, notFound, transferred }
        package var state: State
        @Null package var checkedAt: String?
        @Null package var nextCheckAt: String?
        /// The last failed check, if the latest attempt failed (shown, never treated as revocation).
        @Null package var lastError: String?
        package init(state: State = .unknown, checkedAt: String? = nil, nextCheckAt: String? = nil, lastError: String? = nil) {
            self.state = state
            self.checkedAt = checkedAt
            self.nextCheckAt = nextCheckAt
            self.lastError = lastError
        }
    }

    package struct Credentials: Codable, Sendable, Equatable {
        package enum State: String, Codable, Sendable { case none, fetching, valid, refreshing, backoff, failed }
        package var state: State
        @Null package var expiresAt: String?
        @Null package var lastError: String?
        @Null package var nextAttemptAt: String?
        package init(state: State = .none, expiresAt: String? = nil, lastError: String? = nil, nextAttemptAt: String? = nil) {
            self.state = state
            self.expiresAt = expiresAt
            self.lastError = lastError
            self.nextAttemptAt = nextAttemptAt
        }
    }

    package struct Queue: Codable, Sendable, Equatable {
        package var pending: Int = 0
        package var hashing: Int = 0
        package var uploading: Int = 0
        package var uploaded: Int = 0
        package var failed: Int = 0
        package var pendingBytes: Int64 = 0
        package var uploadedBytes: Int64 = 0
        /// Bytes per second hashed / uploaded over the last few seconds (0 when idle).
        package var hashRate: Double = 0
        package var uploadRate: Double = 0
        /// Seconds until the pending bytes are uploaded at the current rate; nil when unknown.
        @Null package var etaSeconds: Double? = nil
        /// When the file waiting longest (not yet uploaded nor failed) last changed state; null when none waits.
        @Null package var oldestPendingAt: String? = nil
        /// When an object last reached S3 (sent, or found already there); null before the first.
        @Null package var lastUploadAt: String? = nil
        package init() {}
    }

    package struct Watch: Codable, Sendable, Equatable {
        package var folders: Int = 0
        package var directories: Int = 0
        package var missingFolders: [String] = []
        package var paths: [String] = []
        /// Set when inotify ran out of watches: the limit and how many directories are scanned instead.
        package var watchLimitReached: Bool = false
        @Null package var maxUserWatches: Int? = nil
        package var unwatchedDirectories: Int = 0
        @Null package var lastScanAt: String? = nil
        package var scanning: Bool = false
        package init() {}
    }

    /// S3 as a whole: `backoff` while every upload waits after S3 failed to answer
    /// properly (5xx, throttling, resets, time-outs), with when the next try is due.
    package struct S3Health: Codable, Sendable, Equatable {
        package enum State: String, Codable, Sendable { case ok, backoff }
        package var state: State
        /// Failed attempts in a row (0 when `ok`).
        package var failures: Int
        @Null package var since: String?
        @Null package var nextAttemptAt: String?
        @Null package var lastError: String?
        package init(state: State = .ok, failures: Int = 0, since: String? = nil, nextAttemptAt: String? = nil, lastError: String? = nil) {
            self.state = state
            self.failures = failures
            self.since = since
            self.nextAttemptAt = nextAttemptAt
            self.lastError = lastError
        }
    }

    /// A device pairing waiting for the user to confirm the code on their phone.
    package struct Pairing: Codable, Sendable, Equatable {
        package var userCode: String
        package var verificationUri: String
        @Null package var verificationUriComplete: String?
        @Null package var expiresAt: String?
        package init(userCode: String, verificationUri: String, verificationUriComplete: String?, expiresAt: String?) {
            self.userCode = userCode
            self.verificationUri = verificationUri
            self.verificationUriComplete = verificationUriComplete
            self.expiresAt = expiresAt
        }
    }

    package var version: String
    /// The instance this daemon is (config.md "Instances"); nil: photolalad.service.
    @Null package var instance: String?
    package var state: State
    @Null package var pauseReason: PauseReason?
    package var account: Account
    package var appleCredential: AppleCredential
    package var credentials: Credentials
    /// nil when no uploader runs (older daemons leave it out).
    @Null package var s3: S3Health?
    package var queue: Queue
    package var watch: Watch
    /// A problem the user should know about that is not a pause (disk full, database error).
    package var problems: [String]
    @Null package var startedAt: String?
    @Null package var pairing: Pairing?
    package var catalog: Catalog
    package var thumbnails: Thumbnails
    package var inventory: Inventory
    package var verify: Verify
    /// This NAS's manifest in the bucket; nil from a daemon without one.
    @Null package var manifest: Manifest?
    /// A restore under way, nil when none is.
    @Null package var restore: Restore?
    /// Whether this NAS holds the account key (privacy.md).
    package var recovery: Recovery
    /// Devices whose manifest in the bucket was refused as a downgrade, a rollback or a cut
    /// log (privacy.md "No side doors"): one each, newest finding.
    package var manifestAlarms: [ManifestAlarm]
    /// What needs the user now: the "Action needed" lines and what notifications tell.
    package var attention: [AttentionItem]
    /// The notification channels and how their deliveries went.
    package var notify: Notify
    /// The upload rate in force (`upload.bandwidth_limit`, a rate or a timetable).
    package var bandwidth: Bandwidth
    /// The status page (web.md); nil from a daemon without one.
    @Null package var web: Web?
    /// The NAS's own copy of the account (mirror.md); `state` `off` without `[mirror] folder`.
    package var mirror: Mirror
    /// Names the problem lines hold, with their folders, for `seen(canList:thisDevice:)`;
    /// never sent.
    @Unencoded package var names: [StatusName] = []

    package init(version: String = PhotolalaVersion.current, state: State = .starting) {
        self.version = version
        self.instance = nil
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
        self.manifest = nil
        self.restore = nil
        self.recovery = Recovery()
        self.manifestAlarms = []
        self.attention = []
        self.notify = Notify()
        self.bandwidth = Bandwidth()
        self.web = nil
        self.mirror = Mirror()
    }
}

package enum PhotolalaVersion {
    package static let current = "0.1.0"
}
