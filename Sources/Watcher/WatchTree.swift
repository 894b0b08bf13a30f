#if canImport(Glibc)
import Glibc
#endif
import Logging
import PhotolalaCore

/// The watcher thread's state machine: owns the inotify descriptor and the wd ↔ directory
/// table, turns kernel events into `WatchEvent`s, and runs the retry timers. Never touched
/// from another thread.
///
/// In order below: what the thread's loop calls, the configured folders (attached when present, retried with
/// backoff while missing), reading events, renames, adding watches to a subtree, and
/// recovery from overflow, lost watches and the watch limit. The nodes are `DirNode`s
/// under a `RootFolder`; what decides alone is a value (`PendingMoves`, `InotifyRecords`,
/// `DirectoryProbe`, `InvalidNames`, `InotifyLimit`).
final class WatchTree {
    private let options: WatcherOptions
    private let filter: PathFilter
    private let probe: DirectoryProbe
    private let logger: Logger
    private let shared: WatcherShared
    private let output: (WatchEvent) -> Void

    private let inotify = InotifyInstance()
    private var roots: [RootFolder] = []
    private var byWd: [Int32: DirNode] = [:]
    private var unwatched: UnwatchedDirectories

    private var pendingMoves = PendingMoves()
    /// Directories whose watch the kernel dropped (IN_IGNORED) without us asking: checked
    /// after the batch, when the parent's DELETE (if any) has been seen.
    private var lostWatches: [DirNode] = []
    private var overflowed = false

    /// Set once an add hit the limit during the current pass: the rest of the pass does not
    /// try again, it only records what stays unwatched.
    private var limitHitInPass = false
    private var maxUserWatches: Int?

    // What was logged already: each problem is said once, not on every retry or event.
    private var invalidNames = InvalidNames()
    private var deniedLogged = Set<String>()

    private var lastStatus: WatcherStatus?
    /// Where overflows are counted: the factory of the task that started the watcher.
    var counters = DaemonCounter.Scope()

    init(options: WatcherOptions, logger: Logger, shared: WatcherShared, emit: @escaping (WatchEvent) -> Void) {
        self.options = options
        self.filter = PathFilter(options: options)
        self.probe = DirectoryProbe(followSymlinks: options.followSymlinks, filter: filter)
        self.logger = logger
        self.shared = shared
        self.output = emit
        self.unwatched = UnwatchedDirectories(schedule: options.unwatchedRescan)
        roots = RootFolder.distinct(options.folders, logger: logger).map { RootFolder(path: $0, retry: options.missingFolderRetry) }
    }

    // MARK: - What the watcher thread's loop calls (`InotifyWatcher`)

    /// Opens inotify and attaches every folder.
    func start() {
        maxUserWatches = InotifyLimit.watches.current
        openInotify()
        for root in roots where !shared.stopping { attach(root, reason: .initial) }
        afterPass()
        publish()
    }

    /// Closing inotify drops every watch.
    func stop() {
        inotify.close()
    }

    var inotifyFd: Int32 { inotify.fd }

    /// The nearest timer: a folder's retry, the rescan of unwatched directories, a move's
    /// pairing deadline.
    var nextDeadline: ContinuousClock.Instant? {
        (roots.compactMap(\.retryAt) + [unwatched.rescanAt, pendingMoves.nextDeadline].compactMap { $0 }).min()
    }

    /// A full rescan was asked for (`photolalactl rescan`): every directory is listed again
    /// and those without a watch (unreadable before, say) are tried again, so "skipped
    /// until the next full scan" holds for the watches as well as for the files.
    func rewatchAll() {
        deniedLogged.removeAll()
        for root in roots where !shared.stopping {
            guard let node = root.node else { continue }
            limitHitInPass = false
            watchSubtree(node, path: root.path)
        }
        afterPass()
    }

    /// Runs what is due: moves that did not pair, folders to try again, the rescan.
    func fireTimers() {
        let now = ContinuousClock.now
        pendingMoves.takeExpired(by: now).forEach(unpairedMoveFrom)
        for root in roots where root.node == nil {
            guard let at = root.retryAt, at <= now, !shared.stopping else { continue }
            attach(root, reason: .folderAvailable)
        }
        if let at = unwatched.rescanAt, at <= now { rescanUnwatched() }
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

    /// Shares the status with the other threads when it changed.
    func publish() {
        var status = WatcherStatus()
        status.folders = roots.count
        status.directories = byWd.count
        status.missingFolders = roots.filter { $0.node == nil }.map(\.path)
        status.watchLimitReached = !unwatched.isEmpty
        status.maxUserWatches = maxUserWatches
        status.unwatchedDirectories = unwatched.directories
        guard status != lastStatus else { return }
        lastStatus = status
        shared.state.withLock { $0.status = status }
    }

    /// Drops a subtree from the table. `removeWatches` when its directories still exist
    /// elsewhere (moved out): the kernel would go on reporting them under stale paths.
    private func forget(_ node: DirNode, removeWatches: Bool) {
        node.detach()
        var stack = [node]
        while let current = stack.popLast() {
            if current.wd >= 0 {
                if byWd[current.wd] === current {
                    byWd[current.wd] = nil
                    if removeWatches { inotify.removeWatch(current.wd) }
                }
                current.wd = -1
            }
            unwatched.remove(current)
            stack.append(contentsOf: current.children.values)
            current.children.removeAll()
        }
    }

    // MARK: - The configured folders

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
        if root.attached() {
            logger.notice("watch folder \(root.path) is available again")
            emit(.folderAvailable(root.path))
        }
        emit(.scanNeeded(root.path, reason))
    }

