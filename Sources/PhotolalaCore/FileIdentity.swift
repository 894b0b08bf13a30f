/// (device, inode, size, mtime with nanoseconds): what tells a file changed without reading it.
public struct FileIdentity: Sendable, Equatable, Hashable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    public var mtimeSec: Int64
    public var mtimeNsec: Int64

    public init(device: UInt64, inode: UInt64, size: Int64, mtimeSec: Int64, mtimeNsec: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.mtimeSec = mtimeSec
        self.mtimeNsec = mtimeNsec
    }
}
