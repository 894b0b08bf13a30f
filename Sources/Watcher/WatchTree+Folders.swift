#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

/// The configured folders: attached when present, retried with backoff while missing.
extension WatchTree {
    func attach(_ root: RootFolder, reason: ScanReason) {
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
        root.retry.reset()
        if root.reportedMissing {
            root.reportedMissing = false
            logger.notice("watch folder \(root.path) is available again")
            emit(.folderAvailable(root.path))
        }
        emit(.scanNeeded(root.path, reason))
    }

    func markMissing(_ root: RootFolder, _ err: Int32) {
        if !root.reportedMissing {
            root.reportedMissing = true
            logger.warning("watch folder \(root.path) is missing or unreadable (\(errnoText(err))); retrying with backoff (is its volume mounted?)")
            emit(.folderMissing(root.path))
            root.retry.reset()
        }
        root.retryAt = .now + Self.nextWait(&root.retry)
    }

    /// The folder's directory is gone, moved, or now a different one (remounted): drop its
    /// watches and look again at once.
    func rootLost(_ root: RootFolder) {
        if let node = root.node { forget(node, removeWatches: true) }
        root.node = nil
        root.identity = nil
        attach(root, reason: .folderAvailable)
    }

    func mountsChanged() {
        for root in roots {
            if root.node == nil {
                // The mount may have brought the folder: try now, as the first step of a
                // fresh schedule, so a failure waits the second step, not the first again.
                root.retry.reset()
                _ = root.retry.fail(random: 0)
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
}
