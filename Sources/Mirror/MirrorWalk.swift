#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Digests
import Foundation
import ManifestFormat
import PhotolalaCore
import RestoreFiles

/// Walks the mirror's folder without following a link or reading a file: every regular
/// file's place, size and identity, handed to `found` when it may matter (a size some
/// object has: adoption; an identity a copy had: a file the user moved). Hidden names are
/// skipped (`.trash/`, the marker, the user's dot files), except the mirror's own
/// temporary files, which are reported so that those no transfer holds are removed.
/// Memory stays flat: only what `wanted` keeps is kept.
package enum MirrorWalk {
    package struct File: Sendable, Equatable {
        /// Below the folder.
        package var path: String
        package var size: Int64
        package var device: UInt64
        package var inode: UInt64
        package var mtime: Int64
    }

    package struct Result: Sendable {
        package var files: [File] = []
        /// The mirror's temporary files (paths below the folder).
        package var temporaries: [String] = []
        package var folders = 0
        package var seen = 0
        /// Folders that could not be read (their paths and why).
        package var problems: [String] = []
    }

    /// At most this deep below the folder (`YYYY/MM/…` is two; a user's own tree may be more).
    package static let maxDepth = 32

    package static func walk(_ root: String, wanted: (File) -> Bool, cancelled: () -> Bool = { false }) -> Result {
        var result = Result()
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            result.problems.append("\(root): \(errnoText(errno))")
            return result
        }
        walk(fd, path: "", depth: 0, into: &result, wanted: wanted, cancelled: cancelled)
        return result
    }

    /// Takes `dirfd` (closed here).
    private static func walk(_ dirfd: Int32, path: String, depth: Int, into result: inout Result, wanted: (File) -> Bool,
                             cancelled: () -> Bool) {
        guard let dir = fdopendir(dirfd) else {
            close(dirfd)
            result.problems.append("\(path.isEmpty ? "." : path): \(errnoText(errno))")
            return
        }
        defer { closedir(dir) }
        result.folders += 1
        var subfolders: [String] = []
        while let entry = readdir(dir) {
            if cancelled() { return }
            let name = withUnsafePointer(to: entry.pointee.d_name) { p in
                p.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name == "." || name == ".." { continue }
            let relative = path.isEmpty ? name : path + "/" + name
            if name.hasPrefix(".") {
                if MirrorNaming.isTemporary(name) { result.temporaries.append(relative) }
                continue
            }
            var st = stat()
            guard fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                if depth + 1 < maxDepth { subfolders.append(name) }
            case S_IFREG:
                result.seen += 1
                let file = File(path: relative, size: Int64(st.st_size), device: UInt64(st.st_dev), inode: UInt64(st.st_ino),
                                mtime: Int64(st.st_mtim.tv_sec))
                if wanted(file) { result.files.append(file) }
            default:
                continue
            }
        }
        for name in subfolders {
            let child = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard child >= 0 else {
                result.problems.append("\(path.isEmpty ? name : path + "/" + name): \(errnoText(errno))")
                continue
            }
            walk(child, path: path.isEmpty ? name : path + "/" + name, depth: depth + 1, into: &result, wanted: wanted,
                 cancelled: cancelled)
        }
    }
}

/// Files below the folder reached without following a link: opened, looked at, moved.
package struct MirrorPaths: Sendable {
    package let root: String

    package init(root: String) {
        self.root = root
    }

    /// The open folder that holds `path` (below the root) and the file's name in it; nil
    /// when a folder on the way is missing or is not a folder.
    package func parent(of path: String) -> (fd: Int32, name: String)? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard let name = parts.last, parts.allSatisfy(Self.isSafeName) else { return nil }
        var fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        for part in parts.dropLast() {
            let next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            close(fd)
            guard next >= 0 else { return nil }
            fd = next
        }
        return (fd, name)
    }

    /// The identity of the regular file at `path` (not followed); nil when there is none.
    package func identity(of path: String) -> (device: UInt64, inode: UInt64, size: Int64)? {
        guard let (dir, name) = parent(of: path) else { return nil }
        defer { close(dir) }
        var st = stat()
        guard fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        return (UInt64(st.st_dev), UInt64(st.st_ino), Int64(st.st_size))
    }

    /// The MD5 and SHA-256 of the regular file at `path`, read without following a link or
    /// waiting on a FIFO swapped in; nil when it is not a readable regular file.
    package func digest(of path: String, sha256: Bool) -> (md5: MD5Value, sha256: SHA256Value?, size: Int64, device: UInt64, inode: UInt64)? {
        guard let (dir, name) = parent(of: path) else { return nil }
        defer { close(dir) }
        let fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        var md5 = MD5()
        var sha = SHA256()
        // Sized to the file (up to 1 MiB) and not zeroed: a zeroed 1 MiB buffer for each
        // file was 35 % of the CPU of adopting 100,000 small files, and its page faults more.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(min(max(Int64(st.st_size) + 1, 4096), 1 << 20)),
                                                            alignment: 64)
        defer { buffer.deallocate() }
        var total: Int64 = 0
        while true {
            let n = retryingInterrupts { read(fd, buffer.baseAddress, buffer.count) }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            total += Int64(n)
            md5.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            if sha256 { sha.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
        }
        guard let value = MD5Value(bytes: md5.finalize()) else { return nil }
        return (value, sha256 ? SHA256Value(bytes: sha.finalize()) : nil, total, UInt64(st.st_dev), UInt64(st.st_ino))
    }

    /// Removes one of the mirror's own temporary files (nothing else is ever removed).
    package func removeTemporary(_ path: String) {
        guard let (dir, name) = parent(of: path), MirrorNaming.isTemporary(name) else { return }
        defer { close(dir) }
        unlinkat(dir, name, 0)
    }

    /// Moves the file at `path` to `to` (both below the root), creating `to`'s folders
    /// (mode `dirMode`), never replacing anything there. Returns false when something
    /// stands at `to` already; throws why it could not.
    package func move(_ path: String, to: String, dirMode: UInt32, owner: (uid: UInt32, gid: UInt32)?) throws(MoveFailure) -> Bool {
        guard let (from, name) = parent(of: path) else { throw MoveFailure("\(path) is not there any more") }
        defer { close(from) }
        let parts = to.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard let target = parts.last, parts.allSatisfy(Self.isSafeName) else { throw MoveFailure("\(to) is not a safe name") }
        var fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw MoveFailure("\(root): \(errnoText(errno))") }
        defer { close(fd) }
        for part in parts.dropLast() {
            var next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 && errno == ENOENT {
                if mkdirat(fd, part, 0o700) == 0 {
                    let made = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    if made >= 0 {
                        if let owner { _ = fchown(made, owner.uid, owner.gid) }
                        _ = fchmod(made, mode_t(dirMode))
                    }
                    next = made
                } else if errno == EEXIST {
                    next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                }
            }
            guard next >= 0 else { throw MoveFailure("cannot open or create \(part) on the way to \(to): \(errnoText(errno))") }
            close(fd)
            fd = next
        }
        guard RestoreWriter.renameNoReplace(from, name, fd, target) == 0 else {
            if errno == EEXIST { return false }
            throw MoveFailure("cannot move \(path) to \(to): \(errnoText(errno))")
        }
        fsync(fd)
        fsync(from)
        return true
    }

    package struct MoveFailure: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    static func isSafeName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.utf8.contains(0)
    }
}
