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

    // MARK: - After the upload: the apps' catalog and thumbnails, what the bucket is known
    // to hold, the last `verify`

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

    // MARK: - The device manifest and a restore in progress

    package struct Manifest: Codable, Sendable, Equatable {
        package enum State: String, Codable, Sendable {
            /// Not signed in yet (no account, no device id).
            case off
            /// Every backed-up change is in the bucket's manifest.
            case idle
            /// Changes gathered for the next segment.
            case pending
            case writing
            /// Writing failed; retried with backoff (`lastError` says why).
            case backoff
            /// Changes wait in the queue database for the account's key (status `recovery`:
            /// the recovery key is needed on this NAS).
            case waitingForKey = "waiting-for-key"
        }
        package var state: State
        /// This NAS's device id (s3-layout.md).
        @Null package var deviceId: String?
        /// The last segment in the bucket, and the snapshot it builds on (0: none).
        package var segments: Int64
        package var snapshot: Int64
        /// Files the manifest holds as present now, and their bytes.
        package var files: Int64
        package var bytes: Int64
        @Null package var writtenAt: String?
        @Null package var lastError: String?
        /// The format of this NAS's manifest in the bucket: 2 (encrypted), or 1 (plaintext,
        /// until the upgrade is done); nil before there is one.
        @Null package var format: Int?

        package init(state: State = .off, deviceId: String? = nil, segments: Int64 = 0, snapshot: Int64 = 0, files: Int64 = 0,
                    bytes: Int64 = 0, writtenAt: String? = nil, lastError: String? = nil, format: Int? = nil) {
            self.state = state
            self.deviceId = deviceId
            self.segments = segments
            self.snapshot = snapshot
            self.files = files
            self.bytes = bytes
            self.writtenAt = writtenAt
            self.lastError = lastError
            self.format = format
        }
    }

    /// A restore under way: `photolalactl restore` reports its progress to the daemon,
    /// which fetches the bytes for it.
    package struct Restore: Codable, Sendable, Equatable {
        /// The device restored from (its name, or its id when it has none).
        package var device: String
        package var filesDone: Int
        package var filesTotal: Int
        package var bytesDone: Int64
        package var bytesTotal: Int64
        /// Bytes per second read from the bucket over the last few seconds.
        package var rate: Double
        @Null package var etaSeconds: Double?
        /// Objects waiting to be brought back from an archive class, which, and how long it usually takes.
        package var waitingArchived: Int
        @Null package var archiveClass: String?
        @Null package var archiveWait: String?
        @Null package var startedAt: String?

        package init(device: String, filesDone: Int = 0, filesTotal: Int = 0, bytesDone: Int64 = 0, bytesTotal: Int64 = 0,
                    rate: Double = 0, etaSeconds: Double? = nil, waitingArchived: Int = 0, archiveClass: String? = nil,
                    archiveWait: String? = nil, startedAt: String? = nil) {
            self.device = device
            self.filesDone = filesDone
            self.filesTotal = filesTotal
            self.bytesDone = bytesDone
            self.bytesTotal = bytesTotal
            self.rate = rate
            self.etaSeconds = etaSeconds
            self.waitingArchived = waitingArchived
            self.archiveClass = archiveClass
            self.archiveWait = archiveWait
            self.startedAt = startedAt
        }
    }

    /// A device's manifest refused (status `manifestAlarms`, attention `manifestDowngrade`
    /// or `manifestRollback`).
    package struct ManifestAlarm: Codable, Sendable, Equatable {
        package enum Kind: String, Codable, Sendable {
            /// A plaintext record or segment for a device that is sealed for good.
            case downgrade
            /// An older record put back, the newest segments gone, below the floor.
            case rollback
        }
        package var device: String
        package var kind: Kind
        /// What was found, naming the device.
        package var message: String
        /// What to do.
        package var action: String
        package var at: String

        package init(device: String, kind: Kind, message: String, action: String, at: String) {
            self.device = device
            self.kind = kind
            self.message = message
            self.action = action
            self.at = at
        }
    }

    // MARK: - The account key on this NAS

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

    // MARK: - The notification channels and the upload rate the bandwidth timetable puts
    // in force

    package struct Notify: Codable, Sendable, Equatable {
        /// One channel's deliveries.
        package struct Channel: Codable, Sendable, Equatable {
            /// `webhook`, `command` or `healthcheck`.
            package var channel: String
            @Null package var lastSentAt: String?
            /// Why its last attempt failed; null once one succeeds.
            @Null package var lastError: String?
            /// Events waiting to be sent again.
            package var pending: Int
            package var sent: Int
            /// Events given up on after a day of retries.
            package var dropped: Int

            package init(channel: String, lastSentAt: String? = nil, lastError: String? = nil, pending: Int = 0, sent: Int = 0,
                        dropped: Int = 0) {
                self.channel = channel
                self.lastSentAt = lastSentAt
                self.lastError = lastError
                self.pending = pending
                self.sent = sent
                self.dropped = dropped
            }
        }

        /// The configured channels (`webhook`, `command`, `healthcheck`).
        package var channels: [String]
        /// When a channel last took an event (the latest of all channels).
        @Null package var lastSentAt: String?
        /// The last failure of a channel still failing, named (`webhook: HTTP 500 from ntfy.sh`).
        @Null package var lastError: String?
        package var perChannel: [Channel]

        package init(channels: [String] = [], lastSentAt: String? = nil, lastError: String? = nil, perChannel: [Channel] = []) {
            self.channels = channels
            self.lastSentAt = lastSentAt
            self.lastError = lastError
            self.perChannel = perChannel
        }
    }

    package struct Bandwidth: Codable, Sendable, Equatable {
        /// Bytes per second uploads may use now: null is no limit, 0 while the timetable pauses.
        @Null package var limit: Int64?
        /// The timetable as in force (`"08:00,2MiB/s 18:00,0 23:00,off"`); null for one rate.
        @Null package var timetable: String?
        /// When the timetable's current slot ends; null without a timetable.
        @Null package var until: String?
        /// The limit from `until` on.
        @Null package var nextLimit: Int64?

        package init(limit: Int64? = nil, timetable: String? = nil, until: String? = nil, nextLimit: Int64? = nil) {
            self.limit = limit
            self.timetable = timetable
            self.until = until
            self.nextLimit = nextLimit
        }
    }
}

