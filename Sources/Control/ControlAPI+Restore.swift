import PhotolalaCore

/// The wire types of `photolalactl devices` and `photolalactl restore` (cli.md).

/// `GET /v1/devices`: the account's devices that have a manifest in the bucket.
public struct DeviceList: Codable, Sendable, Equatable {
    public struct Device: Codable, Sendable, Equatable {
        public var id: String
        /// nil when the device's record is missing (its manifest is still there).
        @Null public var name: String?
        public var folders: [String]
        @Null public var lastBackupAt: String?
        public var files: Int64
        public var bytes: Int64
        /// This NAS.
        public var current: Bool
        @Null public var updatedAt: String?

        public init(id: String, name: String?, folders: [String], lastBackupAt: String?, files: Int64, bytes: Int64, current: Bool,
                    updatedAt: String?) {
            self.id = id
            self.name = name
            self.folders = folders
            self.lastBackupAt = lastBackupAt
            self.files = files
            self.bytes = bytes
            self.current = current
            self.updatedAt = updatedAt
        }

    }

    public var devices: [Device]
    public init(devices: [Device]) {
        self.devices = devices
    }
}

/// `POST /v1/restore/objects` (and `/thaw`, which also asks archived ones back): at most
/// `maxBatch` MD5s a call, so the body stays within the socket's limit.
public struct ObjectQuery: Codable, Sendable, Equatable {
    public static let maxBatch = 1000
    public var md5s: [String]
    public init(md5s: [String]) {
        self.md5s = md5s
    }
}

/// Where one object stands for a restore.
public struct ObjectStatus: Codable, Sendable, Equatable {
    public enum State: String, Codable, Sendable {
        /// Can be read now.
        case ready
        /// In an archive class, not asked back yet.
        case archived
        /// Being brought back from its archive class.
        case restoring
        /// Not in the bucket.
        case missing
        /// Could not be asked (`message` says why); ask again.
        case unknown
    }
    public var md5: String
    public var state: State
    public var size: Int64?
    public var storageClass: String?
    public var message: String?

    public init(md5: String, state: State, size: Int64? = nil, storageClass: String? = nil, message: String? = nil) {
        self.md5 = md5
        self.state = state
        self.size = size
        self.storageClass = storageClass
        self.message = message
    }
}

public struct ObjectStatusList: Codable, Sendable, Equatable {
    public var objects: [ObjectStatus]
    public init(objects: [ObjectStatus]) {
        self.objects = objects
    }
}

/// `POST /v1/restore/session`: a restore tells the daemon how it stands, so `status` can
/// show it. The first call (no `id`) opens the session and is the restore's permission check.
public struct RestoreReport: Codable, Sendable, Equatable {
    public var id: String?
    public var device: String
    public var filesDone: Int
    public var filesTotal: Int
    public var bytesDone: Int64
    public var bytesTotal: Int64
    public var waitingArchived: Int
    public var archiveClass: String?
    public var finished: Bool

    public init(id: String? = nil, device: String, filesDone: Int = 0, filesTotal: Int = 0, bytesDone: Int64 = 0, bytesTotal: Int64 = 0,
                waitingArchived: Int = 0, archiveClass: String? = nil, finished: Bool = false) {
        self.id = id
        self.device = device
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.waitingArchived = waitingArchived
        self.archiveClass = archiveClass
        self.finished = finished
    }
}

public struct RestoreSessionReply: Codable, Sendable, Equatable {
    public var id: String
    public init(id: String) {
        self.id = id
    }
}