    private func markMissing(_ root: RootFolder, _ err: Int32) {
        guard root.missing() else { return }
        logger.warning("watch folder \(root.path) is missing or unreadable (\(errnoText(err))); retrying with backoff (is its volume mounted?)")
        emit(.folderMissing(root.path))
    }

    /// The folder's directory is gone, moved, or now a different one (remounted): drop its
    /// watches and look again at once.
    private func rootLost(_ root: RootFolder) {
        if let node = root.node { forget(node, removeWatches: true) }
        root.node = nil
        root.identity = nil
        attach(root, reason: .folderAvailable)
    }

    func mountsChanged() {
        for root in roots {
            if root.node == nil {
                // The mount may have brought the folder.
                root.retryNow()
                continue
            }
            var st = stat()
            if stat(root.path, &st) != 0 || DeviceInode(st) != root.identity {
                logger.notice("watch folder \(root.path) changed with a mount or unmount; watching it again")
                rootLost(root)
            }
        }
    }

    // MARK: - Reading inotify: kernel events become `WatchEvent`s and changes to the tree

    private func openInotify() {
        inotify.open(logger: logger, rescan: Backoff.duration(options.unwatchedRescan.base))
    }

    private enum AddResult {
        case watched(Int32)
        case duplicate(DirNode)
        case limit
        case failed(Int32)
    }

    private func addWatch(_ path: String, for node: DirNode) -> AddResult {
        if let budget = shared.state.withLock({ $0.watchBudget }), byWd.count >= budget { return .limit }
        switch inotify.addWatch(path, dontFollow: node.parent != nil && !options.followSymlinks) {
        case .limit: return .limit
        case .failed(let err): return .failed(err)
        case .watched(let wd):
            // inotify gives one watch per inode: the same wd means the same directory.
            if let existing = byWd[wd], existing !== node { return .duplicate(existing) }
            return .watched(wd)
        }
    }

