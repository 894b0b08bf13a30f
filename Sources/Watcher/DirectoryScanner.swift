#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// One regular file as the scanner saw it: the identity the queue compares with the
/// database (device, inode, size, mtime with nanoseconds) without reading the file.
public struct ScannedFile: Sendable, Hashable {
    public var path: String
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    public var mtimeSeconds: Int64
    public var mtimeNanoseconds: Int64

    public init(path: String, device: UInt64, inode: UInt64, size: Int64, mtimeSeconds: Int64, mtimeNanoseconds: Int64) {
        self.path = path
        self.device = device
        self.inode = inode
        self.size = size
        self.mtimeSeconds = mtimeSeconds
        self.mtimeNanoseconds = mtimeNanoseconds
    }
}

/// The complete listing of one directory (accepted files only, subdirectories excluded).
/// Only directories that were read to the end are reported, so the queue may treat a file
/// it knows in `path` but not in `files` as gone (`reconcileDirectory`).
public struct ScannedDirectory: Sendable, Equatable {
    public var path: String
    public var files: [ScannedFile]
}

/// A path the scanner could not read, with the system's reason.
public struct ScanProblem: Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "\(path): \(reason)" }
}

public struct ScanSummary: Sendable, Equatable {
    public var root: String
    public var recursive: Bool
    public var files = 0
    public var directories = 0
    public var bytes: Int64 = 0
    /// Directories that could not be listed and files that could not be stat'ed. Their
    /// contents are unknown, not gone: do not sweep below them.
    public var unreadable: [ScanProblem] = []
    /// Names skipped because they are not valid UTF-8 (rendered lossily; first 100).
    public var invalidNames: [String] = []
    public var invalidNameCount = 0
    /// Every directory listed completely: what `sweepDirectories` needs after a full scan.
    public var visitedDirectories: Set<String> = []
    /// False when the root itself could not be listed: the scan says nothing at all.
    public var rootListed = false
    public var elapsed: Duration = .zero
}

/// What the asynchronous scan yields: batches of complete directory listings, then once
/// the summary.
public enum ScanOutput: Sendable {
    case directories([ScannedDirectory])
    case finished(ScanSummary)
}

/// A fast recursive lister: readdir's d_type decides what needs a stat, names are filtered
/// before any stat, and only accepted files are stat'ed (fstatat relative to the open
/// directory, so the kernel does not walk the full path again). Symlinks are followed only
/// when asked, and every directory is entered once by (device, inode), which also stops
/// loops through bind mounts. FIFOs, sockets and devices are skipped; unreadable
/// directories are reported and the walk goes on.
public struct DirectoryScanner: Sendable {
    public let filter: PathFilter
    public let followSymlinks: Bool
    public let batchSize: Int
    public let logger: Logger
    /// The watched folders, resolved. A followed link into one of them is not entered:
    /// what it leads to is scanned under its own path already. The per-scan (device,
    /// inode) set stops loops within one scan, but a scan of a new subdirectory does not
    /// know the rest of the tree, and a link back up (to the folder itself, say) listed
    /// the whole library again under alias paths, each file hashed a second time.
    public let coveredRoots: [String]

    public init(filter: PathFilter, followSymlinks: Bool = false, batchSize: Int = 1000, coveredRoots: [String] = [],
                logger: Logger = Logger(label: "photolala.watcher.scanner")) {
        self.filter = filter
        self.followSymlinks = followSymlinks
        self.batchSize = max(1, batchSize)
        self.coveredRoots = coveredRoots.compactMap(Self.resolved)
        self.logger = logger
    }

    public init(options: WatcherOptions, logger: Logger = Logger(label: "photolala.watcher.scanner")) {
        self.init(filter: PathFilter(options: options), followSymlinks: options.followSymlinks,
                  coveredRoots: options.folders, logger: logger)
    }

    static func resolved(_ path: String) -> String? {
        guard let r = realpath(path, nil) else { return nil }
        defer { free(r) }
        return String(validatingCString: r)
    }

    /// Whether a followed link to a directory leads into a watched folder.
    func leadsIntoCoveredRoot(_ linkPath: String) -> Bool {
        guard !coveredRoots.isEmpty, let target = Self.resolved(linkPath) else { return false }
        return coveredRoots.contains { root in
            target == root || (target.utf8.starts(with: root.utf8) && (root == "/" || target.utf8.dropFirst(root.utf8.count).first == UInt8(ascii: "/")))
        }
    }

    /// Scans on the calling thread, handing batches to `onBatch` as they fill. Blocking:
    /// call it from a thread of your own, never from the cooperative pool (use `batches`).
    public func scan(_ path: String, recursive: Bool = true,
                     onBatch: ([ScannedDirectory]) throws -> Void) rethrows -> ScanSummary {
        let cursor = ScanCursor(scanner: self, root: path, recursive: recursive)
        while let output = cursor.next() {
            switch output {
            case .directories(let batch): try onBatch(batch)
            case .finished(let summary): return summary
            }
        }
        return cursor.summary
    }

