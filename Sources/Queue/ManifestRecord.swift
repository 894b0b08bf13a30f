/// An entry of the manifest as the queue mirrors it: keyed by the file's absolute path.
package struct ManifestRecord: Sendable, Equatable {
    /// 1 appeared, 2 changed, 3 gone (as the format's record kinds).
    package var kind: Int
    package var path: String
    package var folder: String
    /// Milliseconds since the epoch.
    package var time: Int64
    package var size: Int64?
    package var md5: String?
    package var mtimeSec: Int64?
    package var mtimeNsec: Int64?

    package init(kind: Int, path: String, folder: String, time: Int64, size: Int64?, md5: String?, mtimeSec: Int64?, mtimeNsec: Int64?) {
        self.kind = kind
        self.path = path
        self.folder = folder
        self.time = time
        self.size = size
        self.md5 = md5
        self.mtimeSec = mtimeSec
        self.mtimeNsec = mtimeNsec
    }

    package var isGone: Bool { kind == 3 }
}

/// A mirrored entry with its place in the log, for writing snapshots in (path, seq, ord) order.
package struct StoredManifestRecord: Sendable, Equatable {
    package var seq: Int64
    package var ord: Int64
    package var record: ManifestRecord
}
