/// The status of the device manifest (what the bucket knows of this NAS's folders) and of
/// a restore in progress (`photolalactl restore`).
extension DaemonStatus {
    public struct Manifest: Codable, Sendable, Equatable {
        public enum State: String, Codable, Sendable {
            /// Not signed in yet (no account, no device id).
            case off
            /// Every backed-up change is in the bucket's manifest.
            case idle
            /// Changes gathered for the next segment.
            case pending
            case writing
            /// Writing failed; retried with backoff (`lastError` says why).
            case backoff
        }
        public var state: State
        /// This NAS's device id (s3-layout.md).
        @Null public var deviceId: String?
        /// The last segment in the bucket, and the snapshot it builds on (0: none).
        public var segments: Int64
        public var snapshot: Int64
        /// Files the manifest holds as present now, and their bytes.
        public var files: Int64
        public var bytes: Int64
        @Null public var writtenAt: String?
        @Null public var lastError: String?

        public init(state: State = .off, deviceId: String? = nil, segments: Int64 = 0, snapshot: Int64 = 0, files: Int64 = 0,
                    bytes: Int64 = 0, writtenAt: String? = nil, lastError: String? = nil) {
            self.state = state
            self.deviceId = deviceId
            self.segments = segments
            self.snapshot = snapshot
            self.files = files
            self.bytes = bytes
            self.writtenAt = writtenAt
            self.lastError = lastError
        }
    }

    /// A restore under way: `photolalactl restore` reports its progress to the daemon,
    /// which fetches the bytes for it.
    public struct Restore: Codable, Sendable, Equatable {
        /// The device restored from (its name, or its id when it has none).
        public var device: String
        public var filesDone: Int
        public var filesTotal: Int
        public var bytesDone: Int64
        public var bytesTotal: Int64
        /// Bytes per second read from the bucket over the last few seconds.
        public var rate: Double
        @Null public var etaSeconds: Double?
        /// Objects waiting to be brought back from an archive class, which, and how long it usually takes.
        public var waitingArchived: Int
        @Null public var archiveClass: String?
        @Null public var archiveWait: String?
        @Null public var startedAt: String?

        public init(device: String, filesDone: Int = 0, filesTotal: Int = 0, bytesDone: Int64 = 0, bytesTotal: Int64 = 0,
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
}
