#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

/// Reading inotify: kernel events become `WatchEvent`s and changes to the tree.
extension WatchTree {
    func openInotify() {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd < 0 else { return }
        let err = errno
        guard !instanceErrorLogged else { return }
        instanceErrorLogged = true
        let limit = Self.readProcInt("/proc/sys/fs/inotify/max_user_instances").map(String.init) ?? "unknown"
        logger.warning("""
            cannot create an inotify instance (\(errnoText(err)); fs.inotify.max_user_instances = \(limit)): \
            all folders are scanned every \(Self.human(Backoff.duration(options.unwatchedRescan.base))) instead of watched. \
            Raise it: sysctl -w fs.inotify.max_user_instances=1024 (and persist in /etc/sysctl.d/)
            """)
    }

    enum AddResult {
        case watched(Int32)
        case duplicate(DirNode)
        case limit
        case failed(Int32)
    }

    func addWatch(_ path: String, for node: DirNode) -> AddResult {
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

    func readEvents() {
        guard fd >= 0, let base = buffer.baseAddress else { return }
        // Bounded, so a never-ending flood still lets timers, status and stop through.
        for _ in 0..<64 where !shared.stopping {
            let n = retryingInterrupts { read(fd, base, buffer.count) }
            if n < 0 {
                let err = errno
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
                                let dir = parent.path
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
        let path = join(node.path, name)
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
    func removedNonDirectory(parent: DirNode, name: String, path: String) {
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

    func addDirectory(parent: DirNode, name: String, path: String) {
        guard filter.accepts(directoryName: name) else { return }
        if let existing = parent.children[name], existing.wd >= 0 || existing.unwatchedCount > 0 { return }
        let child = parent.children[name] ?? DirNode(name: name, parent: parent, root: parent.root)
        parent.children[name] = child
        limitHitInPass = false
        watchSubtree(child, path: path)
        if child.isAttached { emit(.scanNeeded(path, .newDirectory)) }
    }

    /// True the first time a name is reported (bounded: a flood of such names is not
    /// remembered one by one).
    @discardableResult
    func reportInvalidName(_ cName: UnsafePointer<CChar>, in dir: String) -> Bool {
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
}
