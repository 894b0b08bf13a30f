#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

extension WatchTree {
    /// Gives `start` (attached) and everything below it a watch, re-listing directories
    /// that already have one: children found on disk are added, children gone are
    /// forgotten. Used for new directories, folders, overflow recovery and retries.
    func watchSubtree(_ start: DirNode, path startPath: String) {
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
                       isStale(existing, replacedBy: path) {
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
        guard stat(existing.path, &old) == 0 else { return true }
        return DeviceInode(now) != DeviceInode(old)
    }

    func markUnwatched(_ node: DirNode, path: String, knownCount: Int? = nil) {
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
}
