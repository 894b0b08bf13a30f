#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Digests
import Foundation
import ManifestFormat

/// Puts restored files in place with the rights of whoever runs the command. Each file
/// goes to a hidden temporary name in its folder, is checked against the MD5 its object's
/// key names, gets its modification time, is synced, and only then renamed into place:
/// no partial file ever sits at a final path. Below the destination root every folder is
/// opened without following symbolic links, so a link planted in the tree cannot send a
/// file (written as root, perhaps) anywhere else.
package struct RestoreWriter: Sendable {
    package struct Failure: Error, Equatable, CustomStringConvertible {
        package var message: String
        package init(_ message: String) { self.message = message }
        package var description: String { message }
    }

    package let overwrite: Bool

    package init(overwrite: Bool) {
        self.overwrite = overwrite
    }

    /// The open folder an item goes into, and its file name there.
    package final class Parent: Sendable {
        package let fd: Int32
        package let name: [UInt8]
        /// The folder's path, to sync it once at the end.
        package let path: String
        init(fd: Int32, name: [UInt8], path: String) {
            self.fd = fd
            self.name = name
            self.path = path
        }
        deinit { close(fd) }
    }

    /// Opens (creating what is missing) the folders of `item.destination` below `item.root`.
    package func parent(of item: RestoreItem) throws(Failure) -> Parent {
        let components = item.destination.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(Array.init)
        guard let name = components.last, components.allSatisfy(Self.isSafeName) else {
            throw Failure("the manifest names an unsafe path (an empty, '.' or '..' part): not restored")
        }
        do {
            try FileManager.default.createDirectory(atPath: item.root, withIntermediateDirectories: true)
        } catch {
            throw Failure("cannot create \(item.root): \(error.localizedDescription)")
        }
        var fd = open(item.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure("cannot open \(item.root): \(Self.errno())") }
        var path = item.root
        for component in components.dropLast() {
            path += "/" + String(decoding: component, as: UTF8.self)
            var next = Self.openDirectory(fd, component)
            if next < 0 && Glibc.errno == ENOENT {
                _ = Self.withCString(component) { mkdirat(fd, $0, 0o777) }
                next = Self.openDirectory(fd, component)
            }
            let err = Glibc.errno
            close(fd)
            guard next >= 0 else {
                throw Failure(err == ELOOP || err == ENOTDIR
                    ? "\(path) is a symbolic link or a file where a folder should be: not restored"
                    : "cannot open or create the folder \(path): \(String(cString: strerror(err)))")
            }
            fd = next
        }
        return Parent(fd: fd, name: name, path: path)
    }

    /// What stands at the name now (links not followed).
    package func existing(in parent: Parent) -> ConflictRule.Existing {
        var st = stat()
        let r = Self.withCString(parent.name) { fstatat(parent.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }
        guard r == 0 else { return .nothing }
        switch st.st_mode & S_IFMT {
        case S_IFREG: return .file(size: Int64(st.st_size))
        case S_IFDIR: return .folder
        case S_IFLNK: return .link
        default: return .other
        }
    }

    /// Whether the file at the name holds exactly these bytes.
    package func holds(_ version: FileVersion, in parent: Parent) -> Bool {
        let fd = Self.withCString(parent.name) { openat(parent.fd, $0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var md5 = MD5()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var total: Int64 = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && Glibc.errno == EINTR { continue }
            guard n >= 0 else { return false }
            if n == 0 { break }
            total += Int64(n)
            buffer.withUnsafeBytes { md5.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return total == version.size && MD5Value(bytes: md5.finalize()) == version.md5
    }

    /// A hidden temporary file next to the destination, for its bytes.
    package func incoming(in parent: Parent) throws(Failure) -> IncomingFile {
        let temp = Self.temporaryName(for: parent.name)
        let fd = Self.withCString(temp) { openat(parent.fd, $0, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o666) }
        guard fd >= 0 else { throw Failure("cannot create a temporary file in \(parent.path): \(Self.errno())") }
        return IncomingFile(parent: parent, temp: temp, fd: fd)
    }

    /// `.plrestore-<16 hex of the name's SHA-256>.tmp`: hidden (the watcher skips it), short
    /// whatever the name's length, the same on every run (a re-run reuses it).
    static func temporaryName(for name: [UInt8]) -> [UInt8] {
        Array(".plrestore-".utf8) + Array(Hex.string(Array(SHA256.digest(name).prefix(8))).utf8) + Array(".tmp".utf8)
    }

    static func isSafeName(_ c: [UInt8]) -> Bool {
        !c.isEmpty && c != [0x2e] && c != [0x2e, 0x2e] && !c.contains(0) && c.count <= 255
    }

    static func openDirectory(_ dir: Int32, _ name: [UInt8]) -> Int32 {
        withCString(name) { openat(dir, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
    }

    static func withCString<T>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        (bytes + [0]).withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    static func errno() -> String { String(cString: strerror(Glibc.errno)) }

    /// Syncs folders whose entries changed, so the renames survive a power cut.
    package static func syncFolder(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}

extension RestoreWriter {
    /// For a dry run: what a restore would do at the item's destination, touching nothing
    /// (a same-size file is read to compare).
    package static func inspect(_ item: RestoreItem, overwrite: Bool) -> ConflictRule.Decision {
        let path = Array(item.root.utf8) + [UInt8(ascii: "/")] + item.destination
        var st = stat()
        let existing: ConflictRule.Existing
        if withCString(path, { lstat($0, &st) }) != 0 {
            existing = .nothing
        } else {
            switch st.st_mode & S_IFMT {
            case S_IFREG: existing = .file(size: Int64(st.st_size))
            case S_IFDIR: existing = .folder
            case S_IFLNK: existing = .link
            default: existing = .other
            }
        }
        let decision = ConflictRule.decide(existing, size: item.version.size, overwrite: overwrite)
        guard decision == .compare else { return decision }
        let fd = withCString(path) { open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return .write }
        defer { close(fd) }
        var md5 = MD5()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var total: Int64 = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && Glibc.errno == EINTR { continue }
            guard n > 0 else { break }
            total += Int64(n)
            buffer.withUnsafeBytes { md5.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        let same = total == item.version.size && MD5Value(bytes: md5.finalize()) == item.version.md5
        return ConflictRule.compared(sameBytes: same, overwrite: overwrite)
    }
}
