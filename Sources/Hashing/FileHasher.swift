#if canImport(Glibc)
import Glibc
#endif
import CLinux
import PhotolalaCore

/// What hashing a file produced: its MD5 and the identity it had while being read.
public struct FileDigest: Sendable, Equatable {
    public var md5: String
    public var identity: FileIdentity
    /// Hex SHA-256 of the same bytes, when asked for (see `PayloadDigests`).
    public var sha256: String?
    /// From open to the last stat: what the log reports and the benchmark compares with md5sum.
    public var elapsed: Duration

    public init(md5: String, identity: FileIdentity, elapsed: Duration = .zero, sha256: String? = nil) {
        self.md5 = md5
        self.identity = identity
        self.elapsed = elapsed
        self.sha256 = sha256
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

    /// Large enough that syscalls cost nothing next to MD5 (a read per 0.35 ms of
    /// hashing; 32 KiB to 1 MiB measured the same), small enough to be a fixed cost per
    /// worker that the daemon's RSS does not notice.
    public static let bufferSize = 256 << 10
    private let buffer: UnsafeMutableRawBufferPointer
    /// Files above this give back the page cache *they brought in*: a file read from the
    /// disk is dropped again as it is hashed, so one big video does not push the NAS's
    /// working set out of memory. A file that was cached before we came (just copied in,
    /// being played) stays: dropping it would evict exactly the working set this
    /// protects, and send the next reader (the uploader too) to the disk.
    public var dropCacheAbove: Int64 = 64 << 20

    public init() {
        buffer = .allocate(byteCount: Self.bufferSize, alignment: 4096)
    }

    deinit { buffer.deallocate() }

    public static func identity(of st: stat) -> FileIdentity {
        FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                     mtimeSec: Int64(st.st_mtim.tv_sec), mtimeNsec: Int64(st.st_mtim.tv_nsec))
    }

    /// `sha256`: also take the SHA-256 of the bytes, in the same pass.
    public func hash(path: String, followSymlinks: Bool = false, sha256 wantSHA: Bool = false) throws(Failure) -> FileDigest {
        let started = ContinuousClock.now
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
        var sha = SHA256()
        var offset: Int64 = 0
        // Whether the file was in the page cache before we came is told by its first
        // chunk, read without waiting: it comes from the cache or not at all. Files are
        // nearly always cached whole (just copied in, being played) or not at all (old
        // ones a scan finds). One read of a cold file caches the next ones (readahead),
        // so later chunks cannot tell, and a few pages evicted meanwhile from a warm
        // file must not make us drop the rest of it: the first answer holds.
        var probe = size > dropCacheAbove
        // Set when the file came from the disk: from there on its pages are ours to drop.
        var coldFrom: Int64?
        while true {
            var n: Int
            if probe {
                // Where the cache cannot say (EOPNOTSUPP: an old kernel, a filesystem
                // without RWF_NOWAIT), the file counts as ours, as it always did.
                n = photolala_pread_cached(fd, buffer.baseAddress, buffer.count, off_t(offset))
                if n < 0 && errno == EINTR { continue }
                probe = false
                if n <= 0 {
                    n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
                    if n > 0 { coldFrom = offset }
                }
            } else {
                n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw .unreadable("read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            md5.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            if wantSHA { sha.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
            offset += Int64(n)
            if let coldFrom {
                Self.dropPages(fd, from: max(coldFrom, offset - Self.dropWindow), to: offset)
            }
        }
        if let coldFrom {
            // The last folios, and whatever readahead brought in beyond what we read.
            Self.dropPages(fd, from: max(coldFrom, offset - Self.dropWindow), to: nil)
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
        return FileDigest(md5: Hex.string(md5.finish()), identity: first, elapsed: .now - started,
                          sha256: wantSHA ? Hex.string(sha.finish()) : nil)
    }

    /// DONTNEED drops only the folios wholly inside its range, and the page cache keeps a
    /// file in folios of up to 2 MiB (with large folios, Linux 6.x): dropping each chunk
    /// on its own dropped nothing at all. Each call covers the last 8 MiB read, so every
    /// folio lies inside one of them once the reader is past it.
    static let dropWindow: Int64 = 8 << 20

    /// `to: nil` means to the end of the file.
    static func dropPages(_ fd: Int32, from: Int64, to: Int64?) {
        _ = posix_fadvise(fd, off_t(from), off_t(to.map { $0 - from } ?? 0), POSIX_FADV_DONTNEED)
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
