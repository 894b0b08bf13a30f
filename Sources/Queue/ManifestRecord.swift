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
