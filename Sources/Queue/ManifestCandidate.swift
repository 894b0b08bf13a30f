/// One path whose backed-up state may have changed: the file as the queue holds it now,
/// and the manifest's last entry for that path.
package struct ManifestCandidate: Sendable, Equatable {
    package struct FileRow: Sendable, Equatable {
        package var state: FileState
        package var size: Int64
        package var md5: String?
        package var mtimeSec: Int64
        package var mtimeNsec: Int64
        package var updatedAt: Double
        package init(state: FileState, size: Int64, md5: String?, mtimeSec: Int64, mtimeNsec: Int64, updatedAt: Double) {
            self.state = state
            self.size = size
            self.md5 = md5
            self.mtimeSec = mtimeSec
            self.mtimeNsec = mtimeNsec
            self.updatedAt = updatedAt
        }
    }

    package var path: String
    /// nil: no row at this path any more (it moved away).
    package var file: FileRow?
    /// nil: the manifest never had this path.
    package var current: ManifestRecord?

    package init(path: String, file: FileRow?, current: ManifestRecord?) {
        self.path = path
        self.file = file
        self.current = current
    }
}
