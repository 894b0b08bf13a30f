#if canImport(Glibc)
import Glibc
#endif
import Digests
import Dispatch
import Foundation
import PhotolalaCore

/// Reads a file once, front to back, part by part: each part's MD5 (its Content-MD5 and
/// expected ETag) and optionally SHA-256 (signed over plain HTTP), while a running MD5 of
/// the whole file proves the bytes still are the ones the key names.
final class RangeReader: @unchecked Sendable {
    struct PartDigest: Sendable {
        var md5Hex: String
        var contentMD5: String
        var sha256Hex: String?
    }

    enum Failure: Error, Sendable {
        case gone
        case unreadable(String)
        case changed
    }

    private let fd: Int32
    private let buffer: UnsafeMutableRawBufferPointer
    private var whole = MD5()
    private var position: Int64 = 0
    let identity: FileIdentity

    private let followSymlinks: Bool

    /// Opens the file and checks it is still the one that was hashed.
    ///
    /// Whatever is at `path` now may not be that file: another program can swap in a FIFO
    /// (whose open would wait for a writer forever, holding an upload worker and then the
    /// daemon's shutdown), a device or a symlink. O_NONBLOCK makes such an open return at
    /// once and fstat then tells; links are followed only when the watcher follows them
    /// (`watch.follow_symlinks`), and then the identity compared is the target's, as hashed.
    init(path: String, expected: FileIdentity, followSymlinks: Bool = false) throws(Failure) {
        self.followSymlinks = followSymlinks
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (followSymlinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else {
            switch errno {
            case ENOENT, ENOTDIR: throw .gone
            // A link where a file was hashed, a socket: not the hashed file any more.
            case ELOOP, ENXIO, EOPNOTSUPP: throw .changed
            default: throw .unreadable(String(cString: strerror(errno)))
            }
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else { close(fd); throw .unreadable(String(cString: strerror(errno))) }
        identity = FileIdentity(st)
        guard (st.st_mode & S_IFMT) == S_IFREG, identity == expected else { close(fd); throw .changed }
        buffer = .allocate(byteCount: 1 << 20, alignment: 4096)
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
    }

    deinit {
        close(fd)
        buffer.deallocate()
    }

    /// Digests the next `length` bytes (parts must be read in order).
    /// `md5: false` skips both this part's MD5 and the whole-file MD5 (a single PUT whose
    /// Content-MD5 is the hashed MD5 already; the identity check covers the rest).
    func next(length: Int64, sha256 wantSHA: Bool, md5 wantMD5: Bool = true) throws(Failure) -> PartDigest {
        var md5 = MD5()
        var sha = SHA256()
        var remaining = length
        while remaining > 0 {
            let n = pread(fd, buffer.baseAddress, Int(min(Int64(buffer.count), remaining)), off_t(position))
            if n < 0 {
                if errno == EINTR { continue }
                throw .unreadable(String(cString: strerror(errno)))
            }
            if n == 0 { throw .changed }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            if wantMD5 {
                md5.update(chunk)
                whole.update(chunk)
            }
            if wantSHA { sha.update(chunk) }
            position += Int64(n)
            remaining -= Int64(n)
        }
        let digest = md5.finish()
        return PartDigest(md5Hex: Hex.string(digest), contentMD5: Data(digest).base64EncodedString(),
                          sha256Hex: wantSHA ? Hex.string(sha.finish()) : nil)
    }

    /// After the last part: the whole file's MD5, and whether the file is unchanged since opening.
    func finish(path: String) -> (md5: String, unchanged: Bool) {
        let digest = Hex.string(whole.finalize())
        var st = stat()
        var byPath = stat()
        let unchanged = fstat(fd, &st) == 0 && (followSymlinks ? stat(path, &byPath) : lstat(path, &byPath)) == 0
            && FileIdentity(st) == identity && FileIdentity(byPath) == identity
        return (digest, unchanged)
    }
}

/// Runs blocking file reads on a utility queue, off Swift's small cooperative pool.
enum BlockingIO {
    static let queue = DispatchQueue(label: "photolala.upload.io", qos: .utility, attributes: .concurrent)

    static func run<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { c in
            queue.async {
                do throws(E) { c.resume(returning: .success(try work())) } catch { c.resume(returning: .failure(error)) }
            }
        }
        return try result.get()
    }
}
