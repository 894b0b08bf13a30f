import Foundation

/// Where this NAS's manifest stands, kept in the queue database (one JSON row of the
/// `setting` table) and changed only in the transaction that records a segment: which
/// account and device it belongs to, the last segment the bucket acknowledged, and the
/// totals the device's record shows.
public struct ManifestLedger: Codable, Sendable, Equatable {
    public var userId: String?
    public var deviceId: String?
    /// Made with the ledger: tells the segments this database wrote from those an earlier
    /// database (set aside as damaged, say) wrote under the same device.
    public var writer: String
    /// The last log segment in the bucket and mirrored here.
    public var seq: Int64 = 0
    /// The last snapshot written (it covers the log up to its number); 0: none.
    public var snapshot: Int64 = 0
    /// Records and segments in the log since that snapshot, and records in it.
    public var logEntries: Int64 = 0
    public var logSegments: Int64 = 0
    public var snapshotEntries: Int64 = 0
    /// Files the manifest holds as present now, and their bytes.
    public var files: Int64 = 0
    public var bytes: Int64 = 0
    /// The newest entry's time (ms since the epoch).
    public var lastChange: Int64?
    /// When the last segment was written (seconds since the epoch).
    public var writtenAt: Double?

    public init(userId: String?, deviceId: String?, writer: String = UUID().uuidString.lowercased()) {
        self.userId = userId
        self.deviceId = deviceId
        self.writer = writer
    }
}

/// One path whose backed-up state may have changed: the file as the queue holds it now,
/// and the manifest's last entry for that path.
public struct ManifestCandidate: Sendable, Equatable {
    public struct FileRow: Sendable, Equatable {
        public var state: FileState
        public var size: Int64
        public var md5: String?
        public var mtimeSec: Int64
        public var mtimeNsec: Int64
        public var updatedAt: Double
        public init(state: FileState, size: Int64, md5: String?, mtimeSec: Int64, mtimeNsec: Int64, updatedAt: Double) {
            self.state = state
            self.size = size
            self.md5 = md5
            self.mtimeSec = mtimeSec
            self.mtimeNsec = mtimeNsec
            self.updatedAt = updatedAt
        }
    }

    public var path: String
    /// nil: no row at this path any more (it moved away).
    public var file: FileRow?
    /// nil: the manifest never had this path.
    public var current: ManifestRecord?

    public init(path: String, file: FileRow?, current: ManifestRecord?) {
        self.path = path
        self.file = file
        self.current = current
    }
}

/// An entry of the manifest as the queue mirrors it: keyed by the file's absolute path.
public struct ManifestRecord: Sendable, Equatable {
    /// 1 appeared, 2 changed, 3 gone (as the format's record kinds).
    public var kind: Int
    public var path: String
    public var folder: String
    /// Milliseconds since the epoch.
    public var time: Int64
    public var size: Int64?
    public var md5: String?
    public var mtimeSec: Int64?
    public var mtimeNsec: Int64?

    public init(kind: Int, path: String, folder: String, time: Int64, size: Int64?, md5: String?, mtimeSec: Int64?, mtimeNsec: Int64?) {
        self.kind = kind
        self.path = path
        self.folder = folder
        self.time = time
        self.size = size
        self.md5 = md5
        self.mtimeSec = mtimeSec
        self.mtimeNsec = mtimeNsec
    }

    public var isGone: Bool { kind == 3 }
}

/// A mirrored entry with its place in the log, for writing snapshots in (path, seq, ord) order.
public struct StoredManifestRecord: Sendable, Equatable {
    public var seq: Int64
    public var ord: Int64
    public var record: ManifestRecord
}
