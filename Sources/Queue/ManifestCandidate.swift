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
