/// Daemon: wires the services into one ServiceGroup: lifecycle, signals, reload and the systemd notify protocol.
#if canImport(Glibc)
import Glibc
#endif
import Audit
import Catalog
import CLinux
import Control
import CoreMetrics
import Credentials
import Foundation
import Hashing
import Ingest
import Inventory
import Logging
import MetricsExport
import Manifest
import PhotolalaCore
import Queue
import Restore
import ServiceLifecycle
import Thumbnails
import Upload
import UnixSignals

/// Starts photolalad: state directory, database and control socket first (READY=1 only
/// once all three work), then the stages and side services in one `ServiceGroup` until
/// SIGTERM/SIGINT.
package struct Daemon: Sendable {
    let settings: Settings
    let configPath: String
    let logger: Logger
    let notifier = SystemdNotifier()

    package init(settings: Settings, configPath: String) {
        self.settings = settings
        self.configPath = configPath
        self.logger = Logger(label: "photolalad")
    }

    /// The counters' registry, bootstrapped once per process before any part counts.
    static let counters: CatalogMetricsFactory = {
        let factory = CatalogMetricsFactory()
        MetricsSystem.bootstrap(factory)
        factory.seed()
        return factory
    }()

    package func run() async throws {
        Self.hardenProcess()
        let counters = Self.counters
        try Self.prepareStateDirectory(settings.daemon.stateDir)
        let database = try openDatabase()
        let core = try DaemonCore(settings: settings, database: database, logger: logger)
        // Who did what (cli.md "audit"); `audit.max_size` (config.md) goes in `maxSize` once Settings has it.
        let audit = AuditTrail(directory: settings.daemon.stateDir, database: database, logger: logger)

        // The side service the pipeline asks for credentials, restored before READY so
        // the first status is right.
        let account = AccountService(stateDir: settings.daemon.stateDir, options: .init(settings), logger: logger,
                                     statusChanges: core.statusChanges)
        await account.restore()
        // The stages around the queue: settled → hashed (ingest) → uploaded (uploader).
        let payloadDigests = PayloadDigests()
        let ingest = IngestService(database: database, options: .init(settings), logger: logger,
                                   statusChanges: core.statusChanges, payloadDigests: payloadDigests)
        let uploader = UploaderService(database: database, account: account, gate: DaemonGate(core: core, account: account),
                                       options: .init(settings), logger: logger, payloadDigests: payloadDigests)
        let scraper = MetricsScraper(core: core, exposition: MetricsExposition(counters: counters.registry))
        let metricsListener = MetricsListenerService(address: settings.metrics.listen, logger: logger) { await scraper.scrape() }
        // What the bucket holds: the uploader trusts it instead of asking one key at a time.
        let inventory = InventoryService(database: database, account: account, options: .init(settings), logger: logger,
                                         statusChanges: core.statusChanges)
        // After the upload: thumbnails and the photo rows the catalog stage publishes.
        let thumbnails = ThumbnailService(database: database, account: account, gate: DaemonGate(core: core, account: account),
                                          options: .init(settings), logger: logger)
        // After the upload: this NAS's manifest in the bucket (paths, names, times).
        let manifest = ManifestService(database: database, account: account, options: .init(settings), logger: logger,
                                       statusChanges: core.statusChanges)
        // A side service: reading devices, manifests and objects back for `photolalactl restore`.
        let restore = RestoreService(account: account, options: .init(settings), logger: logger)
        // Photos the thumbnails left ready → rows in the apps' catalog.
        let catalog = CatalogService(database: database, access: CatalogGate(core: core, account: account),
                                     options: .init(settings), logger: logger, statusChanges: core.statusChanges)
        for part in [account, ingest, uploader, inventory, thumbnails, catalog, manifest, restore, metricsListener] as [any StatusContributor] {
            await core.add(part)
        }

        // Trapped before the control socket listens (let alone READY=1): a client that can
        // connect may send SIGTERM at once (tests and scripts take a connectable socket for
        // "up"), and a signal that arrives early must neither kill the daemon (the default
        // action; the process suite caught an exit by SIGTERM) nor be lost (SIGTERM before
        // the group runs still stops it cleanly).
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let stops = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let server = try await startControlServer(DaemonControl(core: core, account: account, ingest: ingest, inventory: inventory,
                                                                restore: restore, metrics: scraper, audit: audit), audit: audit)

        await core.markRunning()
        let status = await core.status()
        notifier.ready(status: StatusSummary.oneLine(status))
        Self.releaseStartupMemory()
        logger.notice("photolalad \(PhotolalaVersion.current) started", metadata: [
            "folders": "\(settings.watch.folders.count)", "socket": "\(settings.daemon.socket)", "state": "\(status.state.rawValue)",
        ])

        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            // First, so it stops last: what happens until then is recorded.
            .init(service: audit, serviceName: "audit"),
            // Next, so it stops next to last: status answers while the others wind down.
            .init(service: ControlService(server: server), serviceName: "control"),
            .init(service: metricsListener, serviceName: "metrics"),
            .init(service: account, serviceName: "account"),
            .init(service: ingest, serviceName: "ingest"),
            .init(service: uploader, serviceName: "uploader"),
            .init(service: inventory, serviceName: "inventory"),
            .init(service: thumbnails, serviceName: "thumbnails"),
            .init(service: catalog, serviceName: "catalog"),
            .init(service: manifest, serviceName: "manifest"),
            .init(service: restore, serviceName: "restore"),
            .init(service: StatusLineService(core: core, notifier: notifier), serviceName: "status-line"),
            .init(service: ReloadService(core: core, configPath: configPath, notifier: notifier, logger: logger,
                                         parts: [uploader, ingest, account, inventory, thumbnails, catalog, manifest, restore, metricsListener],
                                         signals: hangups), serviceName: "reload"),
        ]
        if let interval = notifier.watchdogInterval() {
            services.append(.init(service: WatchdogService(core: core, notifier: notifier, interval: interval), serviceName: "watchdog"))
        }
        var config = ServiceGroupConfiguration(services: services, logger: logger)
        config.maximumGracefulShutdownDuration = .seconds(10)
        config.maximumCancellationDuration = .seconds(3)
        let group = ServiceGroup(configuration: config)
        defer { logger.notice("photolalad stopped") }
        let stopper = Task {
            for await signal in stops {
                logger.notice("\(signal) received: stopping")
                await group.triggerGracefulShutdown()
            }
        }
        defer { stopper.cancel() }
        try await group.run()
    }
}
