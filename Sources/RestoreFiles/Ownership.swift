#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ManifestFormat
import Synchronization

/// How a restore gives owners back, as tar does: run as root, by name when the name
/// exists on this NAS and by number otherwise (`--numeric-owner`: always by number;
/// `--no-owners`: the restoring user keeps ownership); run as anyone else, modes only.
/// setuid, setgid and sticky never go onto files.
package struct OwnerRule: Sendable, Equatable {
    package enum Owners: Sendable, Equatable {
        case byName
        /// `--numeric-owner`
        case numeric
        /// `--no-owners`
        case keep
    }

    package var owners: Owners
    /// Whether the restore may give files away (root).
    package var mayChown: Bool
    /// The restoring process's umask, for files and folders with nothing recorded.
    package var umask: UInt32

    package init(owners: Owners, mayChown: Bool, umask: UInt32) {
        self.owners = owners
        self.mayChown = mayChown
        self.umask = umask
    }

    /// The ids to give `o` to; nil when ownership stays with the restoring user.
    package func ids(_ o: Ownership, user: (String) -> UInt32?, group: (String) -> UInt32?) -> (uid: UInt32, gid: UInt32)? {
        guard mayChown else { return nil }
        switch owners {
        case .keep: return nil
        case .numeric: return (o.uid, o.gid)
        case .byName: return (o.user.flatMap(user) ?? o.uid, o.group.flatMap(group) ?? o.gid)
        }
    }

    /// A file's final mode: its recorded permission bits without setuid, setgid and
    /// sticky; with nothing recorded, what a new file gets (0666 less the umask).
    package func fileMode(_ o: Ownership?) -> UInt32 {
        guard let o else { return 0o666 & ~umask }
        return o.mode & 0o777
    }

    /// A created folder's final mode: setgid and sticky kept (a shared folder's group
    /// inheritance, a drop box), setuid dropped (it means nothing on a folder here).
    package func folderMode(_ o: Ownership) -> UInt32 {
        o.mode & 0o3777
    }

    /// The umask of this process, read without changing it (`umask(2)` can only set it,
    /// and setting it back would race other threads creating files).
    package static func currentUmask() -> UInt32 {
        // /proc files report a size of 0: read to the end, not by the size.
        guard let status = FileHandle(forReadingAtPath: "/proc/self/status")?.readDataToEndOfFile() else { return 0o022 }
        for line in String(decoding: status, as: UTF8.self).split(separator: "\n") where line.hasPrefix("Umask:") {
            if let value = UInt32(line.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) { return value }
        }
        return 0o022
    }
}

/// User and group names looked up on this NAS (NSS), each once per restore.
package final class Identities: Sendable {
    private let users = Mutex<[String: UInt32?]>([:])
    private let groups = Mutex<[String: UInt32?]>([:])

    package init() {}

    package func user(_ name: String) -> UInt32? {
        if let known = users.withLock({ $0[name] }) { return known }
        let found = Self.lookup { buffer, size in
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>?
            let r = getpwnam_r(name, &entry, buffer, size, &result)
            return (r, result == nil ? nil : entry.pw_uid)
        }
        users.withLock { $0[name] = found }
        return found
    }

    package func group(_ name: String) -> UInt32? {
        if let known = groups.withLock({ $0[name] }) { return known }
        let found = Self.lookup { buffer, size in
            var entry = Glibc.group()
            var result: UnsafeMutablePointer<Glibc.group>?
            let r = getgrnam_r(name, &entry, buffer, size, &result)
            return (r, result == nil ? nil : entry.gr_gid)
        }
        groups.withLock { $0[name] = found }
        return found
    }

    /// Calls `body` with a buffer that grows while the entry does not fit (ERANGE).
    private static func lookup(_ body: (UnsafeMutablePointer<CChar>, Int) -> (Int32, UInt32?)) -> UInt32? {
        var size = 4096
        while size <= 1 << 20 {
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
            defer { buffer.deallocate() }
            let (r, id) = body(buffer, size)
            if r == ERANGE {
                size *= 4
                continue
            }
            return r == 0 ? id : nil
        }
        return nil
    }
}
