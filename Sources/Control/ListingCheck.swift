#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization
import PhotolalaCore

/// `PathAccess` for one caller over the real file system, each folder looked at once.
package struct ListingCheck: Sendable {
    package let caller: PathAccess.Caller
    private var folders: [String: PathAccess.Folder?] = [:]
    private var answers: [String: Bool] = [:]

    package init(caller: PathAccess.Caller) {
        self.caller = caller
    }

    /// Whether the caller could list `folder` (false when it does not exist or cannot be looked at).
    package mutating func canList(_ folder: String) -> Bool {
        if let known = answers[folder] { return known }
        let answer: Bool
        if let real = Self.realPath(folder), let chain = chain(real) {
            answer = PathAccess.canList(chain, caller)
        } else {
            answer = false
        }
        answers[folder] = answer
        return answer
    }

    /// Whether the caller may see the name of `path`: it could list the folder holding it.
    package mutating func mayName(_ path: String) -> Bool {
        canList(PathAccess.parent(of: path))
    }

    /// The folders from `/` to `real`, each stat'ed once across calls.
    private mutating func chain(_ real: String) -> [PathAccess.Folder]? {
        var prefixes = ["/"]
        var current = ""
        for part in real.split(separator: "/", omittingEmptySubsequences: true) {
            current += "/" + part
            prefixes.append(current)
        }
        var out: [PathAccess.Folder] = []
        for prefix in prefixes {
            if folders[prefix] == nil { folders[prefix] = Self.look(prefix) }
            guard let folder = folders[prefix] ?? nil else { return nil }
            out.append(folder)
        }
        return out
    }

    static func look(_ path: String) -> PathAccess.Folder? {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { return nil }
        let acl = photolala_has_acl(path) != 0
        return PathAccess.Folder(mode: UInt32(st.st_mode & 0o7777), uid: st.st_uid, gid: st.st_gid, hasACL: acl)
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// A `ListingCheck` for an answer produced while it is sent (a manifest streamed to a
/// member's `restore --dry-run`): one caller, its folders looked at once, from any task.
package final class SharedListingCheck: Sendable {
    private let check: Mutex<ListingCheck>

    package init(caller: PathAccess.Caller) {
        check = Mutex(ListingCheck(caller: caller))
    }

    package func mayName(_ path: String) -> Bool {
        check.withLock { $0.mayName(path) }
    }
}
