#if canImport(Glibc)
import Glibc
#endif

/// Renames: inotify reports one as a MOVED_FROM and a MOVED_TO sharing a cookie, possibly
/// split across two reads; a MOVED_FROM left alone means the entry left the watched tree.
extension WatchTree {
    struct PendingMove {
        var cookie: UInt32
        var parent: DirNode
        var name: String
        var isDirectory: Bool
        var deadline: ContinuousClock.Instant
    }

    func pairedMove(from move: PendingMove, toParent: DirNode, toName: String, isDirectory: Bool) {
        let fromAttached = move.parent.isAttached
        let fromPath = join(move.parent.path, move.name)
        let toPath = join(toParent.path, toName)
        // A directory, or a followed link to one (a node we hold under the old name).
        if let source = fromAttached ? move.parent.children[move.name] : nil {
            let stillADirectory = isDirectory || (options.followSymlinks && Self.fileType(toPath, follow: true) == S_IFDIR)
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
    func reparent(_ source: DirNode, to parent: DirNode, name: String, from fromPath: String, to toPath: String) {
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

    func finalizeMoves(expiredBy now: ContinuousClock.Instant) {
        guard !pendingMoves.isEmpty else { return }
        let expired = pendingMoves.filter { $0.deadline <= now }
        pendingMoves.removeAll { $0.deadline <= now }
        expired.forEach(unpairedMoveFrom)
    }

    /// A MOVED_FROM whose MOVED_TO never came: it left the watched tree.
    func unpairedMoveFrom(_ move: PendingMove) {
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
}
