/// Hashing: reads each photo once for its MD5 (and SHA-256 when asked): the hasher pool, many files per thread in SIMD lanes, identity checked before and after.
#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Digests
import PhotolalaCore

/// What hashing a file produced: its MD5 and the identity it had while being read.
package struct FileDigest: Sendable, Equatable {
    package var md5: String
    package var identity: FileIdentity
    /// Hex SHA-256 of the same bytes, when asked for (see `PayloadDigests`).
    package var sha256: String?
    /// From open to the last stat: what the log reports and the benchmark compares with md5sum.
    package var elapsed: Duration

    package init(md5: String, identity: FileIdentity, elapsed: Duration = .zero, sha256: String? = nil) {
        self.md5 = md5
        self.identity = identity
        self.elapsed = elapsed
        self.sha256 = sha256
    }
}

/// Hashes one file with a fixed buffer (memory does not grow with file size), checking
/// its identity before and after: a file that changed while it was read is not trusted.
package struct FileHasher: ~Copyable {
    package enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Size or mtime changed while reading: still being written; let it settle again.
        case changed
        /// Deleted (or moved away) before or while it was read.
        case vanished
        /// Could not be opened or read; the sentence says why.
        case unreadable(String)
        case notRegularFile

        package var description: String {
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
    package static let bufferSize = 256 << 10
    private let buffer: UnsafeMutableRawBufferPointer
    /// Files above this give back the page cache *they brought in*: a file read from the
    /// disk is dropped again as it is hashed, so one big video does not push the NAS's
    /// working set out of memory. A file that was cached before we came (just copied in,
    /// being played) stays: dropping it would evict exactly the working set this
    /// protects, and send the next reader (the uploader too) to the disk.
    package var dropCacheAbove: Int64 = FileHasher.defaultDropCacheAbove
    package static let defaultDropCacheAbove: Int64 = 64 << 20

    package init() {
        buffer = .allocate(byteCount: Self.bufferSize, alignment: 4096)
    }

    deinit { buffer.deallocate() }

    /// `sha256`: also take the SHA-256 of the bytes, in the same pass.
    package func hash(path: String, followSymlinks: Bool = false, sha256 wantSHA: Bool = false) throws(Failure) -> FileDigest {
        let reader = try HashedFileReader(path: path, followSymlinks: followSymlinks, sha256: wantSHA, dropCacheAbove: dropCacheAbove)
        var md5 = MD5()
        while true {
            let n = try reader.read(into: buffer)
            if n == 0 { break }
            md5.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
        return try reader.finish(md5: md5.finish())
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
