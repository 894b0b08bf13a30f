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
}

final class RootFolder {
    let path: String
    var node: DirNode?
    var identity: DeviceInode?
    var reportedMissing = false
    var retryAt: ContinuousClock.Instant?
    var retryDelay: Duration

    init(path: String, retryDelay: Duration) {
        self.path = path
        self.retryDelay = retryDelay
    }
}

/// The watcher thread's state machine: owns the inotify descriptor and the wd ↔ directory
/// table, turns kernel events into `WatchEvent`s, and runs the retry timers. Never touched
/// from another thread.
final class WatchTree {
    private let options: WatcherOptions
    private let filter: PathFilter
    private let logger: Logger
    private let shared: WatcherShared
    private let output: (WatchEvent) -> Void

    private var fd: Int32 = -1
    private var mountsFd: Int32 = -1
    private var roots: [RootFolder] = []
    private var byWd: [Int32: DirNode] = [:]
    private var unwatchedTops: [ObjectIdentifier: DirNode] = [:]

    private struct PendingMove {
        var cookie: UInt32
        var parent: DirNode
        var name: String
        var isDirectory: Bool
        var deadline: ContinuousClock.Instant
    }
    private var pendingMoves: [PendingMove] = []
    /// Directories whose watch the kernel dropped (IN_IGNORED) without us asking: checked
    /// after the batch, when the parent's DELETE (if any) has been seen.
    private var lostWatches: [DirNode] = []
    private var overflowed = false

    /// Set once an add hit the limit during the current pass: the rest of the pass does not
    /// try again, it only records what stays unwatched.
    private var limitHitInPass = false
    private var limitEpisode = false
    private var limitLogged = false
    private var instanceErrorLogged = false
    private var maxUserWatches: Int?
    private var unwatchedRescanAt: ContinuousClock.Instant?
    private var unwatchedRescanDelay: Duration

