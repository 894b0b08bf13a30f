import PhotolalaCore

/// The wire types of `photolalactl devices` and `photolalactl restore` (cli.md).

/// `GET /v1/devices`: the account's devices that have a manifest in the bucket.
package struct DeviceList: Codable, Sendable, Equatable {
    package struct Device: Codable, Sendable, Equatable {
        package var id: String
        /// nil when the device's record is missing (its manifest is still there).
        @Null package var name: String?
        package var folders: [String]
        @Null package var lastBackupAt: String?
        package var files: Int64
        package var bytes: Int64
        /// This NAS.
        package var current: Bool
        @Null package var updatedAt: String?

        package init(id: String, name: String?, folders: [String], lastBackupAt: String?, files: Int64, bytes: Int64, current: Bool,
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

    package var devices: [Device]
    package init(devices: [Device]) {
        self.devices = devices
    }
}

/// `POST /v1/restore/objects` (and `/thaw`, which also asks archived ones back): at most
/// `maxBatch` MD5s a call, so the body stays within the socket's limit.
package struct ObjectQuery: Codable, Sendable, Equatable {
    package static let maxBatch = 1000
    package var md5s: [String]
    package init(md5s: [String]) {
        self.md5s = md5s
    }
}

/// Where one object stands for a restore.
package struct ObjectStatus: Codable, Sendable, Equatable {
    package enum State: String, Codable, Sendable {
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
    package var md5: String
    package var state: State
    package var size: Int64?
    package var storageClass: String?
    package var message: String?

    package init(md5: String, state: State, size: Int64? = nil, storageClass: String? = nil, message: String? = nil) {
        self.md5 = md5
        self.state = state
        self.size = size
        self.storageClass = storageClass
        self.message = message
    }
}

package struct ObjectStatusList: Codable, Sendable, Equatable {
    package var objects: [ObjectStatus]
    package init(objects: [ObjectStatus]) {
        self.objects = objects
    }
}

/// `POST /v1/restore/session`: a restore tells the daemon how it stands, so `status` can
/// show it. The first call (no `id`) opens the session and is the restore's permission check.
package struct RestoreReport: Codable, Sendable, Equatable {
    package var id: String?
    package var device: String
    package var filesDone: Int
    package var filesTotal: Int
    package var bytesDone: Int64
    package var bytesTotal: Int64
    package var waitingArchived: Int
    package var archiveClass: String?
    package var finished: Bool

    package init(id: String? = nil, device: String, filesDone: Int = 0, filesTotal: Int = 0, bytesDone: Int64 = 0, bytesTotal: Int64 = 0,
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

package struct RestoreSessionReply: Codable, Sendable, Equatable {
    package var id: String
    package init(id: String) {
        self.id = id
    }
}
