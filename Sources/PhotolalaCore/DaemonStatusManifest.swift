// The device manifest and a restore in progress
extension DaemonStatus {
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
}
