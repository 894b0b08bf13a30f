/// Ingest: turns what the watcher sees into hashed files in the queue: settle, scan, hash, record.
#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Foundation
import Hashing
import Logging
import PhotolalaCore
import Queue
import ServiceLifecycle
import Watcher

/// Drives the pipeline up to "ready to upload": inotify events go through the settle
/// aggregator, scans reconcile directories with the queue, and the hasher pool reads
/// each new or changed file once. The watcher is a hint; the queue plus scans are the
/// truth, so an overflow or a restart costs a rescan, never a photo.
public actor IngestService: Service {
    public struct Options: Sendable, Equatable {
        public var watcher: WatcherOptions
        public var rescanInterval: Duration?
        public var hashWorkers: Int

        public init(_ watch: Settings.Watch, hashWorkers: Int = ProcessInfo.processInfo.activeProcessorCount) {
            watcher = WatcherOptions(folders: watch.folders, extensions: Set(watch.extensions), exclude: watch.exclude,
                                     followSymlinks: watch.followSymlinks, settle: watch.settle)
            rescanInterval = watch.rescanInterval
            self.hashWorkers = max(1, hashWorkers)
        }
    }

    let database: QueueDatabase
    var options: Options
    let logger: Logger
    let pool: HasherPool
    public nonisolated let hashMeter = RateMeter()
    var watcher: InotifyWatcher?
    var aggregator: SettleAggregator<ContinuousClock.Instant>
    var hashQueue: [String] = []
    var hashQueueHead = 0
    /// Files the queue holds as waiting for a hash that were never put in `hashQueue`:
    /// a crash's leftovers, and whatever a first scan recorded. A first scan of a million
    /// photos kept a million paths in memory (twice: the queue and `queued`), and doing so
    /// cost the scan more than writing them to the database; the hashers now read them
    /// back a chunk at a time when `hashQueue` runs dry. The id after which to look next;
    /// nil when none is left.
    var backlogCursor: Int64?
    /// Paths waiting to be hashed or being hashed. Byte for byte (`ExactPath`): an NFC and
    /// an NFD spelling of one name are two files, and one must not hide the other.
    var queued = Set<ExactPath>()
    var scanQueue: [(String, Bool)] = []
    var scanning = false
    /// While a scan runs: directories whose queue rows events changed (moved in, renamed,
    /// a file recorded), with the `changeEpoch` of the last change. A listing taken before
    /// such a change is out of date: trusting it would mark present files gone.
    var changedDuringScan: [String: Int] = [:]
    var changeEpoch = 0
    var currentScan: (path: String, recursive: Bool)?
    var lastScanAt: Date?
    var unreadable: [String: String] = [:]
    /// Names that are not valid UTF-8 (shown lossily), by the scan that found them: such
    /// files cannot be carried by path and are not backed up, which status must say —
    /// a log line alone is silent loss for whoever does not read the journal.
    var invalidNames = ExactKeyed<(count: Int, samples: [String])>()
    /// A change the queue could not record (a full disk): a rescan, retried with backoff
    /// until one goes through cleanly, puts back whatever was missed.
    var lostWrites = false
    var recovery: Task<Void, Never>?
    var pipelineTasks: [Task<Void, Never>] = []
    let settleSignal = WakeSignal()
    let hashSignal = WakeSignal()
    let scanSignal = WakeSignal()
    var onQueued: @Sendable () -> Void = {}
    var onChange: @Sendable () async -> Void = {}

    /// SHA-256s for signed uploads, taken in the hashing pass when the uploader wants them.
    public nonisolated let payloadDigests: PayloadDigests

    public init(database: QueueDatabase, options: Options, logger: Logger, payloadDigests: PayloadDigests = PayloadDigests()) {
        self.database = database
        self.payloadDigests = payloadDigests
        self.options = options
        self.logger = logger
        pool = HasherPool(workers: options.hashWorkers)
        aggregator = SettleAggregator(options: options.watcher)
    }

    /// `onQueued`: a file got its hash (uploaders may have work). `onChange`: status changed.
    public func setHooks(onQueued: @escaping @Sendable () -> Void, onChange: @escaping @Sendable () async -> Void) {
        self.onQueued = onQueued
        self.onChange = onChange
    }

    public func run() async throws {
        // Files a crash caught before their hash was stored are simply read again.
        armBacklog()
        if backlogCursor != nil { logger.info("resuming: some files still need their hash") }
        startWatcher()
        // As many files per hasher thread as it hashes at once, and a few more: while one
        // batch of results is being written the threads go on with the next files.
        for worker in 0..<pool.workers * (pool.filesAtOnce + Self.filesInFlightPerWorker - 1) {
            pipelineTasks.append(Task { await self.hashLoop(worker) })
        }
        pipelineTasks.append(Task { await self.settleLoop() })
        pipelineTasks.append(Task { await self.scanLoop() })
        pipelineTasks.append(Task { await self.rescanTimer() })
        try? await gracefulShutdown()
        watcher?.stop()
        recovery?.cancel()
        for t in pipelineTasks { t.cancel() }
        pool.shutdown()
    }

    /// New watch settings on reload: the watcher starts over (and rescans, which costs no re-hash).
    public func apply(_ new: Options) {
        guard new != options else { return }
        let watchChanged = new.watcher != options.watcher
        options = new
        if watchChanged {
            logger.notice("watch settings changed: restarting the watcher")
            watcher?.stop()
            aggregator = SettleAggregator(options: new.watcher)
            startWatcher()
        }
    }

    /// `photolalactl rescan`.
    public func rescanAll(reason: String) {
        logger.info("rescanning every watched folder (\(reason))")
        watcher?.rewatch()
        for root in options.watcher.folders { requestScan(root, recursive: true) }
    }

    /// A file the uploader found changed: read it again after it settles.
    public func rehash(_ path: String) {
        aggregator.markUnsettled(path, now: .now)
        Task { await settleSignal.notify() }
    }

    // MARK: watcher events

    private func startWatcher() {
        let w = InotifyWatcher(options: options.watcher, logger: logger)
        do {
            try w.start()
        } catch {
            logger.error("cannot watch the folders: \(error); falling back to periodic scans")
            rescanAll(reason: "no inotify")
            return
        }
        watcher = w
        let events = w.events()
        pipelineTasks.append(Task {
            for await event in events { await self.handle(event) }
        })
    }

    private func handle(_ event: WatchEvent) async {
        let now = ContinuousClock.now
        do {
            switch event {
            case .fileWritten(let path):
                aggregator.fileWritten(path, now: now)
            case .fileMoved(let from, let to):
                noteChange(PathNames.parent(of: from))
                noteChange(PathNames.parent(of: to))
                aggregator.moved(from: from, to: to)
                if try !database.renameFile(from: from, to: to) {
                    aggregator.fileWritten(to, now: now)
                } else {
                    rehashMoved(from: from, to: to, now: now)
                }
            case .removed(let path):
                aggregator.removed(path)
                dropQueued(under: path)
                try database.markGone(path: path)
            case .directoryMoved(let from, let to):
                noteChange(from)
                noteChange(to)
                aggregator.moved(from: from, to: to)
                scansFollow(from: from, to: to)
                try database.renameDirectory(from: from, to: to)
                rehashMoved(from: from, to: to, now: now)
                logger.debug("directory renamed", metadata: ["from": "\(from)", "to": "\(to)"])
            case .scanNeeded(let path, let reason):
                switch reason {
                case .initial, .folderAvailable, .newDirectory, .unwatched:
                    requestScan(path, recursive: true)
                case .overflow:
                    logger.warning("the kernel's event queue overflowed: rescanning \(path)")
                    requestScan(path, recursive: true)
                case .invalidName:
                    requestScan(path, recursive: false)
                }
            case .folderMissing(let root):
                logger.warning("watched folder missing or unreadable (retrying): \(root)")
                aggregator.removed(root)
                dropQueued(under: root)
            case .folderAvailable(let root):
                logger.notice("watched folder available again: \(root)")
            case .watchLimitReached:
                break
            }
        } catch {
            logger.error("cannot record a change in the queue: \(error)", metadata: ["event": "\(event)"])
            writeFailed()
        }
        await settleSignal.notify()
        await onChange()
    }

    /// Files renamed (or inside a renamed directory) while waiting to be hashed or being
    /// hashed: that hash is of a path that no longer exists and will be dropped, while the
    /// queue row moved to the new name still has no hash. Without this the file sat
    /// unhashed until the next rescan (hours) — or for good with rescans off.
    private func rehashMoved(from: String, to: String, now: ContinuousClock.Instant) {
        let prefix = from.hasSuffix("/") ? from : from + "/"
        let moved = queued.filter { $0.string.utf8.elementsEqual(from.utf8) || $0.string.utf8.starts(with: prefix.utf8) }
        for old in moved {
            queued.remove(old)
            aggregator.fileWritten(to + String(Substring(old.string.utf8.dropFirst(from.utf8.count))), now: now)
        }
    }

    private func dropQueued(under path: String) {
        let prefix = path.hasSuffix("/") ? path : path + "/"
        let before = queued.count
        queued = queued.filter { !$0.string.utf8.elementsEqual(path.utf8) && !$0.string.utf8.starts(with: prefix.utf8) }
        if queued.count != before {
            hashQueue = Array(hashQueue[hashQueueHead...]).filter { queued.contains(ExactPath($0)) }
            hashQueueHead = 0
        }
    }

    // MARK: settle

    private func settleLoop() async {
        while !Task.isCancelled {
            let since = await settleSignal.current
            let ready = aggregator.due(now: .now)
            for item in ready {
                switch item {
                case .file(let path): observe(path)
                case .scanDirectory(let dir, let recursive): requestScan(dir, recursive: recursive)
                }
            }
            if !ready.isEmpty { await onChange() }
            let deadline = aggregator.nextDeadline
            await settleSignal.wait(since: since, until: deadline)
        }
    }

    /// A settled file: record what it is now, and hash it if it is new or changed.
    private func observe(_ path: String) {
        var st = stat()
        let rc = options.watcher.followSymlinks ? stat(path, &st) : lstat(path, &st)
        if rc != 0 {
            if errno == ENOENT || errno == ENOTDIR { try? database.markGone(path: path) }
            return
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return }
        // Handed on by a scan, a roll-up or maxHold rather than by its CLOSE_WRITE, a file
        // may still be open and growing (IN_MODIFY is not watched): its mtime says when it
        // was last written. Not left alone for `settle` yet: wait until it has been.
        if let wait = settleLeft(mtimeSec: Int64(st.st_mtim.tv_sec), mtimeNsec: Int64(st.st_mtim.tv_nsec)) {
            aggregator.markUnsettled(path, now: .now - (options.watcher.settle - wait))
            return
        }
        noteChange(PathNames.parent(of: path))
        do {
            for p in try database.observe([ObservedFile(path: path, identity: FileHasher.identity(of: st))]) { enqueueHash(p) }
        } catch {
            logger.error("cannot record a file in the queue: \(error)", metadata: ["path": "\(path)"])
            writeFailed()
        }
    }

    /// How long until a file last modified at its mtime has been left alone for `settle`;
    /// nil when it already has. An mtime in the future (a skewed clock, a touched file)
    /// proves nothing, so it counts as settled.
    private func settleLeft(mtimeSec: Int64, mtimeNsec: Int64, now: Date = Date()) -> Duration? {
        let settle = Units.seconds(options.watcher.settle)
        let age = Self.age(mtimeSec: mtimeSec, mtimeNsec: mtimeNsec, now: now)
        guard age >= 0, age < settle else { return nil }
        return .milliseconds(Int64(((settle - age) * 1000).rounded(.up)))
    }

    /// Seconds since a modification time (negative when it is in the future).
    static func age(mtimeSec: Int64, mtimeNsec: Int64, now: Date = Date()) -> Double {
        now.timeIntervalSince1970 - (Double(mtimeSec) + Double(mtimeNsec) / 1e9)
    }

    // MARK: scans

    /// A directory renamed: scans waiting for it (a new directory's, typically: the files
    /// written before its watch existed are only found by that scan) look at its new
    /// place, and a scan walking through it now may miss it: it is looked at again.
    private func scansFollow(from: String, to: String) {
        func renamed(_ path: String) -> String? {
            if path == from { return to }
            guard path.hasPrefix(from == "/" ? "/" : from + "/") else { return nil }
            return to + path.dropFirst(from.count)
        }
        scanQueue = scanQueue.map { (renamed($0.0) ?? $0.0, $0.1) }
        if let current = currentScan {
            if let moved = renamed(current.path) {
                requestScan(moved, recursive: current.recursive)
            } else if current.recursive, from.hasPrefix(current.path == "/" ? "/" : current.path + "/") {
                requestScan(to, recursive: true)
            }
        }
    }

    private func noteChange(_ dir: String) {
        guard scanning else { return }
        changeEpoch += 1
        changedDuringScan[dir] = changeEpoch
    }

    /// Whether `dir`, or a directory above it, changed after `epoch`.
    private func changed(_ dir: String, since epoch: Int) -> Bool {
        guard !changedDuringScan.isEmpty else { return false }
        var current = dir
        while true {
            if let at = changedDuringScan[current], at > epoch { return true }
            let up = PathNames.parent(of: current)
            if up == current || up.isEmpty { return false }
            current = up
        }
    }

    /// The paths not inside another one of them.
    static func outermost(_ paths: some Sequence<String>) -> [String] {
        var kept: [String] = []
        for path in paths.sorted() {
            if let last = kept.last, path == last || path.hasPrefix(last == "/" ? "/" : last + "/") { continue }
            kept.append(path)
        }
        return kept
    }

    private func requestScan(_ path: String, recursive: Bool) {
        // Byte for byte: an NFD twin of a queued directory is another directory to scan.
        if scanQueue.contains(where: { $0.0.utf8.elementsEqual(path.utf8) && ($0.1 || !recursive) }) { return }
        scanQueue.append((path, recursive))
        Task { await scanSignal.notify() }
    }

    private func scanLoop() async {
        while !Task.isCancelled {
            let since = await scanSignal.current
            guard !scanQueue.isEmpty else {
                await scanSignal.wait(since: since, until: nil as ContinuousClock.Instant?)
                continue
            }
            let (path, recursive) = scanQueue.removeFirst()
            workSinceRelease = true
            currentScan = (path, recursive)
            scanning = true
            changedDuringScan.removeAll()
            await onChange()
            await scan(path, recursive: recursive)
            scanning = false
            currentScan = nil
            changedDuringScan.removeAll()
            lastScanAt = Date()
            await onChange()
            noteMaybeIdle()
        }
    }

    private func scan(_ root: String, recursive: Bool) async {
        let started = ContinuousClock.now
        let scanner = DirectoryScanner(options: options.watcher, logger: logger)
        var summary: ScanSummary?
        // A folder the queue knows nothing of (a first scan) can have nothing gone.
        let knewFiles = (try? database.knowsFiles(under: root)) ?? true
        // A first scan lists and records the whole tree before anything is read: on a NAS's
        // two cores the hashers competing with the listing made it six times slower than
        // `find` (docs/benchmarks.md), and the status total is right sooner. Files stay in
        // the hash queue meanwhile; events are still recorded.
        if !knewFiles {
            hashHeld = true
            database.bulkWrites(true)
        }
        defer {
            if !knewFiles {
                database.bulkWrites(false)
                armBacklog()
            }
            if hashHeld {
                hashHeld = false
                Task { await hashSignal.notify() }
            }
        }
        let batches = scanner.batches(root, recursive: recursive)
        var iterator = batches.makeAsyncIterator()
        // The scanner lists the next batch while this one is recorded, so a listing may
        // have started as early as the previous request: changes since then make it suspect.
        var previousRequest = changeEpoch
        while true {
            // Listings are taken while this actor goes on handling events.
            let listedAfter = previousRequest
            previousRequest = changeEpoch
            guard let output = await iterator.next() else { break }
            switch output {
            case .directories(let listings):
                var fresh: [DirectoryListing] = []
                fresh.reserveCapacity(listings.count)
                for listing in listings {
                    if changed(listing.path, since: listedAfter) {
                        // Events moved or recorded files here after it was listed: list it
                        // again once it is quiet instead of calling those files gone.
                        logger.debug("directory changed while scanned; listing it again", metadata: ["dir": "\(listing.path)"])
                        aggregator.directoryScanRequested(listing.path, recursive: false, now: .now)
                        continue
                    }
                    fresh.append(DirectoryListing(dir: listing.path, files: listing.files.map {
                        ObservedFile(path: $0.path, identity: FileIdentity(device: $0.device, inode: $0.inode, size: $0.size,
                                                                            mtimeSec: $0.mtimeSeconds, mtimeNsec: $0.mtimeNanoseconds))
                    }))
                }
                do {
                    // One batch, one read and at most one write transaction.
                    let need = try database.reconcileDirectories(fresh, firstScan: !knewFiles)
                    // A first scan's files wait in the database: the backlog reads them back.
                    guard knewFiles else { continue }
                    let now = Date()
                    for f in need { admit(f.path, mtimeSec: f.identity.mtimeSec, mtimeNsec: f.identity.mtimeNsec, now: now) }
                } catch {
                    logger.error("cannot record a scan in the queue: \(error)", metadata: ["dir": "\(fresh.first?.dir ?? root)"])
                    writeFailed()
                }
            case .finished(let s):
                summary = s
            }
        }
        await settleSignal.notify()
        guard var summary else { return }
        if !summary.rootListed, access(root, F_OK) != 0, errno == ENOENT {
            // Renamed or deleted before its scan ran (events said where it went): gone, not unreadable.
            summary.unreadable.removeAll { $0.path == root }
        }
        if recursive {
            for dir in invalidNames.keys where dir == root || dir.hasPrefix(root == "/" ? "/" : root + "/") {
                invalidNames.removeValue(forKey: dir)
            }
        }
        invalidNames[root] = summary.invalidNameCount > 0 ? (summary.invalidNameCount, summary.invalidNames) : nil
        for problem in summary.unreadable {
            if unreadable[problem.path] == nil {
                // Beyond PATH_MAX no path names it (nothing the daemon does by path can reach it):
                // permissions are not the advice then.
                let advice = problem.reason == String(cString: strerror(ENAMETOOLONG))
                    ? "its path is longer than the system allows (4096 bytes): move it closer to the top of the folder"
                    : "the daemon's user needs read access (see photolalad(8), Permissions)"
                logger.warning("cannot read a folder: \(problem.path): \(problem.reason) — \(advice)")
            }
            unreadable[problem.path] = problem.reason
        }
        for path in unreadable.keys where path == root || path.hasPrefix(root + "/") {
            if !summary.unreadable.contains(where: { $0.path == path }) { unreadable[path] = nil }
        }
        if recursive && summary.rootListed && knewFiles {
            // Directories the queue knows but the scan did not find are gone — except under
            // a folder we could not read, where absence proves nothing.
            let blind = summary.unreadable.map(\.path)
            let visited = summary.visitedDirectories
            // Directories that events filled during the scan (a folder renamed into one
            // listed earlier, files recorded in a directory made after its parent was
            // listed) were not visited but are not gone either.
            let changed = Self.outermost(changedDuringScan.keys.filter { $0 == root || $0.hasPrefix(root + "/") })
            guard changed.count <= 256 else {
                logger.debug("the tree changed too much during the scan to tell what vanished; the next scan will", metadata: ["root": "\(root)"])
                return
            }
            do {
                let swept = try database.sweepDirectories(under: root, visited: visited, excluding: blind + changed)
                if swept > 0 { logger.info("\(swept) files are gone from \(root)") }
            } catch {
                logger.error("cannot record vanished files: \(error)")
                writeFailed()
            }
        }
        // From the first listing to the last write, sweep included: the whole scan.
        let elapsed = ContinuousClock.now - started
        logger.info("scanned \(root)", metadata: ["files": "\(summary.files)", "directories": "\(summary.directories)",
                                                  "ms": "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)"])
    }

    private func rescanTimer() async {
        while !Task.isCancelled {
            guard let interval = options.rescanInterval else {
                try? await Task.sleep(for: .seconds(3600))
                continue
            }
            // ±10% so many NASes (and many folders) do not rescan in lockstep.
            let jitter = Double.random(in: 0.9...1.1)
            try? await Task.sleep(for: .milliseconds(Int64(Units.seconds(interval) * 1000 * jitter)))
            if Task.isCancelled { return }
            rescanAll(reason: "periodic safety net")
        }
    }

    // MARK: recovery from failed queue writes

    private func writeFailed() {
        lostWrites = true
        guard recovery == nil else { return }
        recovery = Task { await self.recover() }
    }

    /// Rescans every folder after a failed write, 5 s, 10 s, … up to 5 minutes apart,
    /// until a whole rescan records without an error. Scans re-read nothing already
    /// hashed, so a long outage costs listings, not hashing.
    private func recover() async {
        var delay = 5.0
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(delay))
            if Task.isCancelled { break }
            lostWrites = false
            rescanAll(reason: "putting back what the queue could not record")
            while (scanning || !scanQueue.isEmpty) && !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
            }
            if !lostWrites {
                logger.notice("the queue records changes again; nothing was missed")
                break
            }
            delay = min(delay * 2, 300)
        }
        recovery = nil
    }

    // MARK: hashing

    static let filesInFlightPerWorker = 4

    /// A file found waiting for its hash by a scan or in the backlog: hashed now, or, if
    /// it was written moments ago and may still be growing, once it has settled (true:
    /// the settle loop has a new deadline to wake for).
    @discardableResult
    private func admit(_ path: String, mtimeSec: Int64, mtimeNsec: Int64, now: Date) -> Bool {
        guard let wait = settleLeft(mtimeSec: mtimeSec, mtimeNsec: mtimeNsec, now: now) else {
            enqueueHash(path)
            return false
        }
        // Settles from its last write (observe() checks again then).
        aggregator.fileWritten(path, now: .now - (options.watcher.settle - wait))
        return true
    }

    /// Points the backlog at the first file waiting for a hash. Never forward: files
    /// behind the cursor that wait again (a crash's, or ones whose read was thrown away)
    /// would be skipped; going back costs a re-read of rows that are filtered out.
    private func armBacklog() {
        do {
            guard let start = try database.unhashedStart() else { return }
            backlogCursor = min(backlogCursor ?? start, start)
            Task { await hashSignal.notify() }
        } catch {
            logger.error("cannot read the files waiting for a hash: \(error); the next scan finds them")
        }
    }

    /// Moves the next chunk of the backlog into `hashQueue`; false when nothing is left to
    /// take (or the database cannot be read: the next rescan finds those files waiting,
    /// and the next start or first scan arms the backlog again).
    private func refillFromBacklog() -> Bool {
        guard let after = backlogCursor else { return false }
        let files: [UnhashedFile]
        do {
            files = try database.unhashedFiles(after: after, limit: Self.backlogChunk)
        } catch {
            logger.error("cannot read the files waiting for a hash: \(error); the next scan finds them")
            backlogCursor = nil
            return false
        }
        guard let last = files.last else {
            backlogCursor = nil
            return false
        }
        backlogCursor = last.id
        let now = Date()
        var settling = false
        // Files already queued, in flight or being recorded are skipped by enqueueHash.
        for f in files where admit(f.path, mtimeSec: f.mtimeSec, mtimeNsec: f.mtimeNsec, now: now) { settling = true }
        if settling { Task { await settleSignal.notify() } }
        return true
    }

    /// Enough to keep every hasher busy between two reads of the backlog.
    static let backlogChunk = 512

    private func enqueueHash(_ path: String) {
        guard !recording.contains(ExactPath(path)), queued.insert(ExactPath(path)).inserted else { return }
        hashQueue.append(path)
        workSinceRelease = true
        // One wake-up for a scan batch's thousand files, not a task each.
        if !hashWakePending {
            hashWakePending = true
            Task { await self.wakeHashLoops() }
        }
    }

    var hashWakePending = false

    private func wakeHashLoops() async {
        // Cleared before notifying: a file queued after this gets a wake-up of its own.
        hashWakePending = false
        await hashSignal.notify()
    }

    private func nextToHash() -> String? {
        repeat {
            while hashQueueHead < hashQueue.count {
                let path = hashQueue[hashQueueHead]
                hashQueueHead += 1
                if hashQueueHead > 4096 && hashQueueHead * 2 > hashQueue.count {
                    hashQueue.removeFirst(hashQueueHead)
                    hashQueueHead = 0
                }
                if queued.contains(ExactPath(path)) { return path }
            }
        } while refillFromBacklog()
        return nil
    }

    private func hashLoop(_ worker: Int) async {
        while !Task.isCancelled {
            let since = await hashSignal.current
            guard !hashHeld, let path = nextToHash() else {
                await hashSignal.wait(since: since, until: nil as ContinuousClock.Instant?)
                continue
            }
            hashing += 1
            let result = await pool.hash(path: path, followSymlinks: options.watcher.followSymlinks, sha256: payloadDigests.wanted)
            hashing -= 1
            queued.remove(ExactPath(path))
            recording.insert(ExactPath(path))
            hashed.append((path, result))
            if !recordScheduled {
                recordScheduled = true
                // During a scan its own transactions come first: results are written a
                // tenth of a second's worth at a time rather than two or three per commit.
                let gather = scanning
                Task {
                    if gather { try? await Task.sleep(for: .milliseconds(100)) }
                    await self.recordHashed()
                }
            }
        }
    }

    var hashing = 0
    /// Set while a first scan lists a tree the queue knew nothing of.
    var hashHeld = false
    /// Results waiting to be written. Small photos hash faster than one transaction per
    /// file commits, so results that arrive while this actor is busy are recorded
    /// together; a lone file is recorded at once (one task hop later), or within 0.1 s
    /// while a scan runs.
    var hashed: [(String, HasherPool.Result)] = []
    var recordScheduled = false
    /// Paths in `hashed`: not queued again until their result is written, as if still
    /// being read (the queue says "pending" until then, and a scan would read them twice).
    /// A newer version that turns up meanwhile is not lost: its older result is `.stale`
    /// and the file settles again.
    var recording = Set<ExactPath>()

    private func recordHashed() async {
        recordScheduled = false
        let results = hashed
        hashed.removeAll(keepingCapacity: true)
        var digests: [HashedFile] = []
        var elapsed: [Duration] = []
        var recorded = false
        func flush() {
            guard !digests.isEmpty else { return }
            do {
                for (i, outcome) in try database.recordHashes(digests).enumerated() {
                    let file = digests[i]
                    switch outcome {
                    case .recorded(let state):
                        // µs from open to the last stat: the benchmark's figure for the hasher.
                        let (seconds, attoseconds) = elapsed[i].components
                        logger.debug("hashed", metadata: ["path": "\(file.path)", "md5": "\(file.md5)", "state": "\(state.publicName)",
                                                          "us": "\(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)"])
                        recorded = true
                    case .stale:
                        aggregator.markUnsettled(file.path, now: .now)
                    case .unknown:
                        break
                    }
                }
            } catch {
                logger.error("cannot record hashes in the queue: \(error)", metadata: ["files": "\(digests.count)", "first": "\(digests[0].path)"])
                writeFailed()
            }
            digests.removeAll()
            elapsed.removeAll()
        }
        // In arrival order: a failure for a path is applied after its earlier successes.
        for (path, result) in results {
            switch result {
            case .success(let digest):
                hashMeter.add(digest.identity.size)
                elapsed.append(digest.elapsed)
                digests.append(HashedFile(path: path, identity: digest.identity, md5: digest.md5))
                if let sha256 = digest.sha256 { payloadDigests.store(md5: digest.md5, identity: digest.identity, sha256: sha256) }
            case .failure(let failure):
                flush()
                record(path, failure)
            }
        }
        flush()
        for (path, _) in results { recording.remove(ExactPath(path)) }
        if recorded { onQueued() }
        await settleSignal.notify()
        await onChange()
        noteMaybeIdle()
    }

    // MARK: memory after a burst

    /// Set by scans and hashing; cleared when memory is given back.
    var workSinceRelease = false
    var idleCheckScheduled = false

    private var isIdle: Bool {
        hashQueueHead >= hashQueue.count && backlogCursor == nil && hashing == 0 && hashed.isEmpty && !scanning && scanQueue.isEmpty
    }

    /// After a burst of work (a first scan queues and hashes a hundred thousand files),
    /// the heap keeps what the burst freed and SQLite keeps its page caches: 10 to 15 MB
    /// the daemon no longer needs. Two seconds after the work runs out, give it back.
    private func noteMaybeIdle() {
        guard workSinceRelease, isIdle, !idleCheckScheduled else { return }
        idleCheckScheduled = true
        Task {
            try? await Task.sleep(for: .seconds(2))
            await self.releaseMemoryIfStillIdle()
        }
    }

    private func releaseMemoryIfStillIdle() {
        idleCheckScheduled = false
        // Busy again: the next time the work runs out does it.
        guard isIdle else { return }
        workSinceRelease = false
        // Collections keep the capacity of their largest moment; new ones start small.
        queued = []
        hashQueue = []
        hashQueueHead = 0
        recording = []
        hashed = []
        database.releaseMemory()
        photolala_trim_malloc()
        photolala_release_code_pages()
    }

    private func record(_ path: String, _ failure: FileHasher.Failure) {
        do {
            switch failure {
            case .changed:
                logger.debug("changed while being read; it settles again", metadata: ["path": "\(path)"])
                aggregator.markUnsettled(path, now: .now)
            case .vanished, .notRegularFile:
                try database.markGone(path: path)
            case .unreadable(let why):
                logger.warning("cannot read a file: \(why)", metadata: ["path": "\(path)"])
                try database.recordUnreadable(path: path, reason: why)
            }
        } catch {
            logger.error("cannot record a hash in the queue: \(error)", metadata: ["path": "\(path)"])
            writeFailed()
        }
    }

    // MARK: status

    public func contribute(to s: inout DaemonStatus) {
        if let w = watcher?.snapshot() {
            s.watch.folders = w.folders
            s.watch.directories = w.directories
            s.watch.missingFolders = w.missingFolders
            s.watch.watchLimitReached = w.watchLimitReached
            s.watch.maxUserWatches = w.maxUserWatches
            s.watch.unwatchedDirectories = w.unwatchedDirectories
        }
        s.watch.scanning = scanning || !scanQueue.isEmpty
        s.watch.lastScanAt = lastScanAt.map(Timestamp.string)
        // Files being read now, not the ones waiting their turn in the pool.
        let busy = min(hashing, pool.busy, s.queue.pending)
        s.queue.hashing = busy
        s.queue.pending -= busy
        s.queue.hashRate = hashMeter.rate()
        let invalid = invalidNames.values.reduce(0) { $0 + $1.count }
        if invalid > 0 {
            let samples = invalidNames.values.flatMap(\.samples).sorted().prefix(3).map { "\"\($0)\"" }
            s.problems.append("\(invalid) file\(invalid == 1 ? "" : "s") or folder\(invalid == 1 ? " is" : "s are") not backed up: "
                + "the name\(invalid == 1 ? " is" : "s are") not valid UTF-8 (\(samples.joined(separator: ", "))\(invalid > 3 ? ", …" : "")); "
                + "rename \(invalid == 1 ? "it" : "them") (for example with convmv -f latin1 -t utf-8)")
        }
        if !unreadable.isEmpty {
            let names = unreadable.keys.sorted()
            // With the reason: "Permission denied" and "File name too long" need different fixes.
            let shown = names.prefix(5).map { "\($0) (\(unreadable[$0] ?? "?"))" }
            s.problems.append("\(names.count) folder\(names.count == 1 ? "" : "s") cannot be read by the daemon: \(shown.joined(separator: ", "))\(names.count > 5 ? ", …" : "")")
        }
    }
}
