#if canImport(Glibc)
import Glibc
#endif
import Logging
import PhotolalaCore

/// The watcher thread's state machine: owns the inotify descriptor and the wd ↔ directory
/// table, turns kernel events into `WatchEvent`s, and runs the retry timers. Never touched
/// from another thread.
///
/// The loop, the status and the table are here; its jobs, one file each: reading events
/// (`+Events`), renames (`+Moves`), adding watches to a subtree (`+Walking`), the
/// configured folders (`+Folders`), and recovery from overflow, lost watches and the watch
/// limit (`+Recovery`). The nodes are `DirNode`s under a `RootFolder`.
final class WatchTree {
    let options: WatcherOptions
    let filter: PathFilter
    let logger: Logger
    let shared: WatcherShared
    private let output: (WatchEvent) -> Void

    var fd: Int32 = -1
    private var mountsFd: Int32 = -1
    var roots: [RootFolder] = []
    var byWd: [Int32: DirNode] = [:]
    var unwatchedTops: [ObjectIdentifier: DirNode] = [:]

    var pendingMoves: [PendingMove] = []
    /// Directories whose watch the kernel dropped (IN_IGNORED) without us asking: checked
    /// after the batch, when the parent's DELETE (if any) has been seen.
    var lostWatches: [DirNode] = []
    var overflowed = false

    /// Set once an add hit the limit during the current pass: the rest of the pass does not
    /// try again, it only records what stays unwatched.
    var limitHitInPass = false
    /// From the first directory left unwatched until every directory is watched again.
    var limitEpisode = false
    var maxUserWatches: Int?
    var unwatchedRescanAt: ContinuousClock.Instant?
    /// Each rescan that still leaves directories unwatched counts as a failure.
    var unwatchedRescan: Backoff

    // What was logged already: each problem is said once, not on every retry or event.
    var limitLogged = false
    var instanceErrorLogged = false
    var invalidNamesLogged = 0
    var invalidNamesReported = Set<String>()
    var deniedLogged = Set<String>()

    private var lastStatus: WatcherStatus?
    /// Where overflows are counted: the factory of the task that started the watcher.
    var counters = DaemonCounter.Scope()
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)

    init(options: WatcherOptions, logger: Logger, shared: WatcherShared, emit: @escaping (WatchEvent) -> Void) {
        self.options = options
        self.filter = PathFilter(options: options)
        self.logger = logger
        self.shared = shared
        self.output = emit
        self.unwatchedRescan = options.unwatchedRescan
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
        roots = seen.map { RootFolder(path: $0, retry: options.missingFolderRetry) }
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
            let n = retryingInterrupts { poll(&fds, nfds_t(fds.count), pollTimeout()) }
            if n < 0 {
                let err = errno
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
    func emit(_ event: WatchEvent) {
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

    // MARK: - The table

    /// Drops a subtree from the table. `removeWatches` when its directories still exist
    /// elsewhere (moved out): the kernel would go on reporting them under stale paths.
    func forget(_ node: DirNode, removeWatches: Bool) {
        node.detach()
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
}
