#if canImport(Glibc)
import Glibc
#endif

/// readdir(3) without a stat per entry.
package enum DirectoryEntries {
    private static let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19

    /// Calls `body` with each entry's NUL-terminated name and d_type, skipping "." and "..".
    /// Returns 0, or the errno that stopped readdir early.
    package static func forEach(_ dir: OpaquePointer, _ body: (UnsafePointer<CChar>, UInt8) -> Void) -> Int32 {
        while true {
            errno = 0
            guard let entry = readdir(dir) else { return errno }
            let name = UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: CChar.self)
            if name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0)) { continue }
            body(name, entry.pointee.d_type)
        }
    }

    /// Lists a directory by path; returns 0 or the errno of opendir/readdir.
    static func forEach(path: String, _ body: (UnsafePointer<CChar>, UInt8) -> Void) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return errno }
        guard let dir = fdopendir(fd) else {
            let err = errno
            close(fd)
            return err
        }
        defer { closedir(dir) }
        return forEach(dir, body)
    }

    static func entryType(_ mode: mode_t) -> UInt8 {
        switch mode & S_IFMT {
        case S_IFDIR: UInt8(DT_DIR)
        case S_IFREG: UInt8(DT_REG)
        case S_IFLNK: UInt8(DT_LNK)
        case S_IFIFO: UInt8(DT_FIFO)
        case S_IFSOCK: UInt8(DT_SOCK)
        case S_IFCHR: UInt8(DT_CHR)
        case S_IFBLK: UInt8(DT_BLK)
        default: UInt8(DT_UNKNOWN)
        }
    }
}
