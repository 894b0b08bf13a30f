#if canImport(Glibc)
import Glibc
#endif
import Digests
import PhotolalaCore
import Previews

/// A live file holding a photo's bytes, opened for the preview worker: checked to be the
/// very file that was hashed (device, inode, size, mtime), like the uploader's
/// `RangeReader`. The daemon reads only its first bytes — the head MD5 and the format —
/// and hands the descriptor to the worker; it never decodes the image itself.
final class PhotoFile: @unchecked Sendable {
    let fd: Int32
    let path: String
    let identity: FileIdentity
    private let followSymlinks: Bool

    enum OpenFailure: Error, Equatable {
        /// Gone, replaced or changed since it was hashed.
        case notTheHashedFile
        case unreadable(String)
    }

    init(path: String, expected: FileIdentity, followSymlinks: Bool) throws(OpenFailure) {
        self.path = path
        self.followSymlinks = followSymlinks
        // O_NONBLOCK: a FIFO swapped in for the photo must not hang the stage.
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (followSymlinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else {
            switch errno {
            case ENOENT, ENOTDIR, ELOOP, ENXIO, EOPNOTSUPP: throw .notTheHashedFile
            default: throw .unreadable(String(cString: strerror(errno)))
            }
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, FileIdentity(st) == expected else {
            close(fd)
            throw .notTheHashedFile
        }
        identity = expected
    }

    deinit { close(fd) }

    /// The MD5 of the first 4096 bytes (the whole file if shorter) and the format from
    /// the first bytes (app-catalog.md).
    func head() throws(OpenFailure) -> (md5: String, format: PhotoFormat) {
        var bytes = [UInt8](repeating: 0, count: Int(min(Int64(PhotoFormat.sniffLength), identity.size)))
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + offset, $0.count - offset, off_t(offset)) }
            if n < 0, errno == EINTR { continue }
            if n < 0 { throw .unreadable(String(cString: strerror(errno))) }
            if n == 0 { throw .notTheHashedFile }
            offset += n
        }
        return (Hex.string(MD5.digest(Array(bytes.prefix(4096)))), PhotoFormat.sniff(bytes))
    }

    /// Still the hashed file, by its descriptor and by its path.
    func unchanged() -> Bool {
        var st = stat()
        var byPath = stat()
        return fstat(fd, &st) == 0 && FileIdentity(st) == identity
            && (followSymlinks ? stat(path, &byPath) : lstat(path, &byPath)) == 0 && FileIdentity(byPath) == identity
    }
}
