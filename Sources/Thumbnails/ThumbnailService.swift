/// Thumbnails: the stage after the upload: each uploaded photo's PTM-256 thumbnail into the
/// bucket and its catalog columns into the `photo` row, for the catalog stage to publish.
import AsyncHTTPClient
import Bucket
import Credentials
import Foundation
import Logging
import PhotolalaCore
import Previews
import Queue
import ServiceLifecycle

/// The thumbnail stage: takes objects `uploaded` with no `photo` row, gives each a
/// `pending` row, and moves it to `ready` (thumbnail in the bucket, columns filled),
/// `skipped` (a format the apps do not show) or `failed` (could not be decoded), one
/// transaction per step. Decoding happens only in sandboxed worker processes
/// (`PreviewWorkerSlot`). Originals come first: while objects wait to be uploaded the
/// stage waits, and its workers run at the lowest CPU and I/O priority.
package actor ThumbnailService: Service {
    package struct Options: Sendable, Equatable {
        /// `catalog.enabled`: false turns the stage off.
        package var enabled: Bool
        /// Photos read at once (one worker process each): few, a NAS has few cores.
        package var concurrency: Int
        /// `watch.follow_symlinks`: a path may be a link, read through it as hashed.
        package var followSymlinks: Bool
        /// The system's CAs plus `tls.ca_file`, as for the uploads.
        package var trust: TLSTrust

        package init(_ settings: Settings) {
            enabled = settings.catalog.enabled
            concurrency = max(1, min(2, ProcessInfo.processInfo.activeProcessorCount / 2))
            followSymlinks = settings.watch.followSymlinks
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    let database: QueueDatabase
    let account: AccountService
    let gate: any StageGate
    let logger: Logger
    var options: Options
    let workers: PreviewWorkerSlot.Options
    let http: HTTPClient
    let signal = WakeSignal()
    var busy: Set<String> = []
    /// `uploaded` fired since the last pass that gave uploaded objects their rows.
    var seedWanted = true
    var lastSeed: ContinuousClock.Instant?
    var retries = Backoff(base: 5, cap: 300, jitter: .equal)
    /// Why no preview worker could start (a decoder library missing, the sandbox refused),
    /// until one does: a status problem, since no photo gets a thumbnail meanwhile.
    var workerProblem: String?
    var clockOffset: TimeInterval = 0

    package init(database: QueueDatabase, account: AccountService, gate: any StageGate, options: Options, logger: Logger,
                workers: PreviewWorkerSlot.Options = .init()) {
        self.database = database
        self.account = account
        self.gate = gate
        self.options = options
        self.logger = logger
        self.workers = workers
        http = S3Client.makeHTTPClient(maximumConnectionsPerHost: 4)
    }

    package func apply(_ new: Options) async {
        let concurrencyChanged = new.concurrency != options.concurrency
        options = new
        if concurrencyChanged { logger.notice("the number of preview workers takes effect at the next restart") }
        await signal.notify()
    }

    package func run() async throws {
        let gateChanges = gate.changes()
        let uploaded = database.signals.uploaded
        let retried = database.signals.photosRetried
        let relays = [
            Task { [signal] in
                for await _ in gateChanges { await signal.notify() }
            },
            Task {
                await uploaded.onEveryNotify { await self.uploadsHappened() }
            },
            Task { [signal] in
                await retried.onEveryNotify { await signal.notify() }
            },
        ]
        let slots = (0..<options.concurrency).map { _ in PreviewWorkerSlot(options: workers) }
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                for slot in slots {
                    group.addTask { await self.work(slot) }
                }
            }
        } onGracefulShutdown: { [signal] in
            // A photo in a decoder ends now: its preview is made again at the next start.
            Task {
                for slot in slots { await slot.interrupt() }
                await signal.notify()
            }
        }
        for slot in slots { await slot.stop() }
        for relay in relays { relay.cancel() }
        try? await http.shutdown()
    }

    private func uploadsHappened() async {
        seedWanted = true
        await signal.notify()
    }

    private func work(_ slot: PreviewWorkerSlot) async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let since = await signal.current
            guard options.enabled else {
                await slot.stop()
                await signal.wait(since: since, until: nil as Date?)
                continue
            }
            if await gate.blockReason() != nil {
                await signal.wait(since: since, until: nil as Date?)
                continue
            }
            // Originals first: a preview never takes a turn from a backup.
            if (try? database.hasDueObjects()) ?? false {
                await signal.wait(since: since, until: Date().addingTimeInterval(30))
                continue
            }
            let job: PhotoJob?
            do {
                try seedIfWanted()
                job = try claim()
            } catch {
                logger.error("cannot read the queue for thumbnails: \(error)")
                await signal.wait(since: since, until: Date().addingTimeInterval(5))
                continue
            }
            guard let job else {
                await signal.wait(since: since, until: try? database.nextPhotoDueTime())
                continue
            }
            await read(job, with: slot)
            busy.remove(job.md5)
        }
    }

    /// Gives uploaded objects their `pending` rows: a pass over the object table in
    /// windows (one short transaction each), after uploads happened, at most every 30 s
    /// while there is other work.
    private func seedIfWanted() throws {
        guard seedWanted else { return }
        if let lastSeed, ContinuousClock.now - lastSeed < .seconds(30), try !database.duePhotos(excluding: busy, limit: 1).isEmpty {
            return
        }
        seedWanted = false
        lastSeed = .now
        var rowid: Int64 = 0
        while true {
            let step = try database.seedPhotos(after: rowid)
            if step.atEnd { break }
            rowid = step.last
        }
    }

    private func claim() throws -> PhotoJob? {
        guard let job = try database.duePhotos(excluding: busy, limit: 1).first else { return nil }
        busy.insert(job.md5)
        return job
    }
}