    /// Scans on a shared low-priority thread (nice 10, which also lowers its I/O
    /// priority). One batch is read ahead: while the consumer records a batch, the next
    /// one is listed on the other core (a scan took twice as long taking turns). Nothing
    /// more is read ahead, so a slow consumer costs at most one batch of memory,
    /// concurrent scans take turns batch by batch, and dropping the stream stops the scan
    /// after the batch in hand. The last element is `.finished(summary)`.
    public func batches(_ path: String, recursive: Bool = true) -> AsyncStream<ScanOutput> {
        let readAhead = ScanReadAhead(ScanCursor(scanner: self, root: path, recursive: recursive))
        return AsyncStream(unfolding: {
            if Task.isCancelled { return nil }
            return await readAhead.next()
        })
    }
}

/// The next batch of a scan, listed while the consumer works on the current one.
final class ScanReadAhead: Sendable {
    private let cursor: ScanCursor
    private let pending = Mutex<Task<ScanOutput?, Never>?>(nil)

    init(_ cursor: ScanCursor) {
        self.cursor = cursor
    }

    /// Called by one consumer at a time (AsyncStream's unfolding closure): the cursor is
    /// driven by at most one listing task at any moment.
    func next() async -> ScanOutput? {
        let current = pending.withLock { $0.take() } ?? list()
        let output = await current.value
        if case .directories = output {
            let following = list()
            pending.withLock { $0 = following }
        }
        return output
    }

    private func list() -> Task<ScanOutput?, Never> {
        let cursor = self.cursor
        return Task { await LowPriorityWorker.shared.run { cursor.next() } }
    }
}

/// The resumable state of one scan: an explicit stack, so a scan can stop after any
/// directory and continue on the next request. Holds no open descriptor between calls.
/// `@unchecked Sendable`: it is only ever driven by one caller at a time (the blocking
/// loop above, or the single low-priority worker thread, one request after the other).
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

/// Identity of a directory for loop protection.
struct DeviceInode: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}

/// readdir(3) without a stat per entry.
enum DirectoryEntries {
    private static let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19

    /// Calls `body` with each entry's NUL-terminated name and d_type, skipping "." and "..".
    /// Returns 0, or the errno that stopped readdir early.
    static func forEach(_ dir: OpaquePointer, _ body: (UnsafePointer<CChar>, UInt8) -> Void) -> Int32 {
        while true {
            errno = 0
            guard let entry = readdir(dir) else { return errno }
            let name = UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: CChar.self)
            if name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0)) { continue }
            body(name, entry.pointee.d_type)
        }
    }

    /// Lists a directory by path; returns 0 or the errno of opendir/readdir.
    static func forEach(path: String, _ body: (UnsafePointer<CChar>, UInt8) -> Void) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return errno }
        guard let dir = fdopendir(fd) else {
            let err = errno
            close(fd)
            return err
        }
        defer { closedir(dir) }
        return forEach(dir, body)
    }

    static func entryType(_ mode: mode_t) -> UInt8 {
        switch mode & S_IFMT {
        case S_IFDIR: UInt8(DT_DIR)
        case S_IFREG: UInt8(DT_REG)
        case S_IFLNK: UInt8(DT_LNK)
        case S_IFIFO: UInt8(DT_FIFO)
        case S_IFSOCK: UInt8(DT_SOCK)
        case S_IFCHR: UInt8(DT_CHR)
        case S_IFBLK: UInt8(DT_BLK)
        default: UInt8(DT_UNKNOWN)
        }
    }
}

/// One long-lived thread at nice 10 that runs scan steps in arrival order. Idle, it blocks
/// in read(2) and costs nothing.
final class LowPriorityWorker: Sendable {
    static let shared = LowPriorityWorker()

    private final class Jobs: Sendable {
        let pending = Mutex<[@Sendable () -> Void]>([])
        func next() -> (@Sendable () -> Void)? { pending.withLock { $0.isEmpty ? nil : $0.removeFirst() } }
    }

    private let jobs = Jobs()
    /// Write end of the wake-up socket; nil when the thread could not be started (out of
    /// descriptors or threads), in which case steps run on the caller: slower, never a crash.
    private let wakeWrite: Int32?

    private init() {
        var fds: [Int32] = [-1, -1]
        // The Glibc module exposes neither eventfd nor pipe2; socketpair sets CLOEXEC atomically.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            wakeWrite = nil
            return
        }
        let (readFd, writeFd) = (fds[0], fds[1])
        _ = fcntl(writeFd, F_SETFL, fcntl(writeFd, F_GETFL) | O_NONBLOCK)
        let jobs = self.jobs
        do {
            try OSThread.detach(name: "photolala-scan", niceness: 10) {
                var buffer = [UInt8](repeating: 0, count: 64)
                while true {
                    let n = read(readFd, &buffer, buffer.count)
                    if n == 0 || (n < 0 && errno != EINTR) { return }
                    while let job = jobs.next() { job() }
                }
            }
            wakeWrite = writeFd
        } catch {
            close(readFd)
            close(writeFd)
            wakeWrite = nil
        }
    }

    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        guard let wakeWrite else { return body() }
        return await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            jobs.pending.withLock { $0.append { continuation.resume(returning: body()) } }
            var byte: UInt8 = 1
            // EAGAIN means wake-ups are already pending; the worker drains every job per wake-up.
            _ = write(wakeWrite, &byte, 1)
        }
    }
}
