#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore
import TOMLKit

/// `[mirror]` (mirror.md "Config"): where the NAS keeps its copy of the account, and the
/// refusals of `--check-config` that need the other sections (`watch.folders`,
/// `daemon.state_dir`), so they run once everything else is read.
extension TableReader {
    static let mirrorKeys: Set<String> = [
        "folder", "include", "on_cloud_delete", "min_free", "download_limit", "thaw_archived", "owner", "file_mode", "dir_mode",
        "check_interval", "list_interval",
    ]

    mutating func readMirrorSection(_ root: TOMLTable, into s: inout Settings) {
        guard let mirror = root["mirror"]?.table else { return }
        if let v = mirror["folder"], let path = string("mirror.folder", v), !path.isEmpty {
            if let why = Self.mirrorFolderShape(path) { problem("mirror.folder", quote(path), why) } else {
                s.mirror.folder = TableReader.normalizeFolder(path)
            }
        }
        if let v = mirror["include"], let word = string("mirror.include", v) {
            if let include = Settings.Mirror.Include(rawValue: word.lowercased()) { s.mirror.include = include } else {
                problem("mirror.include", quote(word), "\"others\" (objects no watched file of this NAS holds) or \"all\" (every object of the account)")
            }
        }
        if let v = mirror["on_cloud_delete"], let word = string("mirror.on_cloud_delete", v) {
            if let rule = Settings.Mirror.OnCloudDelete(rawValue: word.lowercased()) { s.mirror.onCloudDelete = rule } else {
                problem("mirror.on_cloud_delete", quote(word), "\"keep\" or \"trash\" (moved into FOLDER/.trash/; the daemon never deletes a copy)")
            }
        }
        if let v = mirror["min_free"] {
            if let free = Self.freeSpace(v) { s.mirror.minFree = free } else {
                problem("mirror.min_free", render(v), "a size such as \"20GiB\" or a share of the filesystem from 0% to 99% such as \"5%\"")
            }
        }
        if let v = mirror["download_limit"] {
            if let text = v.string, let rate = Units.parseRate(text) { s.mirror.downloadLimit = rate } else {
                problem("mirror.download_limit", render(v), "\"off\" or a size per second such as \"10MiB/s\" (a `0` slot of upload.bandwidth_limit's timetable pauses the mirror too)")
            }
        }
        if let v = mirror["thaw_archived"], let b = bool("mirror.thaw_archived", v) { s.mirror.thawArchived = b }
        if let v = mirror["owner"], let text = string("mirror.owner", v), !text.isEmpty {
            switch Self.owner(text) {
            case .success(let owner): s.mirror.owner = owner
            case .failure(let why): problem("mirror.owner", quote(text), why.text)
            }
        }
        if let v = mirror["file_mode"] {
            if let mode = Self.mode(v), mode & 0o7000 == 0, mode & 0o400 != 0 { s.mirror.fileMode = mode } else {
                problem("mirror.file_mode", render(v), "permission bits as a string of octal digits such as \"0640\", readable by the owner, without setuid, setgid or sticky")
            }
        }
        if let v = mirror["dir_mode"] {
            if let mode = Self.mode(v), mode & 0o4000 == 0, mode & 0o700 == 0o700 { s.mirror.dirMode = mode } else {
                problem("mirror.dir_mode", render(v), "permission bits as a string of octal digits such as \"0750\" or \"2750\", with rwx for the owner, without setuid")
            }
        }
        if let v = mirror["check_interval"], let d = duration("mirror.check_interval", v,
                                                              from: .seconds(10), to: .seconds(7 * 86400), "a duration from 10s to 7d") {
            s.mirror.checkInterval = d
        }
        if let v = mirror["list_interval"], let d = duration("mirror.list_interval", v,
                                                             from: .seconds(60), to: .seconds(30 * 86400), "a duration from 1m to 30d") {
            s.mirror.listInterval = d
        }
    }

