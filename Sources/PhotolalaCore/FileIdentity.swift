/// (device, inode, size, mtime with nanoseconds): what tells a file changed without reading it.
package struct FileIdentity: Sendable, Equatable, Hashable {
    package var device: UInt64
    package var inode: UInt64
    package var size: Int64
    package var mtimeSec: Int64
    package var mtimeNsec: Int64

    package init(device: UInt64, inode: UInt64, size: Int64, mtimeSec: Int64, mtimeNsec: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.mtimeSec = mtimeSec
        self.mtimeNsec = mtimeNsec
    }
}

/// Who owns a file and its permission bits, as a `stat` gives them: what the manifest
/// records so a restore can give them back (privacy.md "Owners and modes").
package struct FileOwner: Sendable, Equatable, Hashable {
    package var uid: UInt32
    package var gid: UInt32
    /// `st_mode & 0o7777`.
    package var mode: UInt32

    package init(uid: UInt32, gid: UInt32, mode: UInt32) {
        self.uid = uid
        self.gid = gid
        self.mode = mode & 0o7777
    }
}
