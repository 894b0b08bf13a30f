#if canImport(Glibc)
import Glibc
#endif
import Logging
import PhotolalaCore

/// A watched (or deliberately unwatched) directory. Nodes know their name and parent, not
/// their path, so renaming a directory with thousands of descendants is one assignment;
/// paths are built on demand from the parent chain.
final class DirNode {
    var name: String
    weak var parent: DirNode?
    /// Keyed byte for byte: NFC and NFD spellings of one name are two directories.
    var children = ExactKeyed<DirNode>()
    var wd: Int32 = -1
    /// > 0 on the top of a subtree left unwatched by the watch limit: how many directories
    /// it holds (itself included). Those are scanned periodically instead.
    var unwatchedCount = 0
    unowned let root: RootFolder

    init(name: String, parent: DirNode?, root: RootFolder) {
        self.name = name
        self.parent = parent
        self.root = root
    }

    /// Built from the parent chain, so a renamed ancestor is one assignment, not a
    /// rewrite of every path below it.
    var path: String {
        var names: [String] = []
        var current = self
        while let parent = current.parent {
            names.append(current.name)
            current = parent
        }
        var path = current.name
        for name in names.reversed() { path = join(path, name) }
        return path
    }

    /// Still reachable from its folder: events queued for a node that was moved out,
    /// deleted or replaced meanwhile must not be reported under a path it no longer has.
    var isAttached: Bool {
        var current = self
        while let parent = current.parent {
            guard parent.children[current.name] === current else { return false }
            current = parent
        }
        return current.root.node === current
    }

    /// `self` is `node` or one of its ancestors: a directory is never moved below itself.
    func isAncestor(of node: DirNode) -> Bool {
        var current: DirNode? = node
        while let c = current {
            if c === self { return true }
            current = c.parent
        }
        return false
    }

    func detach() {
        if let parent, parent.children[name] === self { parent.children[name] = nil }
        if parent == nil, root.node === self { root.node = nil }
        parent = nil
    }
}

/// A configured folder: its tree while it can be read, the retry schedule while it cannot.
final class RootFolder {
    let path: String
    var node: DirNode?
    var identity: DeviceInode?
    var reportedMissing = false
    var retryAt: ContinuousClock.Instant?
    /// Counts the failed attempts since the folder was last attached.
    var retry: Backoff

    init(path: String, retry: Backoff) {
        self.path = path
        self.retry = retry
    }

    /// The folders to watch, each once: a folder inside another listed one is watched with
    /// it (and said so), an outer folder listed after an inner one replaces it.
    static func distinct(_ folders: [String], logger: Logger) -> [String] {
        var kept: [String] = []
        for folder in folders.map(normalizedPath) where !kept.contains(folder) {
            if let outer = kept.first(where: { PathNames.isInside(folder, $0) }) {
                logger.warning("watch folder \(folder) is inside \(outer), which is already watched recursively; ignoring it")
                continue
            }
            kept.removeAll { PathNames.isInside($0, folder) }
            kept.append(folder)
        }
        return kept
    }

    /// It could not be attached: the next try is scheduled. True the first time (say so).
    func missing() -> Bool {
        let first = !reportedMissing
        if first {
            reportedMissing = true
            retry.reset()
        }
        retryAt = .now + retry.failDuration()
        return first
    }

    /// It is watched: the schedule starts over. True when it had been said missing (say it is back).
    func attached() -> Bool {
        retryAt = nil
        retry.reset()
        defer { reportedMissing = false }
        return reportedMissing
    }

    /// Try now (a mount may have brought it), as the first step of a fresh schedule, so a
    /// failure waits the second step, not the first again.
    func retryNow() {
        retry.reset()
        _ = retry.fail(random: 0)
        retryAt = .now
    }
}

/// Identity of a directory for loop protection.
struct DeviceInode: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}
