#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

/// What stands at a path now, as the watcher needs to know it: an event names a path that
/// may have been renamed or replaced since, a directory entry's type may be unknown (some
/// filesystems say DT_UNKNOWN) or a link, followed only when `watch.follow_symlinks` says so.
struct DirectoryProbe {
    let followSymlinks: Bool
    let filter: PathFilter

    /// `S_IFDIR`, `S_IFREG`, …; nil when nothing is there.
    static func fileType(_ path: String, follow: Bool) -> mode_t? {
        var st = stat()
        let rc = follow ? stat(path, &st) : lstat(path, &st)
        return rc == 0 ? st.st_mode & S_IFMT : nil
    }

    /// Whether a directory entry of `type` at `path` is a directory to watch.
    func isDirectory(_ path: String, type: UInt8) -> Bool {
        switch Int(type) {
        case Int(DT_DIR): return true
        case Int(DT_LNK): return followSymlinks && Self.fileType(path, follow: true) == S_IFDIR
        case Int(DT_UNKNOWN):
            let kind = Self.fileType(path, follow: false)
            return kind == S_IFDIR || (kind == S_IFLNK && followSymlinks && Self.fileType(path, follow: true) == S_IFDIR)
        default: return false
        }
    }

    /// Whether an entry of `type` may be a directory, before its name is even decoded
    /// (files are the scanner's business).
    func mayBeDirectory(_ type: UInt8) -> Bool {
        type == DT_DIR || type == DT_UNKNOWN || (type == DT_LNK && followSymlinks)
    }

    /// A directory known at `existing` no longer is the one now found at `path`.
    static func isStale(_ existing: String, replacedBy path: String) -> Bool {
        var now = stat(), old = stat()
        guard stat(path, &now) == 0 else { return false }
        guard stat(existing, &old) == 0 else { return true }
        return DeviceInode(now) != DeviceInode(old)
    }

    /// How many directories a subtree holds (for the status and the log line), each counted
    /// once however many links reach it.
    func countDirectories(_ start: String, stopping: () -> Bool) -> Int {
        var visited = Set<DeviceInode>()
        var stack = [start]
        var count = 0
        while let path = stack.popLast(), !stopping() {
            var st = stat()
            guard stat(path, &st) == 0, visited.insert(DeviceInode(st)).inserted else { continue }
            count += 1
            _ = DirectoryEntries.forEach(path: path) { cName, type in
                guard mayBeDirectory(type) else { return }
                guard let name = PathFilter.name(fromCString: cName), filter.accepts(directoryName: name) else { return }
                let child = join(path, name)
                if isDirectory(child, type: type) { stack.append(child) }
            }
        }
        return count
    }
}

/// Names that are not valid UTF-8: such a file cannot be stored or uploaded faithfully,
/// so it is skipped and the user told, once per name (a flood is not remembered one by
/// one) and in the log for the first twenty only.
struct InvalidNames {
    private var reported = Set<String>()
    private var logged = 0

    /// Whether `shown` (the path with its name made readable) is new, and the log line to
    /// write for it if any.
    mutating func report(_ shown: String) -> (new: Bool, logLine: String?) {
        // One file raises CREATE and CLOSE_WRITE: say it once.
        guard reported.count < 10_000, reported.insert(shown).inserted else { return (false, nil) }
        logged += 1
        if logged <= 20 {
            return (true, "skipping \"\(shown)\": its name is not valid UTF-8 and cannot be stored or uploaded faithfully; rename it to back it up")
        }
        return (true, logged == 21 ? "more names that are not valid UTF-8 are skipped; scans list them" : nil)
    }
}