    private var invalidNamesLogged = 0
    private var invalidNamesReported = Set<String>()
    private var deniedLogged = Set<String>()
    private var lastStatus: WatcherStatus?
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)

    init(options: WatcherOptions, logger: Logger, shared: WatcherShared, emit: @escaping (WatchEvent) -> Void) {
        self.options = options
        self.filter = PathFilter(options: options)
        self.logger = logger
        self.shared = shared
        self.output = emit
        self.unwatchedRescanDelay = options.unwatchedRescan.initial
        var seen: [String] = []
        for folder in options.folders.map(normalizedPath) {
            if seen.contains(folder) { continue }
            if let outer = seen.first(where: { PathNames.isInside(folder, $0) }) {
                logger.warning("watch folder \(folder) is inside \(outer), which is already watched recursively; ignoring it")
                continue
            }
            // An outer folder listed after an inner one replaces it.
            seen.removeAll { PathNames.isInside($0, folder) }
            seen.append(folder)
        }
        roots = seen.map { RootFolder(path: $0, retryDelay: options.missingFolderRetry.initial) }
    }

    deinit {
        buffer.deallocate()
        if fd >= 0 { close(fd) }
        if mountsFd >= 0 { close(mountsFd) }
    }

    // MARK: - The loop

    func run(wakeFd: Int32) {
        maxUserWatches = Self.readProcInt("/proc/sys/fs/inotify/max_user_watches")
        openInotify()
        // Pollable: a mount or unmount anywhere raises POLLPRI, so a folder on a volume that
        // is mounted later is picked up at once instead of at the next retry.
        mountsFd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)
        for root in roots where !shared.stopping { attach(root, reason: .initial) }
        afterPass()
        publish()

        var fds = [pollfd](repeating: pollfd(), count: 3)
        while !shared.stopping {
            let paused = shared.state.withLock { state in
                state.readingPausedApplied = state.readingPaused
                return state.readingPaused
            }
            fds[0] = pollfd(fd: wakeFd, events: Int16(POLLIN), revents: 0)
            fds[1] = pollfd(fd: paused ? -1 : fd, events: Int16(POLLIN), revents: 0)
            fds[2] = pollfd(fd: mountsFd, events: Int16(POLLPRI), revents: 0)
            let n = poll(&fds, nfds_t(fds.count), pollTimeout())
            if n < 0 {
                let err = errno
                if err == EINTR { continue }
                logger.error("watcher: poll failed: \(errnoText(err)); retrying in 1s")
                usleep(1_000_000)
                continue
            }
            if fds[0].revents != 0 { drain(wakeFd) }
            if shared.stopping { break }
            if shared.state.withLock({ state in defer { state.rewatchRequested = false }; return state.rewatchRequested }) {
                rewatchAll()
            }
            if fds[1].revents != 0 { readEvents() }
            if fds[2].revents != 0 { mountsChanged() }
            fireTimers()
            publish()
        }
        if fd >= 0 {
            close(fd)
            fd = -1
        }
    }

    /// A full rescan was asked for (`photolalactl rescan`): every directory is listed again
    /// and those without a watch (unreadable before, say) are tried again, so "skipped
    /// until the next full scan" holds for the watches as well as for the files.
    private func rewatchAll() {
        deniedLogged.removeAll()
        for root in roots where !shared.stopping {
            guard let node = root.node else { continue }
            limitHitInPass = false
            watchSubtree(node, path: root.path)
        }
        afterPass()
    }

    private func pollTimeout() -> Int32 {
        var next: ContinuousClock.Instant?
        func consider(_ instant: ContinuousClock.Instant?) {
            guard let instant else { return }
            next = next.map { min($0, instant) } ?? instant
        }
        for root in roots { consider(root.retryAt) }
        consider(unwatchedRescanAt)
        for move in pendingMoves { consider(move.deadline) }
        guard let next else { return -1 }
        let remaining = next - .now
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1
        return Int32(clamping: ms)
    }

    private func drain(_ fd: Int32) {
        var bytes = [UInt8](repeating: 0, count: 64)
        while read(fd, &bytes, bytes.count) > 0 {}
    }

    private func fireTimers() {
        let now = ContinuousClock.now
        finalizeMoves(expiredBy: now)
        for root in roots where root.node == nil {
            guard let at = root.retryAt, at <= now, !shared.stopping else { continue }
            attach(root, reason: .folderAvailable)
        }
        if let at = unwatchedRescanAt, at <= now { rescanUnwatched() }
        afterPass()
    }

    /// Status first, then the event: whoever reacts to an event finds `snapshot()` current.
    /// (Skipped for file events, the flood case, where the status does not change.)
    private func emit(_ event: WatchEvent) {
        switch event {
        case .fileWritten, .fileMoved: break
        default: publish()
        }
        output(event)
    }

    private func publish() {
        var status = WatcherStatus()
        status.folders = roots.count
        status.directories = byWd.count
        status.missingFolders = roots.filter { $0.node == nil }.map(\.path)
        status.watchLimitReached = !unwatchedTops.isEmpty
        status.maxUserWatches = maxUserWatches
        status.unwatchedDirectories = unwatchedTops.values.reduce(0) { $0 + $1.unwatchedCount }
        guard status != lastStatus else { return }
        lastStatus = status
        shared.state.withLock { $0.status = status }
    }

    // MARK: - inotify

    private func openInotify() {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd < 0 else { return }
        let err = errno
        guard !instanceErrorLogged else { return }
        instanceErrorLogged = true
        let limit = Self.readProcInt("/proc/sys/fs/inotify/max_user_instances").map(String.init) ?? "unknown"
        logger.warning("""
            cannot create an inotify instance (\(errnoText(err)); fs.inotify.max_user_instances = \(limit)): \
            all folders are scanned every \(Self.human(options.unwatchedRescan.initial)) instead of watched. \
            Raise it: sysctl -w fs.inotify.max_user_instances=1024 (and persist in /etc/sysctl.d/)
            """)
    }

    private enum AddResult {
        case watched(Int32)
        case duplicate(DirNode)
        case limit
        case failed(Int32)
    }

    private func addWatch(_ path: String, for node: DirNode) -> AddResult {
        guard fd >= 0 else { return .limit }
        if let budget = shared.state.withLock({ $0.watchBudget }), byWd.count >= budget { return .limit }
        // IN_ATTRIB: a subdirectory that could not be watched (no permission) is tried again
        // when its mode changes, so a folder made readable is watched without a rescan.
        var mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ATTRIB)
        mask |= UInt32(IN_DELETE_SELF | IN_MOVE_SELF) | UInt32(IN_ONLYDIR) | UInt32(IN_EXCL_UNLINK)
        // A configured folder is followed like `find -H`; links inside only when asked.
        if node.parent != nil && !options.followSymlinks { mask |= UInt32(IN_DONT_FOLLOW) }
        let wd = inotify_add_watch(fd, path, mask)
        if wd < 0 {
            let err = errno
            return err == ENOSPC || err == ENOMEM ? .limit : .failed(err)
        }
        // inotify gives one watch per inode: the same wd means the same directory.
        if let existing = byWd[wd], existing !== node { return .duplicate(existing) }
        return .watched(wd)
    }

    private func readEvents() {
        guard fd >= 0, let base = buffer.baseAddress else { return }
        // Bounded, so a never-ending flood still lets timers, status and stop through.
        for _ in 0..<64 where !shared.stopping {
            let n = read(fd, base, buffer.count)
            if n < 0 {
                let err = errno
                if err == EINTR { continue }
                if err != EAGAIN { logger.error("watcher: reading inotify failed: \(errnoText(err))") }
                break
            }
            if n == 0 { break }
            var offset = 0
            while offset + 16 <= n {
                let wd = base.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = base.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let cookie = base.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
                let length = Int(base.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                var name: String?
                var invalidName = false
                if length > 0, offset + 16 + length <= n {
                    let cName = (base + offset + 16).assumingMemoryBound(to: CChar.self)
                    // The kernel pads names with NULs; one without any is malformed.
                    if strnlen(cName, length) < length {
                        name = PathFilter.name(fromCString: cName)
                        if name == nil {
                            invalidName = true
                            if let parent = byWd[wd] {
                                let dir = path(of: parent)
                                if reportInvalidName(cName, in: dir) { emit(.scanNeeded(dir, .invalidName)) }
                            }
                        }
                    } else {
                        invalidName = true
                    }
                }
                offset += 16 + length
                if invalidName { continue }
                handle(wd: wd, mask: mask, cookie: cookie, name: name)
            }
        }
        if overflowed {
            overflowed = false
            recoverFromOverflow()
        }
        checkLostWatches()
        afterPass()
    }

    private func handle(wd: Int32, mask: UInt32, cookie: UInt32, name: String?) {
        if mask & UInt32(IN_Q_OVERFLOW) != 0 {
            overflowed = true
            return
        }
        if mask & UInt32(IN_IGNORED) != 0 {
            watchDropped(wd)
            return
        }
        guard let node = byWd[wd] else { return }
        guard let name else {
            // Events about the watched directory itself. Only a folder's own matter here:
            // for the others, the parent's DELETE/MOVED_* say where they went.
            if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0, node.parent == nil, node.root.node === node {
                let root = node.root
                logger.warning("watch folder \(root.path) was \(mask & UInt32(IN_MOVE_SELF) != 0 ? "moved away" : "deleted")")
                rootLost(root)
            }
            return
        }
        let isDirectory = mask & UInt32(IN_ISDIR) != 0
        if mask & UInt32(IN_MOVED_TO) != 0, let index = pendingMoves.firstIndex(where: { $0.cookie == cookie }) {
            let from = pendingMoves.remove(at: index)
            pairedMove(from: from, toParent: node, toName: name, isDirectory: isDirectory)
            return
        }
        // A name reused after it was moved away: the move must be reported first.
        if !pendingMoves.isEmpty {
            let stale = pendingMoves.filter { $0.parent === node && $0.name == name }
            if !stale.isEmpty {
                pendingMoves.removeAll { $0.parent === node && $0.name == name }
                stale.forEach(unpairedMoveFrom)
            }
        }
        let path = join(self.path(of: node), name)
        if mask & UInt32(IN_MOVED_FROM) != 0 {
            pendingMoves.append(PendingMove(cookie: cookie, parent: node, name: name, isDirectory: isDirectory,
                                            deadline: .now + options.movePairingWindow))
        } else if mask & UInt32(IN_CLOSE_WRITE) != 0 {
            // Only a type seen to be other than a regular file is dropped: by the time this
            // event is read, its directory may have been renamed (the path no longer
            // resolves) and the aggregator carries the file to its new name.
            if filter.accepts(fileName: name), (Self.fileType(path, follow: false) ?? S_IFREG) == S_IFREG { emit(.fileWritten(path)) }
        } else if mask & UInt32(IN_CREATE) != 0 {
            arrived(parent: node, name: name, path: path, isDirectory: isDirectory, created: true)
        } else if mask & UInt32(IN_MOVED_TO) != 0 {
            arrived(parent: node, name: name, path: path, isDirectory: isDirectory, created: false)
        } else if mask & UInt32(IN_ATTRIB) != 0 {
            // Only a directory we hold no watch for matters (chmod/chown made it readable).
            if isDirectory, node.children[name].map({ $0.wd < 0 && $0.unwatchedCount == 0 }) ?? true {
                addDirectory(parent: node, name: name, path: path)
            }
        } else if mask & UInt32(IN_DELETE) != 0 {
            if isDirectory {
                if let child = node.children[name] { forget(child, removeWatches: false) }
                if filter.accepts(directoryName: name) { emit(.removed(path)) }
            } else {
                removedNonDirectory(parent: node, name: name, path: path)
            }
        }
    }

    /// A file, or a link (possibly one we followed into a directory), is gone from `path`.
    private func removedNonDirectory(parent: DirNode, name: String, path: String) {
        if let child = parent.children[name] {
            // A followed link: its target still exists elsewhere and keeps its watches.
            forget(child, removeWatches: true)
            if filter.accepts(directoryName: name) { emit(.removed(path)) }
        } else if filter.accepts(fileName: name) {
            emit(.removed(path))
        }
    }

    /// Something new at `path`: created, or moved in from outside the tree.
    private func arrived(parent: DirNode, name: String, path: String, isDirectory: Bool, created: Bool) {
        if isDirectory {
            addDirectory(parent: parent, name: name, path: path)
            return
        }
        let acceptedAsFile = filter.accepts(fileName: name)
        guard acceptedAsFile || (options.followSymlinks && filter.accepts(directoryName: name)) else { return }
        var st = stat()
        guard lstat(path, &st) == 0 else {
            // Moved in and already gone from this path (its directory renamed since): the
            // settle step looks at it under wherever the rename put it.
            if !created && acceptedAsFile { emit(.fileWritten(path)) }
            return
        }
        switch st.st_mode & S_IFMT {
        case S_IFREG:
            // A plain create is followed by CLOSE_WRITE; a hard link (nlink > 1) is not.
            if acceptedAsFile && (!created || st.st_nlink > 1) { emit(.fileWritten(path)) }
        case S_IFLNK where options.followSymlinks:
            var target = stat()
            guard stat(path, &target) == 0 else { return }
            if (target.st_mode & S_IFMT) == S_IFDIR {
                addDirectory(parent: parent, name: name, path: path)
            } else if (target.st_mode & S_IFMT) == S_IFREG, acceptedAsFile {
                emit(.fileWritten(path))
            }
        default:
            break // FIFOs, sockets, devices, and links when not following
        }
    }

    private func addDirectory(parent: DirNode, name: String, path: String) {
        guard filter.accepts(directoryName: name) else { return }
        if let existing = parent.children[name], existing.wd >= 0 || existing.unwatchedCount > 0 { return }
        let child = parent.children[name] ?? DirNode(name: name, parent: parent, root: parent.root)
        parent.children[name] = child
        limitHitInPass = false
        watchSubtree(child, path: path)
        if isAttached(child) { emit(.scanNeeded(path, .newDirectory)) }
    }

    // MARK: - Moves

    private func pairedMove(from move: PendingMove, toParent: DirNode, toName: String, isDirectory: Bool) {
        let fromAttached = isAttached(move.parent)
        let fromPath = join(path(of: move.parent), move.name)
        let toPath = join(path(of: toParent), toName)
        // A directory, or a followed link to one (a node we hold under the old name).
        if let source = fromAttached ? move.parent.children[move.name] : nil {
            let stillADirectory = isDirectory || (options.followSymlinks && Self.fileType(toPath, follow: true) == S_IFDIR)
            if stillADirectory, filter.accepts(directoryName: toName), source !== toParent, !isAncestor(source, of: toParent) {
                reparent(source, to: toParent, name: toName, from: fromPath, to: toPath)
            } else {
                // Renamed to an excluded name (or no longer a directory): it left the tree.
                forget(source, removeWatches: true)
                if filter.accepts(directoryName: move.name) { emit(.removed(fromPath)) }
                if stillADirectory { addDirectory(parent: toParent, name: toName, path: toPath) }
            }
            return
        }
        if isDirectory {
            // Unknown under its old name (excluded, or not yet watched): new here.
            if filter.accepts(directoryName: move.name) { emit(.removed(fromPath)) }
            addDirectory(parent: toParent, name: toName, path: toPath)
            return
        }
        let fromAccepted = filter.accepts(fileName: move.name)
        let toAccepted = filter.accepts(fileName: toName)
        let type = Self.fileType(toPath, follow: options.followSymlinks)
        if toAccepted && type == S_IFREG {
            emit(fromAccepted ? .fileMoved(from: fromPath, to: toPath) : .fileWritten(toPath))
        } else if fromAccepted {
            emit(.removed(fromPath))
        }
        if options.followSymlinks, type == S_IFDIR {
            addDirectory(parent: toParent, name: toName, path: toPath)
        }
    }

    /// A paired rename of a directory we hold: one assignment moves the whole subtree,
    /// and every later event below it already carries the new path.
    private func reparent(_ source: DirNode, to parent: DirNode, name: String, from fromPath: String, to toPath: String) {
        if let replaced = parent.children[name], replaced !== source {
            // rename(2) over an empty directory.
            forget(replaced, removeWatches: false)
            emit(.removed(toPath))
        }
        if let old = source.parent, old.children[source.name] === source { old.children[source.name] = nil }
        source.name = name
        source.parent = parent
        parent.children[name] = source
        emit(.directoryMoved(from: fromPath, to: toPath))
    }

    private func finalizeMoves(expiredBy now: ContinuousClock.Instant) {
        guard !pendingMoves.isEmpty else { return }
        let expired = pendingMoves.filter { $0.deadline <= now }
        pendingMoves.removeAll { $0.deadline <= now }
        expired.forEach(unpairedMoveFrom)
    }

    /// A MOVED_FROM whose MOVED_TO never came: it left the watched tree.
    private func unpairedMoveFrom(_ move: PendingMove) {
        guard isAttached(move.parent) else { return }
        let path = join(self.path(of: move.parent), move.name)
        if move.isDirectory {
            // The kernel keeps watching a moved inode wherever it went: drop those watches.
            if let child = move.parent.children[move.name] { forget(child, removeWatches: true) }
            if filter.accepts(directoryName: move.name) { emit(.removed(path)) }
        } else {
            removedNonDirectory(parent: move.parent, name: move.name, path: path)
        }
    }

    // MARK: - Walking

    /// Gives `start` (attached) and everything below it a watch, re-listing directories
    /// that already have one: children found on disk are added, children gone are
    /// forgotten. Used for new directories, folders, overflow recovery and retries.
    private func watchSubtree(_ start: DirNode, path startPath: String) {
        var stack: [(node: DirNode, path: String)] = [(start, startPath)]
        while let (node, path) = stack.popLast().map({ ($0.node, $0.path) }) {
            if shared.stopping { return }
            if node.wd < 0 && node.unwatchedCount == 0 {
                if limitHitInPass {
                    markUnwatched(node, path: path)
                    continue
                }
                switch addWatch(path, for: node) {
                case .watched(let wd):
                    node.wd = wd
                    byWd[wd] = node
                case .limit:
                    limitHitInPass = true
                    markUnwatched(node, path: path)
                    continue
                case .duplicate(let existing):
                    if let parent = node.parent, existing.parent != nil, !isAncestor(existing, of: parent),
                       isStale(existing, replacedBy: path) {
                        // A rename whose events were lost (overflow): the watch followed the
                        // inode, so move the node instead of watching it twice.
                        detach(node)
                        reparent(existing, to: parent, name: node.name, from: self.path(of: existing), to: path)
                        stack.append((existing, path))
                    } else {
                        // The same directory reached twice (a followed link, a bind mount):
                        // reported under the first path only, and never a loop.
                        detach(node)
                    }
                    continue
                case .failed(let err):
                    if err != ENOENT && err != ENOTDIR && deniedLogged.insert(path).inserted {
                        logger.warning("cannot watch \(path): \(errnoText(err)); it is skipped until the next full scan")
                    }
                    detach(node)
                    continue
                }
            }
            if node.unwatchedCount > 0 { continue }
            var seen = Set<ExactPath>()
            var newChildren: [(DirNode, String)] = []
            let err = DirectoryEntries.forEach(path: path) { cName, type in
                // Files are the scanner's business; only what may be a directory is decoded.
                guard type == DT_DIR || type == DT_UNKNOWN || (type == DT_LNK && options.followSymlinks) else { return }
                guard let name = PathFilter.name(fromCString: cName) else {
                    reportInvalidName(cName, in: path)
                    return
                }
                let childPath = join(path, name)
                guard isDirectory(childPath, type: type), filter.accepts(directoryName: name) else { return }
                seen.insert(ExactPath(name))
                if let child = node.children[name] {
                    newChildren.append((child, childPath))
                } else {
                    let child = DirNode(name: name, parent: node, root: node.root)
                    node.children[name] = child
                    newChildren.append((child, childPath))
                }
            }
            if err == 0 {
                for (name, child) in node.children.pairs where !seen.contains(ExactPath(name)) { forget(child, removeWatches: true) }
            } else if err != ENOENT && deniedLogged.insert(path).inserted {
                logger.warning("cannot list \(path): \(errnoText(err)); its subdirectories are not watched")
            }
            stack.append(contentsOf: newChildren.reversed())
        }
    }

    private func isDirectory(_ path: String, type: UInt8) -> Bool {
        switch Int(type) {
        case Int(DT_DIR): return true
        case Int(DT_LNK): return options.followSymlinks && Self.fileType(path, follow: true) == S_IFDIR
        case Int(DT_UNKNOWN):
            let kind = Self.fileType(path, follow: false)
            return kind == S_IFDIR || (kind == S_IFLNK && options.followSymlinks && Self.fileType(path, follow: true) == S_IFDIR)
        default: return false
        }
    }

    /// `existing` no longer names the directory now found at `path`.
    private func isStale(_ existing: DirNode, replacedBy path: String) -> Bool {
        var now = stat(), old = stat()
        guard stat(path, &now) == 0 else { return false }
        guard stat(self.path(of: existing), &old) == 0 else { return true }
        return DeviceInode(now) != DeviceInode(old)
    }

    private func markUnwatched(_ node: DirNode, path: String, knownCount: Int? = nil) {
        for child in node.children.values { forget(child, removeWatches: true) }
        node.unwatchedCount = max(1, knownCount ?? countDirectories(path))
        unwatchedTops[ObjectIdentifier(node)] = node
    }

    /// How many directories a subtree holds (for the status and the log line).
    private func countDirectories(_ start: String) -> Int {
        var visited = Set<DeviceInode>()
        var stack = [start]
        var count = 0
        while let path = stack.popLast(), !shared.stopping {
            var st = stat()
            guard stat(path, &st) == 0, visited.insert(DeviceInode(st)).inserted else { continue }
            count += 1
            _ = DirectoryEntries.forEach(path: path) { cName, type in
                guard type == DT_DIR || type == DT_UNKNOWN || (type == DT_LNK && options.followSymlinks) else { return }
                guard let name = PathFilter.name(fromCString: cName), filter.accepts(directoryName: name) else { return }
                let child = join(path, name)
                if isDirectory(child, type: type) { stack.append(child) }
            }
        }
        return count
    }

    // MARK: - Folders

    private func attach(_ root: RootFolder, reason: ScanReason) {
        var st = stat()
        var err: Int32 = 0
        if stat(root.path, &st) != 0 {
            err = errno
        } else if (st.st_mode & S_IFMT) != S_IFDIR {
            err = ENOTDIR
        } else if access(root.path, R_OK | X_OK) != 0 {
            err = errno
        }
        guard err == 0 else { return markMissing(root, err) }
        let node = DirNode(name: root.path, parent: nil, root: root)
        root.node = node
        root.identity = DeviceInode(st)
        limitHitInPass = false
        watchSubtree(node, path: root.path)
        guard root.node != nil else { return markMissing(root, EACCES) }
        root.retryAt = nil
        root.retryDelay = options.missingFolderRetry.initial
        if root.reportedMissing {
            root.reportedMissing = false
            logger.notice("watch folder \(root.path) is available again")
            emit(.folderAvailable(root.path))
        }
        emit(.scanNeeded(root.path, reason))
    }

    private func markMissing(_ root: RootFolder, _ err: Int32) {
        if !root.reportedMissing {
            root.reportedMissing = true
            logger.warning("watch folder \(root.path) is missing or unreadable (\(errnoText(err))); retrying with backoff (is its volume mounted?)")
            emit(.folderMissing(root.path))
            root.retryDelay = options.missingFolderRetry.initial
        } else {
            root.retryDelay = options.missingFolderRetry.after(root.retryDelay)
        }
        root.retryAt = .now + root.retryDelay
    }

    /// The folder's directory is gone, moved, or now a different one (remounted): drop its
    /// watches and look again at once.
    private func rootLost(_ root: RootFolder) {
        if let node = root.node { forget(node, removeWatches: true) }
        root.node = nil
        root.identity = nil
        attach(root, reason: .folderAvailable)
    }

    private func mountsChanged() {
        for root in roots {
            if root.node == nil {
                root.retryDelay = options.missingFolderRetry.initial
                root.retryAt = .now
                continue
            }
            var st = stat()
            if stat(root.path, &st) != 0 || DeviceInode(st) != root.identity {
                logger.notice("watch folder \(root.path) changed with a mount or unmount; watching it again")
                rootLost(root)
            }
        }
    }

    // MARK: - Recovery

    private func recoverFromOverflow() {
        let queued = Self.readProcInt("/proc/sys/fs/inotify/max_queued_events").map(String.init) ?? "unknown"
        logger.warning("inotify queue overflowed (fs.inotify.max_queued_events = \(queued)): events were lost, rescanning the watched folders")
        let moves = pendingMoves
        pendingMoves.removeAll()
        moves.forEach(unpairedMoveFrom)
        for root in roots where !shared.stopping {
            guard let node = root.node else { continue }
            limitHitInPass = false
            watchSubtree(node, path: root.path)
            if root.node != nil { emit(.scanNeeded(root.path, .overflow)) } else { markMissing(root, ENOENT) }
        }
    }

    private func watchDropped(_ wd: Int32) {
        guard let node = byWd.removeValue(forKey: wd) else { return }
        node.wd = -1
        if node.parent == nil, node.root.node === node {
            logger.warning("watch folder \(node.root.path) lost its watch (deleted or unmounted)")
            rootLost(node.root)
        } else {
            lostWatches.append(node)
        }
    }

    /// A directory whose watch vanished without a DELETE or move we saw: unmounted (a
    /// volume inside a folder), or deleted with its DELETE still to come. Watch it again
    /// if it is still there.
    private func checkLostWatches() {
        let lost = lostWatches
        lostWatches.removeAll()
        for node in lost where isAttached(node) && node.wd < 0 && node.unwatchedCount == 0 {
            let path = self.path(of: node)
            guard Self.fileType(path, follow: options.followSymlinks) == S_IFDIR else {
                forget(node, removeWatches: true)
                continue
            }
            for child in node.children.values { forget(child, removeWatches: true) }
            limitHitInPass = false
            watchSubtree(node, path: path)
            if isAttached(node) { emit(.scanNeeded(path, .folderAvailable)) }
        }
    }

    private func rescanUnwatched() {
        if fd < 0 { openInotify() }
        let tops = unwatchedTops.values.filter(isAttached)
        unwatchedTops.removeAll()
        limitHitInPass = false
        var paths: [String] = []
        for top in tops where !shared.stopping {
            let path = self.path(of: top)
            paths.append(path)
            let known = top.unwatchedCount
            top.unwatchedCount = 0
            if limitHitInPass {
                markUnwatched(top, path: path, knownCount: known)
            } else {
                watchSubtree(top, path: path)
            }
        }
        for path in paths { emit(.scanNeeded(path, .unwatched)) }
        if unwatchedTops.isEmpty {
            unwatchedRescanAt = nil
            unwatchedRescanDelay = options.unwatchedRescan.initial
            if limitEpisode {
                limitEpisode = false
                logger.notice("inotify watches are available again: every directory is watched")
            }
        } else {
            unwatchedRescanDelay = options.unwatchedRescan.after(unwatchedRescanDelay)
            unwatchedRescanAt = .now + unwatchedRescanDelay
        }
    }

    /// After any pass that may have hit the watch limit: report it (the log line once per
    /// process, the event once per episode) and schedule the periodic scans.
    private func afterPass() {
        limitHitInPass = false
        guard !unwatchedTops.isEmpty else { return }
        if unwatchedRescanAt == nil { unwatchedRescanAt = .now + unwatchedRescanDelay }
        guard !limitEpisode else { return }
        limitEpisode = true
        if fd >= 0 { maxUserWatches = Self.readProcInt("/proc/sys/fs/inotify/max_user_watches") ?? maxUserWatches }
        let limit = maxUserWatches ?? 0
        emit(.watchLimitReached(maxUserWatches: limit))
        guard fd >= 0, !limitLogged else { return }
        limitLogged = true
        let unwatched = unwatchedTops.values.reduce(0) { $0 + $1.unwatchedCount }
        let suggested = max(524_288, limit * 2)
        logger.warning("""
            inotify watch limit reached (fs.inotify.max_user_watches = \(limit)): \(unwatched) directories are scanned \
            every \(Self.human(options.unwatchedRescan.initial)) instead of watched. \
            Raise it: sysctl -w fs.inotify.max_user_watches=\(suggested) (and persist in /etc/sysctl.d/)
            """)
    }

    // MARK: - The table

    private func path(of node: DirNode) -> String {
        var names: [String] = []
        var current = node
        while let parent = current.parent {
            names.append(current.name)
            current = parent
        }
        var path = current.name
        for name in names.reversed() { path = join(path, name) }
        return path
    }

    private func isAttached(_ node: DirNode) -> Bool {
        var current = node
        while let parent = current.parent {
            guard parent.children[current.name] === current else { return false }
            current = parent
        }
        return current.root.node === current
    }

    private func isAncestor(_ candidate: DirNode, of node: DirNode) -> Bool {
        var current: DirNode? = node
        while let c = current {
            if c === candidate { return true }
            current = c.parent
        }
        return false
    }

    private func detach(_ node: DirNode) {
        if let parent = node.parent, parent.children[node.name] === node { parent.children[node.name] = nil }
        if node.parent == nil, node.root.node === node { node.root.node = nil }
        node.parent = nil
    }

    /// Drops a subtree from the table. `removeWatches` when its directories still exist
    /// elsewhere (moved out): the kernel would go on reporting them under stale paths.
    private func forget(_ node: DirNode, removeWatches: Bool) {
        detach(node)
        var stack = [node]
        while let current = stack.popLast() {
            if current.wd >= 0 {
                if byWd[current.wd] === current {
                    byWd[current.wd] = nil
                    if removeWatches && fd >= 0 { _ = inotify_rm_watch(fd, current.wd) }
                }
                current.wd = -1
            }
            if current.unwatchedCount > 0 {
                unwatchedTops[ObjectIdentifier(current)] = nil
                current.unwatchedCount = 0
            }
            stack.append(contentsOf: current.children.values)
            current.children.removeAll()
        }
    }

    // MARK: - Helpers

    /// True the first time a name is reported (bounded: a flood of such names is not
    /// remembered one by one).
    @discardableResult
    private func reportInvalidName(_ cName: UnsafePointer<CChar>, in dir: String) -> Bool {
        let shown = join(dir, PathFilter.lossyName(fromCString: cName))
        // One file raises CREATE and CLOSE_WRITE: say it once.
        guard invalidNamesReported.count < 10_000, invalidNamesReported.insert(shown).inserted else { return false }
        invalidNamesLogged += 1
        if invalidNamesLogged <= 20 {
            logger.warning("skipping \"\(shown)\": its name is not valid UTF-8 and cannot be stored or uploaded faithfully; rename it to back it up")
        } else if invalidNamesLogged == 21 {
            logger.warning("more names that are not valid UTF-8 are skipped; scans list them")
        }
        return true
    }

    static func fileType(_ path: String, follow: Bool) -> mode_t? {
        var st = stat()
        let rc = follow ? stat(path, &st) : lstat(path, &st)
        return rc == 0 ? st.st_mode & S_IFMT : nil
    }

    static func readProcInt(_ path: String) -> Int? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = read(fd, &bytes, bytes.count)
        guard n > 0 else { return nil }
        return Int(String(decoding: bytes[..<n], as: UTF8.self).trimmingCharacters(in: " \n"))
    }

    static func human(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        if seconds >= 3600, seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        if seconds >= 60, seconds % 60 == 0 { return "\(seconds / 60)m" }
        if seconds >= 1 { return "\(seconds)s" }
        return "\(duration.components.attoseconds / 1_000_000_000_000_000)ms"
    }
}

func join(_ dir: String, _ name: String) -> String {
    dir == "/" ? "/" + name : dir + "/" + name
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let c = s.first, set.contains(c) { s.removeFirst() }
        while let c = s.last, set.contains(c) { s.removeLast() }
        return String(s)
    }
}