    /// After every section: a mirror folder may not be or hold the state directory, nor
    /// hold a watched folder (its files would be uploaded, then copied down again); inside
    /// a watched folder it may be (mirror.md: its files are already in the account).
    mutating func checkMirrorPlace(_ s: Settings) {
        guard let folder = s.mirror.folder else { return }
        let state = s.daemon.stateDir
        if Self.isSameOrInside(folder, state) {
            problem("mirror.folder", quote(folder), "a folder outside daemon.state_dir (\(state)): the state directory holds the sign-in and the queue database")
        } else if Self.isSameOrInside(state, folder) {
            problem("mirror.folder", quote(folder), "a folder that does not hold daemon.state_dir (\(state)): the copies would sit beside the sign-in, readable by whoever may read the photos")
        }
        if let watched = s.watch.folders.first(where: { Self.isSameOrInside($0, folder) }) {
            let same = watched == folder
            problem("mirror.folder", quote(folder), same
                ? "a folder other than the watched folder \(watched) (inside it is fine: its files are already in the account)"
                : "a folder that holds no watched folder (it holds \(watched), whose photos would be backed up and copied down again; a mirror inside a watched folder is fine)")
        }
    }

    /// Why `path` cannot be the mirror's folder by its shape alone; nil when it can.
    static func mirrorFolderShape(_ path: String) -> String? {
        guard path.hasPrefix("/") else { return "an absolute path (starting with /), such as \"/srv/photos/Photolala\" (or \"\" to turn the mirror off)" }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        guard !parts.isEmpty else { return "a folder below / (the mirror writes year folders and .trash/ into it), such as \"/srv/photos/Photolala\"" }
        guard !parts.contains(where: { $0 == "." || $0 == ".." }) else { return "a normalised absolute path, without '.' or '..' parts" }
        return nil
    }

    /// Whether `inner` is `outer` or below it, comparing whole path components.
    static func isSameOrInside(_ inner: String, _ outer: String) -> Bool {
        let a = TableReader.normalizeFolder(inner), b = TableReader.normalizeFolder(outer)
        if a == b || b == "/" { return true }
        return a.hasPrefix(b + "/")
    }

    static func freeSpace(_ v: TOMLValueConvertible) -> Settings.Mirror.FreeSpace? {
        if let n = v.int, n >= 0 { return .bytes(Int64(n)) }
        guard let text = v.string?.trimmingCharacters(in: .whitespaces) else { return nil }
        if text.hasSuffix("%") {
            guard let p = Double(text.dropLast().trimmingCharacters(in: .whitespaces)), p.isFinite, p >= 0, p < 100 else { return nil }
            return .percent(p)
        }
        return Units.parseSize(text).map { .bytes($0) }
    }

    /// "0640", "640", "2750": octal digits in a string (a TOML number would be read in decimal).
    static func mode(_ v: TOMLValueConvertible) -> UInt32? {
        guard let text = v.string, (3...4).contains(text.count), text.allSatisfy({ ("0"..."7").contains($0) }) else { return nil }
        return UInt32(text, radix: 8)
    }

    struct OwnerProblem: Error {
        var text: String
    }

    /// "user:group", "user" (and its own group), ":group" (the group alone), each a name
    /// or a number known to this system.
    static func owner(_ text: String) -> Result<Settings.Mirror.Owner, OwnerProblem> {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let user = parts[0].isEmpty ? nil : parts[0]
        let group = parts.count > 1 && !parts[1].isEmpty ? parts[1] : nil
        guard user != nil || group != nil, !text.contains(where: { $0.isWhitespace }) else {
            return .failure(OwnerProblem(text: "\"user:group\", \"user\" or \":group\" (or \"\" for the daemon's own user)"))
        }
        if let user, UInt32(user) == nil, Self.userExists(user) == false {
            return .failure(OwnerProblem(text: "a user of this system: there is no user \(user) (getent passwd \(user))"))
        }
        if let group, UInt32(group) == nil, Self.groupExists(group) == false {
            return .failure(OwnerProblem(text: "a group of this system: there is no group \(group) (getent group \(group))"))
        }
        return .success(.init(user: user, group: group))
    }

    private static func userExists(_ name: String) -> Bool {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        return getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0 && result != nil
    }

    private static func groupExists(_ name: String) -> Bool {
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16384)
        return getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0 && result != nil
    }
}
