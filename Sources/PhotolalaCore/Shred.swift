#if canImport(Glibc)
import Glibc
#endif

/// Removing a file that held a secret (a key file, a sign-in): its bytes are overwritten
/// with zeros and synced before its name goes, so they do not stay in the file's blocks
/// for whoever reads the disk later, as far as the file system lets a program reach them.
/// A copy-on-write file system (btrfs, ZFS) or a snapshot keeps the old blocks whatever a
/// program does (docs/decisions.md says so); on ext4 and XFS an overwrite lands in place.
package enum Shred {
    package struct Failure: Error, Equatable, CustomStringConvertible {
        package var message: String
        package var description: String { message }
    }

    /// Overwrites `name` in the folder `directory` (never following a link), syncs it,
    /// unlinks it and syncs the folder. Nothing there is fine.
    package static func remove(_ name: String, in directory: String) throws(Failure) {
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else {
            if errno == ENOENT { return }
            throw Failure(message: "cannot open \(directory): \(errnoText(errno))")
        }
        defer { close(dir) }
        try remove(name, at: dir, shown: directory + "/" + name)
        guard fsync(dir) == 0 else { throw Failure(message: "cannot sync \(directory): \(errnoText(errno))") }
    }

    /// The same at a path (the folder synced too).
    package static func remove(path: String) throws(Failure) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        try remove(name, in: directory)
    }

    /// Overwrites and unlinks `name` below the open folder `dir`; the caller syncs the folder.
    package static func remove(_ name: String, at dir: Int32, shown: String) throws(Failure) {
        let fd = openat(dir, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            switch errno {
            case ENOENT: return
            // A link or something else planted there: its name goes, nothing is written through it.
            case ELOOP, ENXIO, EISDIR, EACCES:
                break
            default:
                throw Failure(message: "cannot open \(shown) to overwrite it: \(errnoText(errno))")
            }
        } else {
            defer { close(fd) }
            var st = stat()
            if fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size > 0 {
                let zeros = [UInt8](repeating: 0, count: 64 << 10)
                var offset: off_t = 0
                while offset < st.st_size {
                    let count = Int(min(off_t(zeros.count), st.st_size - offset))
                    let n = retryingInterrupts { zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, count, offset) } }
                    guard n > 0 else { throw Failure(message: "cannot overwrite \(shown): \(errnoText(errno))") }
                    offset += off_t(n)
                }
                guard fsync(fd) == 0 else { throw Failure(message: "cannot sync \(shown) after overwriting it: \(errnoText(errno))") }
            }
        }
        if unlinkat(dir, name, 0) != 0 && errno != ENOENT {
            throw Failure(message: "cannot remove \(shown): \(errnoText(errno))")
        }
    }
}
