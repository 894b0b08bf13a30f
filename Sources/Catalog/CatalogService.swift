/// Catalog: the apps' catalog: our ready photos merged into the user's catalog and
/// published (app-catalog.md).
import Bucket
import Foundation
import Logging
import PhotolalaCore
import Queue
import ServiceLifecycle

/// The catalog stage: takes photos the thumbnail stage left `ready` and publishes their
/// rows in the user's catalog, merged with every row already there (app-catalog.md), so
/// the Photolala apps show them. `CatalogSchedule` decides when, `CatalogPublisher` does
/// one sync through `BucketCatalogStore`; this actor only waits, asks, and keeps what
/// status shows. Woken by the queue's `photosReady` and `uploaded` signals, by reloads,
/// and by the gate (the catalog writes only when uploads may run).
package actor CatalogService: Service, Stage {
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

    /// The queue, clock, log, status feed and audit trail (`Stage` reads them through it).
    package nonisolated let context: StageContext
    private let bucket: BucketSession
    private let gate: any StageGate
    private let workspace: CatalogWorkspace
    private var options: Options
    private var schedule: CatalogSchedule
    private var ledger = CatalogLedger()
    /// Ready photos without a row in the catalog.
    private var pending = 0
    /// Nothing left to read, upload or preview.
    private var drained = false
    private var syncing = false
    /// False once the store refused a condition that held (see `CatalogPublisher`).
    private var conditionalWrites = true
    /// Why the catalog cannot be read (nothing is published over it), until it can.
    private var blockedReason: String?
    private var lastError: String?
    private var loop: StageLoop?

    /// - Parameters:
    ///   - bucket: the stage's session.
    ///   - gate: the catalog writes only when uploads may run (signed in, not paused by
    ///     the user nor by the account).
    package init(context: StageContext, bucket: BucketSession, gate: any StageGate, options: Options) {
        self.context = context
        self.bucket = bucket
        self.gate = gate
        self.options = options
        workspace = CatalogWorkspace(stateDir: options.stateDir)
        schedule = CatalogSchedule(publishInterval: Units.seconds(options.publishInterval),
                                   checkInterval: Units.seconds(options.checkInterval))
    }

    package func apply(_ new: Options) async {
        if new.stateDir != options.stateDir { logger.notice("the catalog's scratch space moves with daemon.state_dir at the next restart") }
        var new = new
        new.stateDir = options.stateDir
        if new.enabled != options.enabled {
            logger.notice(new.enabled ? "catalog publishing turned on" : "catalog publishing turned off (catalog.enabled = false)")
        }
        options = new
        schedule.reconfigure(publishInterval: Units.seconds(new.publishInterval), checkInterval: Units.seconds(new.checkInterval))
        await bucket.apply(trust: new.trust)
        statusChanges.changed()
        loop?.wake()
    }

    package func run() async throws {
        await restore()
        // Rows becoming ready, and uploads (which end the drain), wake the loop; so does the
        // gate (a sign-in, a pause lifted).
        let loop = StageLoop(clock: clock, wakes: [.signal(database.signals.photosReady), .signal(database.signals.uploaded),
                                                   .stream(gate.changes())])
        self.loop = loop
        // A publish can be cut anywhere (the pointer goes last): a stop cancels it rather
        // than wait for a million-row merge.
        await loop.run { _ in await self.step() }
        await bucket.shutdown()
    }

    private func step() async -> StageLoop.Next {
        guard options.enabled else { return .wake }
        await refreshCounts()
        guard await gate.blockReason() == nil, let userId = await bucket.userId else { return .wake }
        let now = clock.now()
        switch schedule.next(now: now, pending: pending, listed: ledger.rows, drained: drained) {
        case .publish, .check:
            await sync(userId: userId)
            return .now
        case .idle:
            return .wake
        case .wait(let until):
            // A photo that ends failed or skipped sends no signal: while rows wait for
            // the drain, look again now and then.
            return .wait(until: pending > 0 && !drained ? min(until, now.addingTimeInterval(15)) : until)
        }
    }

    /// The bookkeeping of the previous run: what status shows at once, and the publish
    /// interval kept across restarts (a crash loop must not publish in a loop).
    private func restore() async {
        ledger = CatalogLedger(settings: (try? await database.settings(prefix: CatalogLedger.prefix)) ?? [:])
        schedule = CatalogSchedule(publishInterval: schedule.publishInterval, checkInterval: schedule.checkInterval,
                                   lastPublishAt: ledger.publishedAt)
        if ledger.unsettled {
            logger.info("the last run stopped while recording a catalog sync; reading the catalog again")
            schedule.recordingCut()
        }
        workspace.clear()
        await refreshCounts()
    }

    private func refreshCounts() async {
        do {
            let before = pending
            pending = try await database.catalogPending()
            drained = try await database.catalogQueueDrained()
            if pending != before { statusChanges.changed() }
        } catch {
            logger.warning("cannot read the queue for the catalog: \(error)")
        }
    }

    // MARK: one sync

    private func sync(userId: String) async {
        if ledger.userId != userId {
            // Bookkeeping belongs to one user's catalog; another user's starts from nothing.
            if ledger.userId != nil { logger.notice("signed in as another user: their catalog is read from scratch") }
            ledger.forget(newUser: userId)
            do {
                try await database.forgetCatalog(settings: ledger.settings)
            } catch {
                failed("cannot record the catalog's state in the queue: \(error)")
                return
            }
        }
        let store = BucketCatalogStore(userId: userId, bucket: bucket, multipartThreshold: options.multipartThreshold,
                                       partSize: options.partSize, journal: { [database] upload in
                                           try? await database.setSetting(CatalogLedger.prefix + "openUpload", upload)
                                       }, logger: logger)
        if let open = ledger.openUpload {
            let parts = open.split(separator: " ", maxSplits: 1).map(String.init)
            if parts.count == 2 { await store.abort(key: parts[0], uploadId: parts[1]) }
            ledger.openUpload = nil
        }
        syncing = true
        statusChanges.changed()
        await publish(through: store)
        syncing = false
        workspace.clear()
        await refreshCounts()
        statusChanges.changed()
    }

    /// The sync proper, once the bookkeeping is this user's.
    private func publish(through store: BucketCatalogStore) async {
        var publisher = CatalogPublisher(store: store, workspace: workspace, database: database, logger: logger,
                                         conditionalWrites: conditionalWrites)
        var seen = ledger
        do {
            let started = ContinuousClock.now
            let outcome = try await publisher.sync(ledger: &seen, pending: pending, now: { [clock] in clock.now() })
            conditionalWrites = publisher.conditionalWrites
            ledger = seen
            record(outcome, took: ContinuousClock.now - started)
        } catch let error as S3Error {
            conditionalWrites = publisher.conditionalWrites
            // Stopping, or signed out / paused meanwhile: the gate says when to go on.
            if error.kind == .cancelled || error.kind == .unavailable { return }
            failed("publishing the catalog failed: \(error)")
        } catch is CancellationError {
            // Stopping: the catalog is as it was or as published, the scratch space goes.
            return
        } catch {
            failed("publishing the catalog failed: \(error)")
        }
    }

    private func record(_ outcome: SyncOutcome, took: Duration) {
        let now = clock.now()
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
            if let replaced = report.replaced { recordReplaced(replaced, report) }
        case .blocked(let why):
            if blockedReason != why { logger.warning("the catalog is not published: \(why)") }
            blockedReason = why
            lastError = why
            schedule.failed(now: now, random: .random(in: 0..<1))
        case .contended(let rounds):
            failed("another device published the catalog \(rounds) times while this NAS merged; trying again later")
        }
    }

    /// The publish replaced a catalog someone else published: whose rows were kept, which
    /// of ours went back in, and whether the pointer was replaced conditionally.
    private func recordReplaced(_ snapshot: String, _ report: SyncReport) {
        let prefix = ledger.userId.map { CatalogFormat.prefix(userId: $0) } ?? ""
        logger.notice("the catalog another writer published was replaced by a merge that kept its rows", metadata: [
            "replaced": "\(snapshot)", "putBack": "\(report.putBack)",
        ])
        audit?.record(AuditEvent(.catalogReplaced, by: .daemon, .ok, [
            "prefix": .string(prefix), "replaced": .string(snapshot), "rowsKept": .int(Int64(report.total - report.added)),
            "added": .int(Int64(report.added)), "putBack": .int(Int64(report.putBack)), "conditional": .bool(conditionalWrites),
        ]))
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
        let now = clock.now()
        let retry = schedule.failed(now: now, random: .random(in: 0..<1))
        if lastError != why {
            logger.warning("\(why)", metadata: ["retryIn": "\(Int(retry.timeIntervalSince(now).rounded()))s"])
        }
        lastError = why
    }

    // MARK: status

    /// The catalog's part of the status (cli.md `catalog`).
    package func contribute(to s: inout DaemonStatus) {
        s.catalog = DaemonStatus.Catalog(
            state: state, rows: ledger.rows, publishedAt: ledger.publishedAt.map(Timestamp.string), lastError: lastError,
            pending: pending, total: ledger.total, checkedAt: ledger.checkedAt.map(Timestamp.string),
            conditionalWrites: conditionalWrites)
    }

    /// Off overrides everything; a catalog that cannot be read comes next, since new rows
    /// wait on it; then what the rows are doing.
    private var state: DaemonStatus.Catalog.State {
        if !options.enabled { return .off }
        if blockedReason != nil { return .blocked }
        if syncing && pending > 0 { return .publishing }
        if pending > 0 { return .pending }
        return ledger.rows > 0 ? .published : .idle
    }
}
