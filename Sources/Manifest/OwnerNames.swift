#if canImport(Glibc)
import Glibc
#endif
import ManifestFormat
import PhotolalaCore

/// The user and group names of owners, looked up on this NAS (NSS) when the manifest
/// records them, each id once: a burst of a folder's photos asks once, not per photo. The
/// names go into the manifest beside the ids so a restore on another NAS can give files
/// to the same people by name (privacy.md "Owners and modes").
struct OwnerNames {
    private var users: [UInt32: String?] = [:]
    private var groups: [UInt32: String?] = [:]
    /// Names change rarely; a bounded cache keeps a NAS with thousands of ids small.
    private let capacity = 4096

    mutating func ownership(_ o: FileOwner) -> Ownership {
        Ownership(uid: o.uid, gid: o.gid, user: user(o.uid), group: group(o.gid), mode: o.mode)
    }

    mutating func user(_ uid: UInt32) -> String? {
        if let known = users[uid] { return known }
        let name = Self.lookup { buffer, size in
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>?
            let r = getpwuid_r(uid, &entry, buffer, size, &result)
            return (r, result == nil ? nil : entry.pw_name.map { String(cString: $0) })
        }
        if users.count >= capacity { users.removeAll() }
        users[uid] = name
        return name
    }

    mutating func group(_ gid: UInt32) -> String? {
        if let known = groups[gid] { return known }
        let name = Self.lookup { buffer, size in
            var entry = Glibc.group()
            var result: UnsafeMutablePointer<Glibc.group>?
            let r = getgrgid_r(gid, &entry, buffer, size, &result)
            return (r, result == nil ? nil : entry.gr_name.map { String(cString: $0) })
        }
        if groups.count >= capacity { groups.removeAll() }
        groups[gid] = name
        return name
    }

    /// Calls `body` with a buffer that grows while the entry does not fit (ERANGE).
    private static func lookup(_ body: (UnsafeMutablePointer<CChar>, Int) -> (Int32, String?)) -> String? {
        var size = 4096
        while size <= 1 << 20 {
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
            defer { buffer.deallocate() }
            let (r, name) = body(buffer, size)
            if r == ERANGE {
                size *= 4
                continue
            }
            return r == 0 ? name : nil
        }
        return nil
    }
}

/// A folder's owner, mode and modification time as `stat` gives them (links followed: a
/// watched tree reached through links comes back as real folders); nil when it cannot be
/// looked at (gone meanwhile).
enum FolderStat {
    static func of(_ path: String) -> (owner: FileOwner, mtime: FileTime)? {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { return nil }
        return (FileOwner(uid: st.st_uid, gid: st.st_gid, mode: UInt32(st.st_mode)),
                FileTime(sec: Int64(st.st_mtim.tv_sec), nsec: Int64(st.st_mtim.tv_nsec)))
    }
}
