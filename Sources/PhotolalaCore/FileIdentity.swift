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
