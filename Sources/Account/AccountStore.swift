#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore

/// The saved sign-in: `account.json` in the state directory, mode 0600, written
/// atomically (temp file, fsync, rename, fsync of the directory) so a crash leaves the
/// old or the new sign-in, never half of one. `erase()` overwrites before unlinking.
package struct AccountStore: Sendable {
    package let path: String

    package init(stateDir: String) {
        path = stateDir + "/account.json"
    }

    package enum Failure: Error, CustomStringConvertible {
        case write(String)
        package var description: String {
            switch self {
            case let .write(why): "cannot save the sign-in: \(why)"
            }
        }
    }

    package func load() -> SignIn? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(SignIn.self, from: data)
    }

    package func save(_ signIn: SignIn) throws(Failure) {
        guard let data = try? JSONEncoder().encode(signIn) else { throw .write("encoding failed") }
        try Self.atomicWrite(Array(data), to: path)
    }

    /// Overwrites the file with zeros, syncs, then unlinks: the tokens do not survive in the file's blocks
    /// as far as the filesystem lets us reach them.
    package func erase() {
        try? Shred.remove(path: path)
        try? Shred.remove(path: path + ".tmp")
    }

    static func atomicWrite(_ bytes: [UInt8], to path: String) throws(Failure) {
        let tmp = path + ".tmp"
        unlink(tmp)
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .write("\(tmp): \(String(cString: strerror(errno)))") }
        var offset = 0
        while offset < bytes.count {
            let n = retryingInterrupts { bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
            if n < 0 {
                let why = String(cString: strerror(errno))
                close(fd)
                unlink(tmp)
                throw .write(errno == ENOSPC ? "disk full (\(why))" : why)
            }
            offset += n
        }
        guard fsync(fd) == 0 else {
            let why = String(cString: strerror(errno))
            close(fd)
            unlink(tmp)
            throw .write(why)
        }
        close(fd)
        guard rename(tmp, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(tmp)
            throw .write(why)
        }
        let dir = (path as NSString).deletingLastPathComponent
        let dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 {
            fsync(dfd)
            close(dfd)
        }
    }
}
