#if canImport(Glibc)
import Glibc
#endif
import Logging
import PhotolalaCore

/// The resumable state of one scan: an explicit stack, so a scan can stop after any
/// directory and continue on the next request. Holds no open descriptor between calls.
/// `@unchecked Sendable`: it is only ever driven by one caller at a time (`DirectoryScanner.scan`'s
/// blocking loop, or the single low-priority worker thread, one request after the other).
final class ScanCursor: @unchecked Sendable {
    private let scanner: DirectoryScanner
    private let recursive: Bool
    private var stack: [(path: String, isRoot: Bool)]
    private var visited = Set<DeviceInode>()
    private(set) var summary: ScanSummary
    private var finished = false
    private let started = ContinuousClock.now
    private var problemsLogged = 0

    init(scanner: DirectoryScanner, root: String, recursive: Bool) {
        self.scanner = scanner
        self.recursive = recursive
        let root = normalizedPath(root)
        stack = [(root, true)]
        summary = ScanSummary(root: root, recursive: recursive)
    }

    func next() -> ScanOutput? {
        guard !finished else { return nil }
        var batch: [ScannedDirectory] = []
        var files = 0
        while let item = stack.popLast() {
            if let listing = list(item.path, isRoot: item.isRoot) {
                files += listing.files.count
                batch.append(listing)
                // Empty directories still count, so a tree of empty folders yields too.
                if files >= scanner.batchSize || batch.count >= scanner.batchSize { return .directories(batch) }
            }
        }
        if !batch.isEmpty { return .directories(batch) }
        finished = true
        summary.elapsed = ContinuousClock.now - started
        return .finished(summary)
    }

    private func list(_ path: String, isRoot: Bool) -> ScannedDirectory? {
        let flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK | (isRoot || scanner.followSymlinks ? 0 : O_NOFOLLOW)
        let fd = open(path, flags)
        guard fd >= 0 else {
            let err = errno
            // Gone since its parent was read: nothing to report.
            if err != ENOENT || isRoot { problem(path, err) }
            return nil
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            problem(path, errno)
            close(fd)
            return nil
        }
        guard visited.insert(DeviceInode(st)).inserted else {
            close(fd)
            return nil
        }
        guard let dir = fdopendir(fd) else {
            problem(path, errno)
            close(fd)
            return nil
        }
        defer { closedir(dir) }
        let dfd = dirfd(dir)
        var files: [ScannedFile] = []
        var subdirectories: [String] = []
        let base = path == "/" ? "" : path
        let readError = DirectoryEntries.forEach(dir) { cName, type in
            guard let name = PathFilter.name(fromCString: cName) else {
                invalidName(in: path, cName)
                return
            }
            var kind = type
            if kind == DT_UNKNOWN || (kind == DT_LNK && scanner.followSymlinks) {
                // Some filesystems (and every symlink) need a stat to say what they are.
                var lst = stat()
                guard fstatat(dfd, cName, &lst, AT_SYMLINK_NOFOLLOW) == 0 else { return statFailed(base + "/" + name) }
                kind = DirectoryEntries.entryType(lst.st_mode)
            }
            if kind == DT_DIR || (kind == DT_LNK && scanner.followSymlinks) {
                guard recursive else {
                    if kind == DT_DIR { return }
                    // Not descending, but a link may still point at a file to list.
                    return linkedFile(dfd, cName, name, base, into: &files)
                }
                if kind == DT_LNK {
                    var target = stat()
                    guard fstatat(dfd, cName, &target, 0) == 0 else { return }
                    if (target.st_mode & S_IFMT) == S_IFDIR {
                        if scanner.filter.accepts(directoryName: name), !scanner.leadsIntoCoveredRoot(base + "/" + name) {
                            subdirectories.append(base + "/" + name)
                        }
                    } else if (target.st_mode & S_IFMT) == S_IFREG, scanner.filter.accepts(fileName: name) {
                        append(base + "/" + name, target, into: &files)
                    }
                    return
                }
                if scanner.filter.accepts(directoryName: name) { subdirectories.append(base + "/" + name) }
                return
            }
            guard kind == DT_REG, scanner.filter.accepts(fileName: name) else { return }
            var fst = stat()
            guard fstatat(dfd, cName, &fst, AT_SYMLINK_NOFOLLOW) == 0 else { return statFailed(base + "/" + name) }
            guard (fst.st_mode & S_IFMT) == S_IFREG else { return }
            append(base + "/" + name, fst, into: &files)
        }
        if readError != 0 {
            // A partial listing must not look complete: files not reached would be "gone".
            problem(path, readError)
            return nil
        }
        // Depth-first in name order keeps sibling batches together and the stack small.
        stack.append(contentsOf: subdirectories.sorted(by: >).map { ($0, false) })
        summary.directories += 1
        summary.visitedDirectories.insert(path)
        summary.files += files.count
        summary.bytes += files.reduce(0) { $0 + $1.size }
        if isRoot { summary.rootListed = true }
        return ScannedDirectory(path: path, files: files)
    }

    private func linkedFile(_ dfd: Int32, _ cName: UnsafePointer<CChar>, _ name: String, _ base: String,
                            into files: inout [ScannedFile]) {
        var target = stat()
        guard fstatat(dfd, cName, &target, 0) == 0, (target.st_mode & S_IFMT) == S_IFREG,
              scanner.filter.accepts(fileName: name) else { return }
        append(base + "/" + name, target, into: &files)
    }

    private func append(_ path: String, _ st: stat, into files: inout [ScannedFile]) {
        files.append(ScannedFile(path: path, device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                                 mtimeSeconds: Int64(st.st_mtim.tv_sec), mtimeNanoseconds: Int64(st.st_mtim.tv_nsec)))
    }

    private func statFailed(_ path: String) {
        let err = errno
        if err != ENOENT { problem(path, err) }
    }

    private func problem(_ path: String, _ err: Int32) {
        let reason = errnoText(err)
        summary.unreadable.append(ScanProblem(path: path, reason: reason))
        problemsLogged += 1
        if problemsLogged <= 20 {
            scanner.logger.warning("cannot read \(path): \(reason); it is skipped until the next scan")
        } else if problemsLogged == 21 {
            scanner.logger.warning("more unreadable paths under \(summary.root); the scan summary lists them all")
        }
    }

    private func invalidName(in dir: String, _ cName: UnsafePointer<CChar>) {
        let shown = (dir == "/" ? "" : dir) + "/" + PathFilter.lossyName(fromCString: cName)
        summary.invalidNameCount += 1
        if summary.invalidNames.count < 100 { summary.invalidNames.append(shown) }
        if summary.invalidNameCount <= 20 {
            scanner.logger.warning("skipping \"\(shown)\": its name is not valid UTF-8 and cannot be stored or uploaded faithfully; rename it to back it up")
        }
    }
}
