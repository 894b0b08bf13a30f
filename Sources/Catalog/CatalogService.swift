import AsyncHTTPClient
import Bucket
import Foundation
import Logging
import PhotolalaCore
import Queue
import ServiceLifecycle

/// The catalog stage: takes photos the thumbnail stage left `ready` and publishes their
/// rows in the user's catalog, merged with every row already there (app-catalog.md), so
/// the Photolala apps show them. `CatalogSchedule` decides when, `CatalogPublisher` does
/// one sync; this actor only waits, asks, and keeps what status shows. Woken by the
/// queue's `photosReady` and `uploaded` signals, by reloads, and by the account when it
/// was waiting for one.
package actor CatalogService: Service {
    package struct Options: Sendable, Equatable {
        package var enabled: Bool
        package var publishInterval: Duration
        package var checkInterval: Duration
        /// Snapshots above this go up in parts of `partSize` (the upload section's sizes).
        package var multipartThreshold: Int64
        package var partSize: Int64
        package var stateDir: String
        /// The system CA store plus `tls.ca_file`, as for every other connection.
        package var trust: TLSTrust

        /// The one mapping from settings, at start and on reload.
        package init(_ settings: Settings) {
            enabled = settings.catalog.enabled
            publishInterval = settings.catalog.publishInterval
            checkInterval = settings.catalog.checkInterval
            multipartThreshold = settings.upload.multipartThreshold
            partSize = settings.upload.partSize
            stateDir = settings.daemon.stateDir
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    let database: QueueDatabase
    let access: any CatalogAccess
    let logger: Logger
    let statusChanges: ChangeFeed
    let workspace: CatalogWorkspace
    let http: HTTPClient
    let wake = WakeSignal()
    var options: Options
    var schedule: CatalogSchedule
    var ledger = CatalogLedger()
    var pending = 0
    var drained = false
    var syncing = false
    var waitingForAccess = false
    var conditionalWrites = true
    var blockedReason: String?
    var lastError: String?
    var clockOffset: TimeInterval = 0
    var inFlight: Task<Void, Never>?

    package init(database: QueueDatabase, access: any CatalogAccess, options: Options, logger: Logger,
                statusChanges: ChangeFeed = ChangeFeed()) {
        self.database = database
        self.access = access
        self.options = options
        self.logger = logger
        self.statusChanges = statusChanges
        workspace = CatalogWorkspace(stateDir: options.stateDir)
        schedule = CatalogSchedule(publishInterval: Units.seconds(options.publishInterval),
                                   checkInterval: Units.seconds(options.checkInterval))
        http = S3Client.makeHTTPClient(maximumConnectionsPerHost: 2)
    }

    package func apply(_ new: Options) {
        if new.stateDir != options.stateDir { logger.notice("the catalog's scratch space moves with daemon.state_dir at the next restart") }
        var new = new
        new.stateDir = options.stateDir
        if new.enabled != options.enabled {
            logger.notice(new.enabled ? "catalog publishing turned on" : "catalog publishing turned off (catalog.enabled = false)")
        }
        options = new
        schedule.reconfigure(publishInterval: Units.seconds(new.publishInterval), checkInterval: Units.seconds(new.checkInterval))
        statusChanges.changed()
        Task { await wake.notify() }
    }

    package func run() async throws {
        restore()
        let signals = database.signals
        let accessChanges = access.changes()
        // Rows becoming ready (and uploads, which end the drain) wake the loop; the account
        // only when a sync is waiting for it (it changes with every upload otherwise).
        let relays = [
            Self.relay(signals.photosReady, to: wake),
            Self.relay(signals.uploaded, to: wake),
            Task { [wake] in
                for await _ in accessChanges {
                    if self.waitingForAccess { await wake.notify() }
                }
            },
        ]
        await withGracefulShutdownHandler {
            await loop()
        } onGracefulShutdown: { [wake] in
            // A publish can be cut anywhere (the pointer goes last): stop it now rather
            // than hold the daemon's stop for a million-row merge.
            Task {
                await self.cancelSync()
                await wake.notify()
            }
        }
        for relay in relays { relay.cancel() }
        try? await http.shutdown()
    }

    private static func relay(_ signal: WakeSignal, to wake: WakeSignal) -> Task<Void, Never> {
        Task {
            await signal.onEveryNotify { await wake.notify() }
        }
    }

    private func loop() async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let since = await wake.current
            guard options.enabled, !waitingForAccess else {
                await wake.wait(since: since, until: nil as Date?)
                waitingForAccess = false
                continue
            }
            refreshCounts()
            switch schedule.next(now: Date(), pending: pending, listed: ledger.rows, drained: drained) {
            case .publish, .check:
                // Its own task, so a stop can cancel it without ending the loop first.
                let task = Task { await self.sync() }
                inFlight = task
                await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
                inFlight = nil
            case .idle:
                await wake.wait(since: since, until: nil as Date?)
            case .wait(let until):
                // A photo that ends failed or skipped sends no signal: while rows wait for
                // the drain, look again now and then.
                let deadline = pending > 0 && !drained ? min(until, Date().addingTimeInterval(15)) : until
                await wake.wait(since: since, until: deadline)
            }
        }
    }

    /// The bookkeeping of the previous run: what status shows at once, and the publish
    /// interval kept across restarts (a crash loop must not publish in a loop).
    private func restore() {
        ledger = CatalogLedger(settings: (try? database.settings(prefix: CatalogLedger.prefix)) ?? [:])
        schedule = CatalogSchedule(publishInterval: schedule.publishInterval, checkInterval: schedule.checkInterval,
                                   lastPublishAt: ledger.publishedAt)
        workspace.clear()
        refreshCounts()
    }

    private func cancelSync() {
        inFlight?.cancel()
    }

    private func refreshCounts() {
        do {
            let before = pending
            pending = try database.catalogPending()
            drained = try database.catalogQueueDrained()
            if pending != before { statusChanges.changed() }
        } catch {
            logger.warning("cannot read the queue for the catalog: \(error)")
        }
    }

    // MARK: one sync

    private func sync() async {
        guard let session = await access.session() else {
            waitingForAccess = true
            return
        }
        if ledger.userId != session.userId {
            // Bookkeeping belongs to one user's catalog; another user's starts from nothing.
            if ledger.userId != nil { logger.notice("signed in as another user: their catalog is read from scratch") }
            ledger.forget(newUser: session.userId)
            do {
                try database.forgetCatalog(settings: ledger.settings)
            } catch {
                failed("cannot record the catalog's state in the queue: \(error)")
                return
            }
        }
        let store: S3CatalogStore
        do {
            store = try S3CatalogStore(grant: session.grant, userId: session.userId, trust: options.trust, http: http, clockOffset: clockOffset,
                                       multipartThreshold: options.multipartThreshold, partSize: options.partSize,
                                       logger: logger, journal: { [database] upload in
                                           try? database.setSetting(CatalogLedger.prefix + "openUpload", upload)
                                       })
        } catch {
            failed("\(error)")
            return
        }
        if let open = ledger.openUpload {
            let parts = open.split(separator: " ", maxSplits: 1).map(String.init)
            if parts.count == 2 { await store.abort(key: parts[0], uploadId: parts[1]) }
            ledger.openUpload = nil
        }
        syncing = true
        statusChanges.changed()
        defer {
            syncing = false
            workspace.clear()
            refreshCounts()
            statusChanges.changed()
        }
        var publisher = CatalogPublisher(store: store, workspace: workspace, database: database, logger: logger,
                                         conditionalWrites: conditionalWrites)
        var seen = ledger
        var took = Duration.zero
        do {
            let started = ContinuousClock.now
            let outcome = try await publisher.sync(ledger: &seen, pending: pending)
            took = ContinuousClock.now - started
            conditionalWrites = publisher.conditionalWrites
            ledger = seen
            record(outcome, took: took)
        } catch let error as S3Error {
            conditionalWrites = publisher.conditionalWrites
            switch error.kind {
            case .cancelled: return
            case .credentialsExpired: await access.rejected(session.grant)
            case .clockSkew:
                if let offset = error.clockOffset() {
                    clockOffset = offset
                    logger.warning("the clock differs from S3's by \(Int(offset))s; signing the catalog's requests with S3's time")
                }
            default: break
            }
            failed("publishing the catalog failed: \(error)")
        } catch is CancellationError {
            // Stopping: the catalog is as it was or as published, the scratch space goes.
            return
        } catch {
            failed("publishing the catalog failed: \(error)")
        }
    }

    private func record(_ outcome: SyncOutcome, took: Duration) {
        let now = Date()
        switch outcome {
        case .unchanged:
            schedule.read(now: now)
            ledger.checkedAt = now
            clearProblems()
        case .current(let report):
            schedule.read(now: now)
            clearProblems()
            noteRejections(report)
        case .published(let report):
            schedule.published(now: now)
            clearProblems()
            noteRejections(report)
            logger.notice("catalog published: the apps show this NAS's photos", metadata: [
                "added": "\(report.added)", "ours": "\(report.rows)", "rows": "\(report.total)",
                "snapshot": "\(report.pointer?.md5 ?? "")", "seconds": "\(SyncPhases.seconds(took))", "phases": "\(report.phases)",
            ])
        case .blocked(let why):
            if blockedReason != why { logger.warning("the catalog is not published: \(why)") }
            blockedReason = why
            lastError = why
            schedule.failed(now: now, random: .random(in: 0..<1))
        case .contended(let rounds):
            failed("another device published the catalog \(rounds) times while this NAS merged; trying again later")
        }
    }

    private func noteRejections(_ report: SyncReport) {
        guard report.rejected > 0 else { return }
        logger.warning("photos left out of the catalog: their thumbnails' catalog columns are not ones the apps read", metadata: [
            "photos": "\(report.rejected)", "first": "\(report.firstRejection ?? "")",
        ])
    }

    private func clearProblems() {
        if blockedReason != nil { logger.notice("the catalog can be read again") }
        blockedReason = nil
        lastError = nil
    }

    private func failed(_ why: String) {
        let retry = schedule.failed(now: Date(), random: .random(in: 0..<1))
        if lastError != why {
            logger.warning("\(why)", metadata: ["retryIn": "\(Int(retry.timeIntervalSinceNow.rounded()))s"])
        }
        lastError = why
    }
}
