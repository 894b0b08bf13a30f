#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

/// Getting back to a complete tree after lost events, lost watches or the watch limit.
extension WatchTree {
    func recoverFromOverflow() {
        counters.increment(.inotifyOverflows)
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

    func watchDropped(_ wd: Int32) {
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
    func checkLostWatches() {
        let lost = lostWatches
        lostWatches.removeAll()
        for node in lost where node.isAttached && node.wd < 0 && node.unwatchedCount == 0 {
            let path = node.path
            guard Self.fileType(path, follow: options.followSymlinks) == S_IFDIR else {
                forget(node, removeWatches: true)
                continue
            }
            for child in node.children.values { forget(child, removeWatches: true) }
            limitHitInPass = false
            watchSubtree(node, path: path)
            if node.isAttached { emit(.scanNeeded(path, .folderAvailable)) }
        }
    }

    func rescanUnwatched() {
        if fd < 0 { openInotify() }
        let tops = unwatchedTops.values.filter(\.isAttached)
        unwatchedTops.removeAll()
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
        if unwatchedTops.isEmpty {
            unwatchedRescanAt = nil
            unwatchedRescan.reset()
            if limitEpisode {
                limitEpisode = false
                logger.notice("inotify watches are available again: every directory is watched")
            }
        } else {
            unwatchedRescanAt = .now + Self.nextWait(&unwatchedRescan)
        }
    }

    /// After any pass that may have hit the watch limit: report it (the log line once per
    /// process, the event once per episode) and schedule the periodic scans.
    func afterPass() {
        limitHitInPass = false
        guard !unwatchedTops.isEmpty else { return }
        if unwatchedRescanAt == nil { unwatchedRescanAt = .now + Self.nextWait(&unwatchedRescan) }
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
            every \(Self.human(Backoff.duration(options.unwatchedRescan.base))) instead of watched. \
            Raise it: sysctl -w fs.inotify.max_user_watches=\(suggested) (and persist in /etc/sysctl.d/)
            """)
    }
}
