/// Digests: MD5, SHA-256 and HMAC-SHA256 over OpenSSL, lowercase hex, the hasher (each
/// photo read once, in SIMD lanes), and `VerifiedFile`, the one way to open the very file
/// that was hashed; shared by the hasher, the stages and the S3 transport alike.
#if canImport(Glibc)
import Glibc
#endif
import CLinux
import PhotolalaCore

/// A photo opened read-only for the hasher, the uploader, the thumbnails or a restore,
/// and checked to be the very file that was hashed (device, inode, size, mtime ns).
///
/// Modelled on swift-system's `FileDescriptor`: reads take an absolute offset (`pread`,
/// so the descriptor has no shared position and one file may be read from many tasks),
/// retry on EINTR, and fail with one error type that says what happened. Unlike
/// `FileDescriptor` it closes in `deinit`: an HTTP client may still pull body chunks
/// after an early answer, and a descriptor closed (and reused) under it would send
/// another file's bytes.
package final class VerifiedFile: Sendable {
    /// What became of the file; one type for every reader, so each says the same thing.
    package enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Deleted or moved away before or while it was read.
        case vanished
        /// Another file than the one hashed (rewritten, truncated, replaced by rename, a
        /// link or FIFO swapped in), or it changed while it was read: read it again later.
        case changed
        /// No file was expected and what is there is not a regular file (a directory, a
        /// link not followed, a FIFO).
        case notRegularFile
        /// The very file, but it cannot be opened or read; the sentence says why (errno text).
        case unreadable(String)

        package var description: String {
            switch self {
            case .changed: "the file changed while it was being read"
            case .vanished: "the file disappeared before it could be read"
            case let .unreadable(why): why
            case .notRegularFile: "not a regular file"
            }
        }
    }

    package let path: String
    /// The identity at open: the `expected` one, or what the hasher found there.
    package let identity: FileIdentity
    package let followSymlinks: Bool
    /// The open descriptor, for what must go below the reads (handing it to the preview
    /// worker, `posix_fadvise`). Valid while this object lives.
    package let descriptor: Int32

    package var size: Int64 { identity.size }

    /// Opens `path` read-only and checks it is a regular file, and the `expected` one when
    /// given (nil: the hasher, which takes the identity it finds).
    ///
    /// Whatever is at `path` now may not be the file that was hashed: another program can
    /// swap in a FIFO (whose blocking open would wait for a writer forever, holding a
    /// worker and then the daemon's shutdown), a device or a symlink. O_NONBLOCK makes such
    /// an open return at once and fstat then tells; links are followed only when the
    /// watcher follows them (`watch.follow_symlinks`), and then the identity is the target's.
    package init(path: String, expected: FileIdentity? = nil, followSymlinks: Bool = false) throws(Failure) {
        let flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (followSymlinks ? 0 : O_NOFOLLOW)
        let fd = retryingInterrupts { open(path, flags) }
        guard fd >= 0 else { throw Self.openFailure(errno, expected: expected != nil) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let why = errnoText(errno)
            close(fd)
            throw .unreadable("cannot stat: \(why)")
        }
        let found = FileIdentity(st)
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw expected == nil ? .notRegularFile : .changed
        }
        if let expected, found != expected {
            close(fd)
            throw .changed
        }
        self.path = path
        self.followSymlinks = followSymlinks
        descriptor = fd
        identity = found
    }

    deinit { close(descriptor) }

    /// One read of up to `buffer.count` bytes at `offset`; 0 is the end of the file.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Failure) -> Int {
        let n = retryingInterrupts { pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset)) }
        guard n >= 0 else { throw .unreadable("read failed: \(errnoText(errno))") }
        return n
    }

    /// Fills `buffer` from `offset`; fewer bytes than asked only at the end of the file.
    package func read(filling buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Failure) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + Int64(done))
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads `length` bytes from `offset` once, front to back, at most `chunkSize` at a
    /// time, and hands each chunk to `body`. The end of the file before `length` is
    /// `.changed`: shorter than it was hashed.
    package func read(from offset: Int64, length: Int64, chunkSize: Int = 1 << 20,
                      _ body: (UnsafeRawBufferPointer) -> Void) throws(Failure) {
        guard length > 0 else { return }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(min(Int64(max(1, chunkSize)), length)),
                                                            alignment: 4096)
        defer { buffer.deallocate() }
        var position = offset
        var remaining = length
        while remaining > 0 {
            let want = Int(min(Int64(buffer.count), remaining))
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: position)
            if n == 0 { throw .changed }
            body(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            position += Int64(n)
            remaining -= Int64(n)
        }
    }

    /// What one read of a range found: its MD5 and its SHA-256, each when asked for.
    package struct RangeDigest: Sendable, Equatable {
        /// The 16 bytes.
        package var md5: [UInt8]?
        package var sha256Hex: String?

        package var md5Hex: String? { md5.map(Hex.string) }
    }

    /// The MD5 and (when asked) the SHA-256 of `length` bytes from `offset` (to the end
    /// when nil), in one read. A range past the end is `.changed`.
    package func digest(from offset: Int64 = 0, length: Int64? = nil, md5 wantMD5: Bool = true, sha256 wantSHA: Bool = false,
                        chunkSize: Int = 1 << 20) throws(Failure) -> RangeDigest {
        let length = length ?? (size - offset)
        guard offset >= 0, length >= 0, offset + length <= size else { throw .changed }
        var md5 = MD5()
        var sha = SHA256()
        try read(from: offset, length: length, chunkSize: chunkSize) { chunk in
            if wantMD5 { md5.update(chunk) }
            if wantSHA { sha.update(chunk) }
        }
        return RangeDigest(md5: wantMD5 ? md5.finish() : nil, sha256Hex: wantSHA ? sha.finishHex() : nil)
    }

    /// Reads only what the page cache already holds, never waiting for the disk
    /// (RWF_NOWAIT): nil when the bytes at `offset` are not cached, or the kernel or
    /// filesystem cannot tell. The hasher learns from it whether it brought the file in.
    package func readCached(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int? {
        let n = retryingInterrupts { photolala_pread_cached(descriptor, buffer.baseAddress, buffer.count, off_t(offset)) }
        return n > 0 ? n : nil
    }

    package enum Advice {
        /// Read front to back: the kernel reads further ahead.
        case sequential
        /// The pages of the range are not needed again: give them back to the page cache.
        case dontNeed
    }

    /// `length: nil` means to the end of the file.
    package func advise(_ advice: Advice, from offset: Int64 = 0, length: Int64? = nil) {
        let code = switch advice {
        case .sequential: POSIX_FADV_SEQUENTIAL
        case .dontNeed: POSIX_FADV_DONTNEED
        }
        _ = posix_fadvise(descriptor, off_t(offset), off_t(length ?? 0), code)
    }

    /// Throws unless the file is still the one opened, by its descriptor (rewritten in
    /// place) and by its path (a file replaced by rename keeps our descriptor on the old
    /// inode): `.vanished` when the path is gone, `.changed` when anything moved.
    package func checkUnchanged() throws(Failure) {
        var st = stat()
        guard fstat(descriptor, &st) == 0 else { throw .unreadable("cannot stat: \(errnoText(errno))") }
        var byPath = stat()
        if (followSymlinks ? stat(path, &byPath) : lstat(path, &byPath)) != 0 {
            throw errno == ENOENT || errno == ENOTDIR ? .vanished : .unreadable("cannot stat: \(errnoText(errno))")
        }
        guard FileIdentity(st) == identity, FileIdentity(byPath) == identity else { throw .changed }
    }

    /// Whether `checkUnchanged()` passes.
    package var isUnchanged: Bool {
        do { try checkUnchanged(); return true } catch { return false }
    }

    private static func openFailure(_ code: Int32, expected: Bool) -> Failure {
        switch code {
        case ENOENT, ENOTDIR: .vanished
        // A link where a file was (not followed), a socket: not a file to read, and not
        // the hashed one if a file was expected.
        case ELOOP, ENXIO, EOPNOTSUPP: expected ? .changed : .notRegularFile
        case EACCES, EPERM: .unreadable("permission denied: the daemon's user cannot read it (see photolalad(8), \"Permissions\")")
        default: .unreadable("cannot open: \(errnoText(code))")
        }
    }
}

extension FileIdentity {
    /// The identity a `stat` records; the hasher takes it before and after reading, the
    /// uploader compares it before sending, so both spell it the same way here.
    package init(_ st: stat) {
        self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                  mtimeSec: Int64(st.st_mtim.tv_sec), mtimeNsec: Int64(st.st_mtim.tv_nsec))
    }
}
