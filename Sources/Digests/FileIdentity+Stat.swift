#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

extension FileIdentity {
    /// The identity a `stat` records; the hasher takes it before and after reading, the
    /// uploader compares it before sending, so both spell it the same way here.
    package init(_ st: stat) {
        self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                  mtimeSec: Int64(st.st_mtim.tv_sec), mtimeNsec: Int64(st.st_mtim.tv_nsec))
    }
}