    func readEvents() {
        // Bounded, so a never-ending flood still lets timers, status and stop through.
        for _ in 0..<64 where !shared.stopping {
            guard let records = inotify.read(logger: logger) else { break }
            for record in records where !record.malformedName {
                var name: String?
                if let cName = record.name {
                    name = PathFilter.name(fromCString: cName)
                    if name == nil {
                        if let parent = byWd[record.wd], reportInvalidName(cName, in: parent.path) {
                            emit(.scanNeeded(parent.path, .invalidName))
                        }
                        continue
                    }
                }
                handle(wd: record.wd, mask: record.mask, cookie: record.cookie, name: name)
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
        if mask & UInt32(IN_MOVED_TO) != 0, let from = pendingMoves.take(cookie: cookie) {
            pairedMove(from: from, toParent: node, toName: name, isDirectory: isDirectory)
            return
        }
        // A name reused after it was moved away: the move must be reported first.
        pendingMoves.takeReused(name, in: node).forEach(unpairedMoveFrom)
        let path = join(node.path, name)
        if mask & UInt32(IN_MOVED_FROM) != 0 {
            pendingMoves.add(.init(cookie: cookie, parent: node, name: name, isDirectory: isDirectory,
                                   deadline: .now + options.movePairingWindow))
        } else if mask & UInt32(IN_CLOSE_WRITE) != 0 {
            // Only a type seen to be other than a regular file is dropped: by the time this
            // event is read, its directory may have been renamed (the path no longer
            // resolves) and the aggregator carries the file to its new name.
            if filter.accepts(fileName: name), (DirectoryProbe.fileType(path, follow: false) ?? S_IFREG) == S_IFREG {
                emit(.fileWritten(path))
            }
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
        if child.isAttached { emit(.scanNeeded(path, .newDirectory)) }
    }

    /// True the first time a name is reported.
    @discardableResult
    private func reportInvalidName(_ cName: UnsafePointer<CChar>, in dir: String) -> Bool {
        let (new, logLine) = invalidNames.report(join(dir, PathFilter.lossyName(fromCString: cName)))
        if let logLine { logger.warning("\(logLine)") }
        return new
    }

    // MARK: - Renames (a MOVED_FROM paired with its MOVED_TO, or left alone: `PendingMoves`)

    private func pairedMove(from move: PendingMoves.Move, toParent: DirNode, toName: String, isDirectory: Bool) {
        let fromAttached = move.parent.isAttached
        let fromPath = join(move.parent.path, move.name)
        let toPath = join(toParent.path, toName)
        // A directory, or a followed link to one (a node we hold under the old name).
        if let source = fromAttached ? move.parent.children[move.name] : nil {
            let stillADirectory = isDirectory
                || (options.followSymlinks && DirectoryProbe.fileType(toPath, follow: true) == S_IFDIR)
            if stillADirectory, filter.accepts(directoryName: toName), source !== toParent, !source.isAncestor(of: toParent) {
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
        let type = DirectoryProbe.fileType(toPath, follow: options.followSymlinks)
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

    /// A MOVED_FROM whose MOVED_TO never came: it left the watched tree.
    private func unpairedMoveFrom(_ move: PendingMoves.Move) {
        guard move.parent.isAttached else { return }
        let path = join(move.parent.path, move.name)
        if move.isDirectory {
            // The kernel keeps watching a moved inode wherever it went: drop those watches.
            if let child = move.parent.children[move.name] { forget(child, removeWatches: true) }
            if filter.accepts(directoryName: move.name) { emit(.removed(path)) }
        } else {
            removedNonDirectory(parent: move.parent, name: move.name, path: path)
        }
    }

    // MARK: - Watching a subtree

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
                    if let parent = node.parent, existing.parent != nil, !existing.isAncestor(of: parent),
                       DirectoryProbe.isStale(existing.path, replacedBy: path) {
                        // A rename whose events were lost (overflow): the watch followed the
                        // inode, so move the node instead of watching it twice.
                        node.detach()
                        reparent(existing, to: parent, name: node.name, from: existing.path, to: path)
                        stack.append((existing, path))
                    } else {
                        // The same directory reached twice (a followed link, a bind mount):
                        // reported under the first path only, and never a loop.
                        node.detach()
                    }
                    continue
                case .failed(let err):
                    if err != ENOENT && err != ENOTDIR && deniedLogged.insert(path).inserted {
                        logger.warning("cannot watch \(path): \(errnoText(err)); it is skipped until the next full scan")
                    }
                    node.detach()
                    continue
                }
            }
            if node.unwatchedCount > 0 { continue }
            var seen = Set<ExactPath>()
            var newChildren: [(DirNode, String)] = []
            let err = DirectoryEntries.forEach(path: path) { cName, type in
                guard probe.mayBeDirectory(type) else { return }
                guard let name = PathFilter.name(fromCString: cName) else {
                    reportInvalidName(cName, in: path)
                    return
                }
                let childPath = join(path, name)
                guard probe.isDirectory(childPath, type: type), filter.accepts(directoryName: name) else { return }
                seen.insert(ExactPath(name))
                let child = node.children[name] ?? DirNode(name: name, parent: node, root: node.root)
                node.children[name] = child
                newChildren.append((child, childPath))
            }
            if err == 0 {
                for (name, child) in node.children.pairs where !seen.contains(ExactPath(name)) { forget(child, removeWatches: true) }
            } else if err != ENOENT && deniedLogged.insert(path).inserted {
                logger.warning("cannot list \(path): \(errnoText(err)); its subdirectories are not watched")
            }
            stack.append(contentsOf: newChildren.reversed())
        }
    }

    private func markUnwatched(_ node: DirNode, path: String, knownCount: Int? = nil) {
        for child in node.children.values { forget(child, removeWatches: true) }
        unwatched.add(node, directories: knownCount ?? probe.countDirectories(path, stopping: { shared.stopping }))
    }

    // MARK: - Back to a complete tree after lost events, lost watches or the watch limit

    private func recoverFromOverflow() {
        counters.increment(.inotifyOverflows)
        logger.warning("\(InotifyLimit.overflowed())")
        pendingMoves.takeAll().forEach(unpairedMoveFrom)
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
        for node in lost where node.isAttached && node.wd < 0 && node.unwatchedCount == 0 {
            let path = node.path
            guard DirectoryProbe.fileType(path, follow: options.followSymlinks) == S_IFDIR else {
                forget(node, removeWatches: true)
                continue
            }
            for child in node.children.values { forget(child, removeWatches: true) }
            limitHitInPass = false
            watchSubtree(node, path: path)
            if node.isAttached { emit(.scanNeeded(path, .folderAvailable)) }
        }
    }

    private func rescanUnwatched() {
        if !inotify.isOpen { openInotify() }
        let tops = unwatched.takeForRescan()
        limitHitInPass = false
        var paths: [String] = []
        for top in tops where !shared.stopping {
            let path = top.path
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
        if unwatched.afterRescan() { logger.notice("inotify watches are available again: every directory is watched") }
    }

    /// After any pass that may have hit the watch limit: report it (the log line once per
    /// process, the event once per episode) and schedule the periodic scans.
    private func afterPass() {
        limitHitInPass = false
        let (begins, log) = unwatched.afterPass(canLog: inotify.isOpen)
        guard begins else { return }
        if inotify.isOpen { maxUserWatches = InotifyLimit.watches.current ?? maxUserWatches }
        let limit = maxUserWatches ?? 0
        emit(.watchLimitReached(maxUserWatches: limit))
        guard log else { return }
        let rescan = Backoff.duration(options.unwatchedRescan.base)
        logger.warning("\(InotifyLimit.watchesReached(limit: limit, unwatched: unwatched.directories, rescan: rescan))")
    }
}
