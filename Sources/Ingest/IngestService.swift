/// Ingest: turns what the watcher sees into hashed files in the queue: settle, scan, hash, record.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Digests
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
/// Its jobs, one file each: events (`+Events`), settling (`+Settle`), scans (`+Scans`),
/// hashing and recording (`+Hashing`), recovery from lost writes and memory after a burst
/// (`+Upkeep`).
package actor IngestService: Service {
    package struct Options: Sendable, Equatable {
        package var watcher: WatcherOptions
        package var rescanInterval: Duration?
        package var hashWorkers: Int

        /// The one mapping from settings, at start and on reload.
        package init(_ settings: Settings, hashWorkers: Int = ProcessInfo.processInfo.activeProcessorCount) {
            let watch = settings.watch
            watcher = WatcherOptions(folders: watch.folders, extensions: Set(watch.extensions), exclude: watch.exclude,
                                     followSymlinks: watch.followSymlinks, settle: watch.settle)
            rescanInterval = watch.rescanInterval
            self.hashWorkers = max(1, hashWorkers)
        }

        var settleRule: SettleRule { SettleRule(settle: watcher.settle) }
    }

    let database: QueueDatabase
    var options: Options
    let logger: Logger
    let statusChanges: ChangeFeed
    let pool: HasherPool
    package nonisolated let hashMeter = RateMeter()
    var watcher: InotifyWatcher?
    var aggregator: SettleAggregator<ContinuousClock.Instant>
    var hashes = HashQueue()
    var scans = ScanTracker()
    var lastScanAt: Date?
    var folderProblems = FolderProblems()
    /// A change the queue could not record (a full disk): a rescan, retried with backoff
    /// until one goes through cleanly, puts back whatever was missed.
    var lostWrites = false
    var recovery: Task<Void, Never>?
    /// 5 s, 10 s, … up to 5 minutes between rescans that put back lost writes.
    static let recoveryBackoff = Backoff(base: 5, cap: 300, jitter: .none)
    var pipelineTasks: [Task<Void, Never>] = []
    let settleSignal = WakeSignal()
    let hashSignal = WakeSignal()
    let scanSignal = WakeSignal()

    /// Files being read by the pool now.
    var hashing = 0
    /// Set while a first scan lists a tree the queue knew nothing of.
    var hashHeld = false
    /// Results waiting to be written. Small photos hash faster than one transaction per
    /// file commits, so results that arrive while this actor is busy are recorded
    /// together; a lone file is recorded at once (one task hop later), or within 0.1 s
    /// while a scan runs.
    var hashed: [(String, HasherPool.Result)] = []
    var recordScheduled = false
    var hashWakePending = false
    /// Set by scans and hashing; cleared when memory is given back.
    var workSinceRelease = false
    var idleCheckScheduled = false

    /// SHA-256s for signed uploads, taken in the hashing pass when the uploader wants them.
    package nonisolated let payloadDigests: PayloadDigests

    package init(database: QueueDatabase, options: Options, logger: Logger, statusChanges: ChangeFeed = ChangeFeed(),
                payloadDigests: PayloadDigests = PayloadDigests()) {
        self.database = database
        self.payloadDigests = payloadDigests
        self.options = options
        self.logger = logger
        self.statusChanges = statusChanges
        pool = HasherPool(workers: options.hashWorkers)
        aggregator = SettleAggregator(options: options.watcher)
    }

    package func run() async throws {
        // Files a crash caught before their hash was stored are simply read again.
        armBacklog()
        if hashes.backlogCursor != nil { logger.info("resuming: some files still need their hash") }
        startWatcher()
        // As many files per hasher thread as it hashes at once, and a few more: while one
        // batch of results is being written the threads go on with the next files.
        for worker in 0..<pool.workers * (pool.filesAtOnce + Self.filesInFlightPerWorker - 1) {
            pipelineTasks.append(Task { await self.hashLoop(worker) })
        }
        pipelineTasks.append(Task { await self.settleLoop() })
        pipelineTasks.append(Task { await self.scanLoop() })
        pipelineTasks.append(Task { await self.rescanTimer() })
        pipelineTasks.append(Task { await self.needsHashLoop() })
        try? await gracefulShutdown()
        watcher?.stop()
        recovery?.cancel()
        for t in pipelineTasks { t.cancel() }
        pool.shutdown()
    }

    /// New watch settings on reload: the watcher starts over (and rescans, which costs no re-hash).
    package func apply(_ new: Options) {
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
    package func rescanAll(reason: String) {
        logger.info("rescanning every watched folder (\(reason))")
        watcher?.rewatch()
        for root in options.watcher.folders { requestScan(root, recursive: true) }
    }

    func changed() {
        statusChanges.changed()
    }

    // MARK: status

    /// Ingest's own part of the status: the watch, scans, files being read now, the hash
    /// rate and the folders it cannot back up. It reads no other stage's fields.
    package func contribute(to s: inout DaemonStatus) {
        if let w = watcher?.snapshot() {
            s.watch.folders = w.folders
            s.watch.directories = w.directories
            s.watch.missingFolders = w.missingFolders
            s.watch.watchLimitReached = w.watchLimitReached
            s.watch.maxUserWatches = w.maxUserWatches
            s.watch.unwatchedDirectories = w.unwatchedDirectories
        }
        s.watch.scanning = scans.isBusy
        s.watch.lastScanAt = lastScanAt.map(Timestamp.string)
        // Files being read now, not the ones waiting their turn in the pool; counted out
        // of `pending` when the status is assembled.
        s.queue.hashing = min(hashing, pool.busy)
        s.queue.hashRate = hashMeter.rate()
        s.problems += folderProblems.statusLines()
    }
}