extension DaemonStatus {
    /// The status page (web.md): where it is served, how, and why not.
    package struct Web: Codable, Sendable, Equatable {
        /// `[web] listen` as configured; null when it is "off".
        @Null package var listen: String?
        /// The page's address while it is served (`https://…` with TLS); null otherwise.
        @Null package var url: String?
        package var tls: Bool
        /// Served over plain HTTP beyond loopback because `allow_plain_http = true`:
        /// anyone on the network path can read the page and the session cookie.
        package var plainHTTPBeyondLoopback: Bool
        /// Why `listen` is not served (the address and why); tried again every minute.
        @Null package var lastError: String?
        /// `listen` was written in the config: then a failure needs the user.
        package var listenSet: Bool
        /// Sessions open now (from `photolalactl web --link`).
        package var sessions: Int

        package init(listen: String? = nil, url: String? = nil, tls: Bool = false, plainHTTPBeyondLoopback: Bool = false,
                     lastError: String? = nil, listenSet: Bool = false, sessions: Int = 0) {
            self.listen = listen
            self.url = url
            self.tls = tls
            self.plainHTTPBeyondLoopback = plainHTTPBeyondLoopback
            self.lastError = lastError
            self.listenSet = listenSet
            self.sessions = sessions
        }
    }
}

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

package enum PhotolalaVersion {
    package static let current = "0.1.0"
}

/// `photolalactl notify --test`: what each configured channel answered to a test event.
package struct NotifyTestReport: Codable, Sendable, Equatable {
    package struct Result: Codable, Sendable, Equatable {
        package var channel: String
        package var ok: Bool
        /// The receiver's answer (`HTTP 200 from ntfy.sh`, `exit 0: sent`) or why there was none.
        package var answer: String
        package init(channel: String, ok: Bool, answer: String) {
            self.channel = channel
            self.ok = ok
            self.answer = answer
        }
    }

    package var results: [Result]
    package init(results: [Result]) {
        self.results = results
    }
}
