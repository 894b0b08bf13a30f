import PhotolalaCore

/// The wire types of `photolalactl devices` and `photolalactl restore` (cli.md).

/// `GET /v1/devices`: the account's devices that have a manifest in the bucket.
package struct DeviceList: Codable, Sendable, Equatable {
    package struct Device: Codable, Sendable, Equatable {
        /// Whether this NAS can read the device's manifest (privacy.md "Devices, restore").
        package enum Access: String, Codable, Sendable {
            /// Encrypted, and opened with this account's key.
            case readable
            /// Encrypted, and this NAS does not hold the account's key yet.
            case keyNeeded = "key-needed"
            /// Encrypted, and it does not open with this account's key (or is damaged).
            case unreadable
            /// The old plaintext format 1: restored only with `--allow-unencrypted`.
            case unencrypted
        }

        package var id: String
        /// nil when the device's record is missing or cannot be read (its manifest may still be there).
        @Null package var name: String?
        package var folders: [String]
        @Null package var lastBackupAt: String?
        package var files: Int64
        package var bytes: Int64
        /// This NAS.
        package var current: Bool
        @Null package var updatedAt: String?
        /// The manifest's format: 2 encrypted, 1 plaintext.
        @Null package var format: Int?
        @Null package var access: Access?
        /// When the device's manifest last changed, from the bucket's listing (known without the key).
        @Null package var changedAt: String?
        /// Why it cannot be read, in words.
        @Null package var problem: String?

        package init(id: String, name: String?, folders: [String], lastBackupAt: String?, files: Int64, bytes: Int64, current: Bool,
                    updatedAt: String?, format: Int? = nil, access: Access? = nil, changedAt: String? = nil, problem: String? = nil) {
            self.id = id
            self.name = name
            self.folders = folders
            self.lastBackupAt = lastBackupAt
            self.files = files
            self.bytes = bytes
            self.current = current
            self.updatedAt = updatedAt
            self.format = format
            self.access = access
            self.changedAt = changedAt
            self.problem = problem
        }
    }

    package var devices: [Device]
    /// What the list cannot show, and what to run (names, folders and totals of encrypted
    /// manifests need the recovery key on this NAS).
    @Null package var note: String?
    package init(devices: [Device], note: String? = nil) {
        self.devices = devices
        self.note = note
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
/// show it and the audit trail can say who restored what. The first call (no `id`) opens
/// the session and is the restore's permission check; it says where the files go. The
/// last (`finished`) carries the counts.
package struct RestoreReport: Codable, Sendable, Equatable {
    /// How a restore ended, as its summary says.
    package struct Outcome: Codable, Sendable, Equatable {
        package var restored: Int
        package var alreadyThere: Int
        package var kept: Int
        package var failed: Int
        /// Files the plan would not write where the manifest put them (outside `--to` and
        /// this NAS's watched folders).
        package var refused: Int
        package var waitingArchived: Int
        package var interrupted: Bool
        /// Why the restore stopped before its end, if it did.
        package var stopped: String?

        package init(restored: Int = 0, alreadyThere: Int = 0, kept: Int = 0, failed: Int = 0, refused: Int = 0,
                     waitingArchived: Int = 0, interrupted: Bool = false, stopped: String? = nil) {
            self.restored = restored
            self.alreadyThere = alreadyThere
            self.kept = kept
            self.failed = failed
            self.refused = refused
            self.waitingArchived = waitingArchived
            self.interrupted = interrupted
            self.stopped = stopped
        }
    }

    package var id: String?
    package var device: String
    package var filesDone: Int
    package var filesTotal: Int
    package var bytesDone: Int64
    package var bytesTotal: Int64
    package var waitingArchived: Int
    package var archiveClass: String?
    package var finished: Bool
    /// The device's id (`device` is its name when it has one).
    package var deviceId: String?
    /// `--to DIR`; nil: the files' original folders.
    package var to: String?
    /// `--as-of` as given.
    package var asOf: String?
    /// How many PATH filters were given (0: everything).
    package var paths: Int?
    /// With `finished`.
    package var outcome: Outcome?

    package init(id: String? = nil, device: String, filesDone: Int = 0, filesTotal: Int = 0, bytesDone: Int64 = 0, bytesTotal: Int64 = 0,
                waitingArchived: Int = 0, archiveClass: String? = nil, finished: Bool = false, deviceId: String? = nil,
                to: String? = nil, asOf: String? = nil, paths: Int? = nil, outcome: Outcome? = nil) {
        self.id = id
        self.device = device
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.waitingArchived = waitingArchived
        self.archiveClass = archiveClass
        self.finished = finished
        self.deviceId = deviceId
        self.to = to
        self.asOf = asOf
        self.paths = paths
        self.outcome = outcome
    }
}

package struct RestoreSessionReply: Codable, Sendable, Equatable {
    package var id: String
    package init(id: String) {
        self.id = id
    }
}

extension DeviceList {
    /// The list as a member of the socket group sees it (privacy.md "No side doors"): this
    /// NAS's folders only where it could list the folder holding them; another device's
    /// name and folders not at all (root and the daemon's user see them).
    package func seen(mayName: (String) -> Bool) -> DeviceList {
        var out = self
        var hid = false
        out.devices = devices.map { device in
            var d = device
            if d.current {
                d.folders = d.folders.filter(mayName)
            } else if d.name != nil || !d.folders.isEmpty {
                d.name = nil
                d.folders = []
                hid = true
            }
            return d
        }
        if hid {
            let words = "Other devices' names and folders are shown to root and the daemon's user only."
            out.note = out.note.map { "\($0) \(words)" } ?? words
        }
        return out
    }
}
