/// Ingest: turns what the watcher sees into hashed files in the queue: settle, scan, hash, record.
#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Digests
import Foundation
import Logging
import PhotolalaCore
import Queue
import ServiceLifecycle
import Watcher

/// The first stage around the queue: inotify events go through the settle aggregator,
/// scans reconcile directories with the queue, and the hasher pool reads each new or
/// changed file once, moving its row from waiting (settled) to hashed. The watcher is a
/// hint; the queue plus scans are the truth, so an overflow or a restart costs a rescan,
/// never a photo. It never calls another stage: the queue's `readyToUpload` signal wakes
/// the uploader, and its `needsHash` signal brings back files the uploader found changed.
///
/// The decisions live in values (`HashQueue`, `ScanTracker`, `SettleAggregator`,
/// `SettleRule`, `FolderProblems`, `Backoff`); this actor performs the I/O around them.
/// It runs on three `StageLoop`s like every stage: settling (its step hands settled files
/// on and returns the next settle deadline), scanning (one requested scan a step, or wait
/// for the next request or the periodic rescan) and hashing (a worker per batch in
/// flight, woken by files to read and by the queue's `needsHash`). The loops and the work
/// its synchronous code starts are children of `run()`.
package actor IngestService: Service, Stage {
    /// As many files per hasher thread as it hashes at once, and a few more: while one
    /// batch of results is being written the threads go on with the next files.
    static let filesInFlightPerWorker = 4
    /// The most files one hash step asks the pool for at once.
    static let hashBatch = 16
    /// Hash results waiting to be written, at most, before the hash loops wait.
    static let unrecordedLimit = 4096

    private let hashMeter = RateMeter()
    /// SHA-256s for signed uploads, taken in the hashing pass when the uploader wants them.
    private let payloadDigests: PayloadDigests

    /// The queue, clock, log, status feed and audit trail (`Stage` reads them through it).
    package nonisolated let context: StageContext
    private var options: Options
    private let pool: HasherPool
    /// Hash loops running at once: as many files per thread as it hashes at once, and a few more.
    private nonisolated var hashLoops: Int { pool.workers * (pool.filesAtOnce + Self.filesInFlightPerWorker - 1) }
    private var watcher: InotifyWatcher?
    private var aggregator: SettleAggregator<ContinuousClock.Instant>
    private var hashes = HashQueue()
    private var scans = ScanTracker()
    private var lastScanAt: Date?
    private var folderProblems = FolderProblems()
    private var recovery = WriteRecovery()
    private let tasks = ServiceTasks()
    private let settling: StageLoop
    private let scanning: StageLoop
    private let hashLoop: StageLoop
    /// The queue's `needsHash` as last seen by a hash worker: a newer one arms the backlog.
    private var needsHashSeen = 0
    /// When the periodic safety-net rescan is due (`watch.rescan_interval`); nil: never.
    private var rescanAt: Date?
    /// Files being read by the pool now.
    private var hashing = 0
    /// Set while a first scan lists a tree the queue knew nothing of.
    private var hashHeld = false
    /// Results waiting to be written. Small photos hash faster than one transaction per
    /// file commits, so results that arrive while this actor is busy are recorded
    /// together; a lone file is recorded at once (one task hop later), or within 0.1 s
    /// while a scan runs.
    private var hashed: [(String, HasherPool.Result)] = []
    private var recordScheduled = false
    private var hashWakePending = false
    /// A hash loop is reading the next chunk of the backlog.
    private var refilling = false
    private var memory = MemoryRelease()

    package init(context: StageContext, options: Options, payloadDigests: PayloadDigests = PayloadDigests()) {
        self.context = context
        let (database, clock) = (context.database, context.clock)
        self.payloadDigests = payloadDigests
        self.options = options
        pool = HasherPool(workers: options.hashWorkers)
        aggregator = SettleAggregator(options: options.watcher)
        settling = StageLoop(clock: clock)
        scanning = StageLoop(clock: clock)
        // Files put back to be hashed outside a scan (the uploader found a source changed,
        // `retry` of unreadable files) wait in the queue: the backlog reads them from there.
        hashLoop = StageLoop(clock: clock, wakes: [.signal(database.signals.needsHash)])
    }

    package func run() async throws {
        // Files a crash caught before their hash was stored are simply read again.
        needsHashSeen = database.signals.needsHash.generation
        await armBacklog()
        if hashes.backlogCursor != nil { logger.info("resuming: some files still need their hash") }
        startWatcher()
        planRescan()
        let hashWorkers = hashLoops
        let (tasks, pool, settling, scanning, hashLoop) = (self.tasks, self.pool, self.settling, self.scanning, self.hashLoop)
        _ = await cancelWhenGracefulShutdown {
            // The pool answers the files it was given at once when stopping: the loops
            // waiting on it end without waiting for the file being read.
            await withTaskCancellationHandler {
                await withDiscardingTaskGroup { group in
                    group.addTask { await settling.run { _ in await self.settleStep() } }
                    group.addTask { await scanning.run { _ in await self.scanStep() } }
                    group.addTask { await hashLoop.run(workers: hashWorkers) { _ in await self.hashStep() } }
                    group.addTask { await tasks.run() }
                }
            } onCancel: {
                pool.shutdown()
            }
        }
        watcher?.stop()
        pool.shutdown()
    }

    /// New watch settings on reload: the watcher starts over (and rescans, which costs no re-hash).
    package func apply(_ new: Options) {
        guard new != options else { return }
        let watchChanged = new.watcher != options.watcher
        let rescanChanged = new.rescanInterval != options.rescanInterval
        options = new
        if rescanChanged {
            planRescan()
            scanning.wake()
        }
        if watchChanged {
            logger.notice("watch settings changed: restarting the watcher")
            watcher?.stop()
            aggregator = SettleAggregator(options: new.watcher)
            startWatcher()
        }
    }

    /// `photolalactl rescan`.
    package func rescanAll(reason: String) {
        logger.info("rescanning every watched folder (\(reason))")
        watcher?.rewatch()
        for root in options.watcher.folders { requestScan(root, recursive: true) }
    }

    /// Ingest's own part of the status: the watch, scans, files being read now, the hash
    /// rate and the folders it cannot back up. It reads no other stage's fields.
    package func contribute(to s: inout DaemonStatus) {
        watcher?.snapshot().fill(&s.watch)
        s.watch.scanning = scans.isBusy
        s.watch.lastScanAt = lastScanAt.map(Timestamp.string)
        // Files being read now, not the ones waiting their turn in the pool; counted out
        // of `pending` when the status is assembled.
        s.queue.hashing = min(hashing, pool.busy)
        s.queue.hashRate = hashMeter.rate()
        s.problems += folderProblems.statusLines()
        s.names += folderProblems.names
    }

    // MARK: events

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
        // Ends when the watcher stops (a reload starts another).
        let events = w.events()
        tasks.spawn {
            for await event in events { await self.handle(event) }
        }
    }

    private func handle(_ event: WatchEvent) async {
        let now = ContinuousClock.now
        do {
            switch event {
            case .fileWritten(let path):
                aggregator.fileWritten(path, now: now)
            case .fileMoved(let from, let to):
                scans.noteChange(PathNames.parent(of: from))
                scans.noteChange(PathNames.parent(of: to))
                aggregator.moved(from: from, to: to)
                if try await !database.renameFile(from: from, to: to, now: clock.now()) {
                    aggregator.fileWritten(to, now: now)
                } else {
                    rehashMoved(from: from, to: to, now: now)
                }
            case .removed(let path):
                aggregator.removed(path)
                hashes.drop(within: path)
                try await database.markGone(path: path, now: clock.now())
            case .directoryMoved(let from, let to):
                scans.noteChange(from)
                scans.noteChange(to)
                aggregator.moved(from: from, to: to)
                if let again = scans.follow(from: from, to: to) { requestScan(again.path, recursive: again.recursive) }
                try await database.renameDirectory(from: from, to: to, now: clock.now())
                rehashMoved(from: from, to: to, now: now)
                logger.debug("directory renamed", metadata: ["from": "\(from)", "to": "\(to)"])
            case .scanNeeded(let path, let reason):
                if reason == .overflow { logger.warning("the kernel's event queue overflowed: rescanning \(path)") }
                requestScan(path, recursive: reason.isRecursive)
            case .folderMissing(let root):
                logger.warning("watched folder missing or unreadable (retrying): \(root)")
                aggregator.removed(root)
                hashes.drop(within: root)
            case .folderAvailable(let root):
                logger.notice("watched folder available again: \(root)")
            case .watchLimitReached:
                break
            }
        } catch {
            logger.error("cannot record a change in the queue: \(error)", metadata: ["event": "\(event)"])
            writeFailed()
        }
        settling.wake()
        statusChanges.changed()
    }

    /// Files renamed (or inside a renamed directory) while waiting to be hashed or being
    /// hashed settle again under their new name (see `HashQueue.moved`).
    private func rehashMoved(from: String, to: String, now: ContinuousClock.Instant) {
        for path in hashes.moved(from: from, to: to) { aggregator.fileWritten(path, now: now) }
    }

    // MARK: settling

    /// Hands on what has settled; looks again at the next settle deadline or when an
    /// event (or a file found still being written) gives it more.
    private func settleStep() async -> StageLoop.Next {
        let ready = aggregator.due(now: .now)
        for item in ready {
            switch item {
            case .file(let path): await observe(path)
            case .scanDirectory(let dir, let recursive): requestScan(dir, recursive: recursive)
            }
        }
        if !ready.isEmpty { statusChanges.changed() }
        guard let deadline = aggregator.nextDeadline else { return .wake }
        // The settle rule counts on the monotonic clock; the loop waits on the wall clock.
        let left = deadline - ContinuousClock.now
        return .wait(until: clock.now().addingTimeInterval(Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18))
    }

    /// A settled file: record what it is now, and hash it if it is new or changed.
    private func observe(_ path: String) async {
        var st = stat()
        let rc = options.watcher.followSymlinks ? stat(path, &st) : lstat(path, &st)
        if rc != 0 {
            if errno == ENOENT || errno == ENOTDIR { try? await database.markGone(path: path, now: clock.now()) }
            return
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return }
        // Handed on by a scan, a roll-up or maxHold rather than by its CLOSE_WRITE, a file
        // may still be open and growing (IN_MODIFY is not watched): its mtime says when it
        // was last written. Not left alone for `settle` yet: wait until it has been.
        let rule = options.settleRule
        if let wait = rule.timeLeft(mtimeSec: Int64(st.st_mtim.tv_sec), mtimeNsec: Int64(st.st_mtim.tv_nsec), now: clock.now()) {
            aggregator.markUnsettled(path, now: rule.lastWrite(now: ContinuousClock.now, timeLeft: wait))
            return
        }
        scans.noteChange(PathNames.parent(of: path))
        do {
            for p in try await database.observe([ObservedFile(path: path, identity: FileIdentity(st))], now: clock.now()) { enqueueHash(p) }
        } catch {
            logger.error("cannot record a file in the queue: \(error)", metadata: ["path": "\(path)"])
            writeFailed()
        }
    }

    /// A file found waiting for its hash by a scan or in the backlog: hashed now, or, if
    /// it was written moments ago and may still be growing, once it has settled (true:
    /// the settle loop has a new deadline to wake for).
    @discardableResult
    private func admit(_ path: String, mtimeSec: Int64, mtimeNsec: Int64, now: Date) -> Bool {
        let rule = options.settleRule
        guard let wait = rule.timeLeft(mtimeSec: mtimeSec, mtimeNsec: mtimeNsec, now: now) else {
            enqueueHash(path)
            return false
        }
        // Settles from its last write (observe() checks again then).
        aggregator.fileWritten(path, now: rule.lastWrite(now: ContinuousClock.now, timeLeft: wait))
        return true
    }

    // MARK: scans

    private func requestScan(_ path: String, recursive: Bool) {
        guard scans.request(path, recursive: recursive) else { return }
        scanning.wake()
    }

    /// One requested scan; with none, waits for a request or the periodic rescan.
    private func scanStep() async -> StageLoop.Next {
        if let due = rescanAt, clock.now() >= due {
            planRescan()
            rescanAll(reason: "periodic safety net")
        }
        guard let next = scans.begin() else { return .wait(until: rescanAt) }
        memory.worked()
        statusChanges.changed()
        await scan(next.path, recursive: next.recursive)
        scans.finish()
        lastScanAt = clock.now()
        statusChanges.changed()
        noteMaybeIdle()
        return .now
    }

    /// The next periodic rescan, ±10% so many NASes (and many folders) do not rescan in lockstep.
    private func planRescan() {
        rescanAt = options.rescanInterval.map { clock.now().addingTimeInterval(Units.seconds($0) * Double.random(in: 0.9...1.1)) }
    }

    private func scan(_ root: String, recursive: Bool) async {
        let started = ContinuousClock.now
        // A folder the queue knows nothing of (a first scan) can have nothing gone.
        let knewFiles = (try? await database.knowsFiles(under: root)) ?? true
        // A first scan lists and records the whole tree before anything is read: on a NAS's
        // two cores the hashers competing with the listing made it six times slower than
        // `find` (docs/benchmarks.md), and the status total is right sooner. Files stay in
        // the hash queue meanwhile; events are still recorded.
        if !knewFiles {
            hashHeld = true
            await database.bulkWrites(true)
        }
        let summary = await list(root, recursive: recursive, knewFiles: knewFiles)
        if !knewFiles {
            await database.bulkWrites(false)
            await armBacklog()
        }
        if hashHeld {
            hashHeld = false
            hashLoop.wake()
        }
        settling.wake()
        guard var summary else { return }
        if !summary.rootListed, access(root, F_OK) != 0, errno == ENOENT {
            // Renamed or deleted before its scan ran (events said where it went): gone, not unreadable.
            summary.unreadable.removeAll { $0.path.utf8.elementsEqual(root.utf8) }
        }
        let fresh = folderProblems.scanned(root, recursive: recursive, invalidNameCount: summary.invalidNameCount,
                                           invalidNames: summary.invalidNames,
                                           unreadable: summary.unreadable.map { .init(path: $0.path, reason: $0.reason) })
        for problem in fresh {
            logger.warning("cannot read a folder: \(problem.path): \(problem.reason) — \(FolderProblems.advice(for: problem.reason))")
        }
        if recursive && summary.rootListed && knewFiles {
            await sweep(root, summary: summary)
        }
        // From the first listing to the last write, sweep included: the whole scan.
        let elapsed = ContinuousClock.now - started
        logger.info("scanned \(root)", metadata: ["files": "\(summary.files)", "directories": "\(summary.directories)",
                                                  "ms": "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)"])
    }

    /// Lists the tree and records it batch by batch; the scanner's summary, nil if it ended early.
    private func list(_ root: String, recursive: Bool, knewFiles: Bool) async -> ScanSummary? {
        let scanner = DirectoryScanner(options: options.watcher, logger: logger)
        var summary: ScanSummary?
        var iterator = scanner.batches(root, recursive: recursive).makeAsyncIterator()
        // The scanner lists the next batch while this one is recorded, so a listing may
        // have started as early as the previous request: changes since then make it suspect.
        var previousRequest = scans.epoch
        while true {
            // Listings are taken while this actor goes on handling events.
            let listedAfter = previousRequest
            previousRequest = scans.epoch
            guard let output = await iterator.next() else { break }
            switch output {
            case .directories(let listings):
                var fresh: [DirectoryListing] = []
                fresh.reserveCapacity(listings.count)
                for listing in listings {
                    if scans.changed(listing.path, since: listedAfter) {
                        // Events moved or recorded files here after it was listed: list it
                        // again once it is quiet instead of calling those files gone.
                        logger.debug("directory changed while scanned; listing it again", metadata: ["dir": "\(listing.path)"])
                        aggregator.directoryScanRequested(listing.path, recursive: false, now: .now)
                        continue
                    }
                    fresh.append(DirectoryListing(listing))
                }
                do {
                    // One batch, one read and at most one write transaction.
                    let need = try await database.reconcileDirectories(fresh, firstScan: !knewFiles, now: clock.now())
                    // A first scan's files wait in the database: the backlog reads them back.
                    guard knewFiles else { continue }
                    let now = clock.now()
                    for f in need { admit(f.path, mtimeSec: f.identity.mtimeSec, mtimeNsec: f.identity.mtimeNsec, now: now) }
                } catch {
                    logger.error("cannot record a scan in the queue: \(error)", metadata: ["dir": "\(fresh.first?.dir ?? root)"])
                    writeFailed()
                }
            case .finished(let s):
                summary = s
            }
        }
        return summary
    }

    /// Directories the queue knows but the scan did not find are gone — except under a
    /// folder we could not read, where absence proves nothing.
    private func sweep(_ root: String, summary: ScanSummary) async {
        let blind = summary.unreadable.map(\.path)
        // Directories that events filled during the scan (a folder renamed into one listed
        // earlier, files recorded in a directory made after its parent was listed) were not
        // visited but are not gone either.
        let changed = scans.changedDirectories(within: root)
        guard changed.count <= 256 else {
            logger.debug("the tree changed too much during the scan to tell what vanished; the next scan will", metadata: ["root": "\(root)"])
            return
        }
        do {
            let swept = try await database.sweepDirectories(under: root, visited: summary.visitedDirectories, excluding: blind + changed,
                                                     now: clock.now())
            if swept > 0 { logger.info("\(swept) files are gone from \(root)") }
        } catch {
            logger.error("cannot record vanished files: \(error)")
            writeFailed()
        }
    }

    // MARK: hashing

    /// Points the backlog at the first file waiting for a hash (see `HashQueue.armBacklog`).
    private func armBacklog() async {
        do {
            guard let start = try await database.unhashedStart() else { return }
            hashes.armBacklog(at: start)
            hashLoop.wake()
        } catch {
            logger.error("cannot read the files waiting for a hash: \(error); the next scan finds them")
        }
    }

    /// Moves the next chunk of the backlog into the hash queue; false when nothing is left
    /// to take (or the database cannot be read: the next rescan finds those files
    /// waiting, and the next start or first scan arms the backlog again).
    private func refillFromBacklog() async -> Bool {
        // One hash loop reads the backlog at a time; the chunk it reads wakes the others.
        guard !refilling, let after = hashes.backlogCursor else { return false }
        refilling = true
        defer { refilling = false }
        let files: [UnhashedFile]
        do {
            files = try await database.unhashedFiles(after: after, limit: HashQueue.backlogChunk)
        } catch {
            logger.error("cannot read the files waiting for a hash: \(error); the next scan finds them")
            if hashes.backlogCursor == after { hashes.backlogRead(lastId: nil) }
            return false
        }
        // Armed again while this chunk was read (files behind it wait again): the next
        // read starts from there.
        guard hashes.backlogCursor == after else { return true }
        hashes.backlogRead(lastId: files.last?.id)
        guard !files.isEmpty else { return false }
        let now = clock.now()
        var settling = false
        // Files already queued, in flight or being recorded are skipped by enqueueHash.
        for f in files where admit(f.path, mtimeSec: f.mtimeSec, mtimeNsec: f.mtimeNsec, now: now) { settling = true }
        if settling { self.settling.wake() }
        return true
    }

    private func enqueueHash(_ path: String) {
        guard hashes.enqueue(path) else { return }
        memory.worked()
        // One wake-up for a scan batch's thousand files, not one each.
        if !hashWakePending {
            hashWakePending = true
            tasks.spawn { await self.wakeHashLoops() }
        }
    }

    private func wakeHashLoops() {
        // Cleared before waking: a file queued after this gets a wake-up of its own.
        hashWakePending = false
        hashLoop.wake()
    }

    private func nextToHash() async -> String? {
        repeat {
            if let path = hashes.next() { return path }
        } while await refillFromBacklog()
        return nil
    }

    /// Files read by the pool, or wait for files to read. One a step when few wait; a long
    /// queue is shared out in batches of up to `hashBatch`: a thread and an actor hop a
    /// batch, not a file.
    private func hashStep() async -> StageLoop.Next {
        let needsHash = database.signals.needsHash.generation
        if needsHash != needsHashSeen {
            needsHashSeen = needsHash
            await armBacklog()
        }
        // The writer sets the pace: past a bound, results waiting for it are only memory.
        guard hashed.count < Self.unrecordedLimit else { return .wake }
        guard !hashHeld, let first = await nextToHash() else { return .wake }
        var paths = [first]
        let share = min(Self.hashBatch, hashes.waiting / hashLoops)
        while paths.count < share, let path = hashes.next() { paths.append(path) }
        hashing += paths.count
        // The SHA-256 always: the manifest records it (format 2), and a plain-HTTP upload
        // signs it; both from the one read that takes the MD5.
        let results = await pool.hash(paths: paths, followSymlinks: options.watcher.followSymlinks, sha256: true)
        hashing -= paths.count
        // Stopping: the files stay waiting in the queue and are read again at the next start.
        if Task.isCancelled { return .wake }
        for (path, result) in zip(paths, results) {
            hashes.hashed(path)
            hashed.append((path, result))
        }
        if !recordScheduled {
            recordScheduled = true
            // During a scan its own transactions come first: results are written a
            // tenth of a second's worth at a time rather than two or three per commit.
            let gather = scans.isScanning
            tasks.spawn {
                if gather { try? await Task.sleep(for: .milliseconds(100)) }
                await self.recordHashed()
            }
        }
        return .now
    }

    /// One write at a time: results that arrive while a transaction commits wait for the
    /// next one, not a transaction each (docs/benchmarks.md "First start").
    private func recordHashed() async {
        let recorder = HashRecorder(database: database, payloadDigests: payloadDigests, meter: hashMeter, clock: clock,
                                    logger: logger)
        while !hashed.isEmpty {
            let results = hashed
            hashed.removeAll(keepingCapacity: true)
            // Hash loops waiting for room go on while this batch is written.
            if results.count >= Self.unrecordedLimit { hashLoop.wake() }
            let outcome = await recorder.record(results)
            for path in outcome.unsettled { aggregator.markUnsettled(path, now: .now) }
            if outcome.writeFailed { writeFailed() }
            hashes.recorded(results.map(\.0))
            settling.wake()
            statusChanges.changed()
        }
        recordScheduled = false
        noteMaybeIdle()
    }

    // MARK: upkeep

    private func writeFailed() {
        guard let first = recovery.failed() else { return }
        tasks.spawn { await self.recover(after: first) }
    }

    /// Rescans every folder until one records everything (`WriteRecovery`).
    private func recover(after first: TimeInterval) async {
        var delay = first
        while !Task.isCancelled {
            try? await clock.sleep(seconds: delay)
            if Task.isCancelled { break }
            recovery.rescanBegins()
            rescanAll(reason: "putting back what the queue could not record")
            while scans.isBusy && !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
            }
            guard let next = recovery.rescanEnded() else {
                logger.notice("the queue records changes again; nothing was missed")
                return
            }
            delay = next
        }
        recovery.stopped()
    }

    private var isIdle: Bool {
        hashes.isDrained && hashes.backlogCursor == nil && hashing == 0 && hashed.isEmpty && !scans.isBusy
    }

    /// Gives memory back once the work ran out (`MemoryRelease`).
    private func noteMaybeIdle() {
        guard memory.mayBeIdle(isIdle) else { return }
        tasks.spawn {
            try? await Task.sleep(for: MemoryRelease.delay)
            await self.releaseMemoryIfStillIdle()
        }
    }

    private func releaseMemoryIfStillIdle() async {
        guard memory.check(idle: isIdle) else { return }
        hashes.releaseMemory()
        hashed = []
        await database.releaseMemory()
        photolala_trim_malloc()
        photolala_release_code_pages()
    }
}
