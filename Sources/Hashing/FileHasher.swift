#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

/// What hashing a file produced: its MD5 and the identity it had while being read.
public struct FileDigest: Sendable, Equatable {
    public var md5: String
    public var identity: FileIdentity

    public init(md5: String, identity: FileIdentity) {
        self.md5 = md5
        self.identity = identity
    }
}

/// Hashes one file with a fixed buffer (memory does not grow with file size), checking
/// its identity before and after: a file that changed while it was read is not trusted.
public struct FileHasher: ~Copyable {
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Size or mtime changed while reading: still being written; let it settle again.
        case changed
        /// Deleted (or moved away) before or while it was read.
        case vanished
        /// Could not be opened or read; the sentence says why.
        case unreadable(String)
        case notRegularFile

        public var description: String {
            switch self {
            case .changed: "the file changed while it was being read"
            case .vanished: "the file disappeared before it could be read"
            case let .unreadable(why): why
            case .notRegularFile: "not a regular file"
            }
        }
    }

    public static let bufferSize = 1 << 20
    private let buffer: UnsafeMutableRawBufferPointer
    /// Files above this are dropped from the page cache as they are read, so one big
    /// video does not push the NAS's working set out of memory.
    public var dropCacheAbove: Int64 = 64 << 20

    public init() {
        buffer = .allocate(byteCount: Self.bufferSize, alignment: 4096)
    }

    deinit { buffer.deallocate() }

    public static func identity(of st: stat) -> FileIdentity {
        FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                     mtimeSec: Int64(st.st_mtim.tv_sec), mtimeNsec: Int64(st.st_mtim.tv_nsec))
    }

    public func hash(path: String, followSymlinks: Bool = false) throws(Failure) -> FileDigest {
        let flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (followSymlinks ? 0 : O_NOFOLLOW)
        let fd = open(path, flags)
        guard fd >= 0 else { throw Self.openFailure(errno) }
        defer { close(fd) }
        var before = stat()
        guard fstat(fd, &before) == 0 else { throw .unreadable("cannot stat: \(String(cString: strerror(errno)))") }
        guard (before.st_mode & S_IFMT) == S_IFREG else { throw .notRegularFile }
        let size = Int64(before.st_size)
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)

        var md5 = MD5()
        var offset: Int64 = 0
        while true {
            let n = read(fd, buffer.baseAddress, buffer.count)
            if n < 0 {
                if errno == EINTR { continue }
                throw .unreadable("read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            md5.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            if size > dropCacheAbove {
                _ = posix_fadvise(fd, off_t(offset), off_t(n), POSIX_FADV_DONTNEED)
            }
            offset += Int64(n)
        }

        // Stat by path too: a file replaced by rename keeps our fd on the old inode.
        var after = stat()
        guard fstat(fd, &after) == 0 else { throw .unreadable("cannot stat: \(String(cString: strerror(errno)))") }
        var byPath = stat()
        if (followSymlinks ? stat(path, &byPath) : lstat(path, &byPath)) != 0 {
            throw errno == ENOENT ? .vanished : .unreadable("cannot stat: \(String(cString: strerror(errno)))")
        }
        let first = Self.identity(of: before)
        guard first == Self.identity(of: after), first == Self.identity(of: byPath), offset == first.size else {
            throw .changed
        }
        return FileDigest(md5: Hex.string(md5.finish()), identity: first)
    }

    static func openFailure(_ code: Int32) -> Failure {
        switch code {
        case ENOENT, ENOTDIR: .vanished
        case EACCES, EPERM: .unreadable("permission denied: the daemon's user cannot read it (see photolalad(8), \"Permissions\")")
        case ELOOP: .notRegularFile
        default: .unreadable("cannot open: \(String(cString: strerror(code)))")
        }
    }
}
