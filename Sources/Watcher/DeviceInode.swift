#if canImport(Glibc)
import Glibc
#endif

/// Identity of a directory for loop protection.
struct DeviceInode: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}
