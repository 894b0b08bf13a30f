#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Digests
import PhotolalaCore

/// One file read front to back for hashing: opened without following links or waiting on
/// FIFOs, its identity taken before and checked after, the page cache it brought in given
/// back, and (when asked) its SHA-256 taken on the way. The MD5 is the caller's: one
/// stream at a time (`FileHasher`) or many per core (`LaneHasher`).
final class HashedFileReader {
    typealias Failure = FileHasher.Failure

    let path: String
    private let followSymlinks: Bool
    private let fd: Int32
    private let before: stat
    private let started: ContinuousClock.Instant
    private(set) var offset: Int64 = 0
    private var sha = SHA256()
    private let wantSHA: Bool
    // Whether the file was in the page cache before we came is told by its first
    // chunk, read without waiting: it comes from the cache or not at all. Files are
    // nearly always cached whole (just copied in, being played) or not at all (old
    // ones a scan finds). One read of a cold file caches the next ones (readahead),
    // so later chunks cannot tell, and a few pages evicted meanwhile from a warm
    // file must not make us drop the rest of it: the first answer holds.
    private var probe: Bool
    /// Set when the file came from the disk: from there on its pages are ours to drop.
    private var coldFrom: Int64?

    init(path: String, followSymlinks: Bool, sha256: Bool, dropCacheAbove: Int64) throws(Failure) {
        started = .now
        self.path = path
        self.followSymlinks = followSymlinks
        wantSHA = sha256
        let flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (followSymlinks ? 0 : O_NOFOLLOW)
        fd = open(path, flags)
        guard fd >= 0 else { throw FileHasher.openFailure(errno) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let why = String(cString: strerror(errno))
            close(fd)
            throw .unreadable("cannot stat: \(why)")
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { close(fd); throw .notRegularFile }
        before = st
        probe = Int64(st.st_size) > dropCacheAbove
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
    }

    deinit { close(fd) }

    /// Size when opened.
    var size: Int64 { Int64(before.st_size) }

    /// Reads the next bytes into `buffer`; 0 is the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(Failure) -> Int {
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
            if n > 0 {
                if wantSHA { sha.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
                offset += Int64(n)
                if let coldFrom { FileHasher.dropPages(fd, from: max(coldFrom, offset - FileHasher.dropWindow), to: offset) }
            }
            return n
        }
    }

    /// After the last read: the identity the file kept throughout, or why it cannot be trusted.
    func finish(md5: [UInt8]) throws(Failure) -> FileDigest {
        if let coldFrom {
            // The last folios, and whatever readahead brought in beyond what we read.
            FileHasher.dropPages(fd, from: max(coldFrom, offset - FileHasher.dropWindow), to: nil)
        }
        // Stat by path too: a file replaced by rename keeps our fd on the old inode.
        var after = stat()
        guard fstat(fd, &after) == 0 else { throw .unreadable("cannot stat: \(String(cString: strerror(errno)))") }
        var byPath = stat()
        if (followSymlinks ? stat(path, &byPath) : lstat(path, &byPath)) != 0 {
            throw errno == ENOENT ? .vanished : .unreadable("cannot stat: \(String(cString: strerror(errno)))")
        }
        let first = FileIdentity(before)
        guard first == FileIdentity(after), first == FileIdentity(byPath), offset == first.size else {
            throw .changed
        }
        return FileDigest(md5: Hex.string(md5), identity: first, elapsed: .now - started,
                          sha256: wantSHA ? Hex.string(sha.finalize()) : nil)
    }
}
