/// Daemon: wires the services into one ServiceGroup: lifecycle, signals, reload and the systemd notify protocol.
#if canImport(Glibc)
import Glibc
#endif
import Audit
import Bucket
import Catalog
import CLinux
import Control
import CoreMetrics
import Account
import Foundation
import Digests
import Ingest
import Inventory
import Keys
import Logging
import Manifest
import ManifestFormat
import Mirror
import Notify
import PhotolalaCore
import Queue
import RestoreRelay
import ServiceLifecycle
import Thumbnails
import Upload
import UnixSignals
import Vault
import Web

/// Starts photolalad: state directory, database and control socket first (READY=1 only
/// once all three work), then the stages and side services in one `ServiceGroup` until
/// SIGTERM/SIGINT.
package struct Daemon: Sendable {
    let settings: Settings
    let configPath: String
    /// The instance whose defaults a reload reads the file with (nil: photolalad.service).
    let instance: Instance?
    let logger: Logger
    let notifier = SystemdNotifier()

    package init(settings: Settings, configPath: String, instance: Instance? = nil) {
        self.settings = settings
        self.configPath = configPath
        self.instance = instance
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
        let database = try await openDatabase()
        let core = try await DaemonCore(settings: settings, database: database, logger: logger)
        // Who did what (cli.md "audit"), rotated at `audit.max_size` (config.md).
        let audit = AuditTrail(directory: settings.daemon.stateDir, database: database, maxSize: settings.audit.maxSize, logger: logger)

        // The side service the pipeline asks for credentials, restored before READY so
        // the first status is right.
        let account = AccountService(stateDir: settings.daemon.stateDir, options: .init(settings), logger: logger,
                                     statusChanges: core.statusChanges, audit: audit)
        await account.restore()
        // What every stage stands on: the queue, the clock, the log, the status feed, the trail.
        let context = StageContext(database: database, logger: logger, statusChanges: core.statusChanges, audit: audit)
        // The stages around the queue: settled → hashed (ingest) → uploaded (uploader).
        let payloadDigests = PayloadDigests()
        let ingest = IngestService(context: context, options: .init(settings), payloadDigests: payloadDigests)
        // Each stage reaches the bucket through its own session (its own connection pool),
        // with the account's grants.
        let trust = TLSTrust(caFile: settings.tls.caFile)
        func bucket(_ connections: Int, proxy: ConnectProxy? = nil) -> BucketSession {
            BucketSession(grants: account, connections: connections, connectProxy: proxy, trust: trust, logger: logger)
        }
        // The account key and the recovery key: it follows the account's sign-in, with a
        // session of its own (one small request at a time).
        let keys = KeyService(stateDir: settings.daemon.stateDir, grants: account, bucket: bucket(1), logger: logger, audit: audit,
                              statusChanges: core.statusChanges, wakes: [account.statusChanges])
        let proxy = ConnectProxy.debugOverride
        if let proxy {
            logger.warning("debug build: every S3 connection of the uploads goes through the proxy \(proxy.host):\(proxy.port) (\(ConnectProxy.debugVariable))")
        }
        // upload.bandwidth_limit, slot by slot when it is a timetable: the uploader follows
        // the feed's rate, and holds the photos' uploads in its `0` slots.
        let bandwidth = BandwidthFeed()
        let schedule = BandwidthSchedule(settings: settings, feed: bandwidth, statusChanges: core.statusChanges, logger: logger)
        let uploader = UploaderService(context: context, bucket: bucket(max(8, settings.upload.concurrency * 2), proxy: proxy),
                                       gate: DaemonGate(core: core, account: account),
                                       options: .init(settings), payloadDigests: payloadDigests, rates: bandwidth)
        let scraper = MetricsScraper(core: core, exposition: MetricsExposition(counters: counters.registry))
        let metricsListener = MetricsListenerService(address: settings.metrics.listen, logger: logger) { await scraper.scrape() }
        // What the bucket holds: the uploader trusts it instead of asking one key at a time.
        let inventory = await InventoryService(context: context, bucket: bucket(8), gate: AccountGate(account: account),
                                               options: .init(settings))
        // After the upload: thumbnails and the photo rows the catalog stage publishes.
        let thumbnails = ThumbnailService(context: context, bucket: bucket(4), gate: DaemonGate(core: core, account: account),
                                          options: .init(settings))
        // After the upload: this NAS's manifest in the bucket (paths, names, times).
        // Sealed with the account's key, from the key service: nothing is written without
        // it (the changes wait, and its change feed wakes the stage).
        // Devices whose manifest this NAS refused (a downgrade, a rollback), in status.
        let alarms = ManifestAlarms(audit: audit, statusChanges: core.statusChanges)
        let manifest = await ManifestService(context: context, bucket: bucket(2), keys: keys, options: .init(settings),
                                             wakes: [.stream(account.statusChanges.changes())], alarms: alarms)
        // A side service: reading devices, manifests and objects back for `photolalactl restore`;
        // it opens encrypted manifests and remembers the newest head of each device it read.
        let restore = RestoreService(bucket: bucket(32), keys: keys, heads: ManifestHeads(database: database), options: .init(settings),
                                     logger: logger, audit: audit, alarms: alarms)
        // Photos the thumbnails left ready → rows in the apps' catalog.
        let catalog = CatalogService(context: context, bucket: bucket(2), gate: DaemonGate(core: core, account: account),
                                     options: .init(settings))
        // The NAS's own copy of the account (mirror.md), through a session of its own: its
        // downloads never take the connections uploads need.
        let mirror = MirrorService(context: context, bucket: bucket(8), account: AccountGate(account: account),
                                   user: UserPauseGate(core: core), schedule: bandwidth, sha256: LocalSHA256Lookup(database: database),
                                   options: .init(settings))
        // Telling the owner when backups stop: reads the status, keeps what it told in the queue database.
        let notify = NotifyService(options: .init(settings), source: NotifyBridge(core: core), store: NotifyBridge(core: core),
                                   logger: logger, audit: audit)
        // The status page (web.md): its changes go through the control socket's handler.
        let handlerSlot = HandlerSlot()
        let web = WebService(options: .init(settings), stateDir: settings.daemon.stateDir,
                             backend: DaemonWeb(core: core, handler: handlerSlot), audit: audit, logger: logger,
                             retryInterval: WebRetry.interval(ProcessInfo.processInfo.environment))

        // The daemon's parts, one entry each, in the order they start (they stop in the
        // reverse order). What each does beyond running — a status of its own, new
        // settings on reload, a fact for the attention rules — follows from what it is
        // (StageRoles.swift), so a new stage is this one line and its own file.
        let parts: [DaemonPart] = [
            .init("metrics", metricsListener), .init("web", web), .init("account", account), .init("keys", keys),
            .init("ingest", ingest), .init("uploader", uploader), .init("inventory", inventory),
            .init("thumbnails", thumbnails), .init("catalog", catalog), .init("manifest", manifest),
            .init("restore", restore), .init("mirror", mirror), .init("bandwidth-schedule", schedule),
            .init("notify", notify), .init("manifest-alarms", alarms),
        ]
        await core.add(parts)

        // Trapped before the control socket listens (let alone READY=1): a client that can
        // connect may send SIGTERM at once (tests and scripts take a connectable socket for
        // "up"), and a signal that arrives early must neither kill the daemon (the default
        // action; the process suite caught an exit by SIGTERM) nor be lost (SIGTERM before
        // the group runs still stops it cleanly).
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let stops = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let control = DaemonControl(core: core, account: account, ingest: ingest, inventory: inventory, restore: restore,
                                    metrics: scraper, notify: notify, audit: audit, keys: keys, web: web, mirror: mirror)
        handlerSlot.set(control)
        let server = try await startControlServer(control, audit: audit)

        await core.markRunning()
        let status = await core.status()
        notifier.ready(status: StatusSummary.oneLine(status))
        logger.notice("photolalad \(PhotolalaVersion.current) started", metadata: [
            "folders": "\(settings.watch.folders.count)", "socket": "\(settings.daemon.socket)", "state": "\(status.state.rawValue)",
        ])

        // The daemon's own machinery around the parts.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            // First, so it stops last: what happens until then is recorded.
            .init(service: audit, serviceName: "audit"),
            // The WAL copied into queue.db once writing stops, while the disk is awake anyway.
            .init(service: WALCheckpointer(database: database), serviceName: "checkpoint"),
            // Next, so it stops next to last: status answers while the others wind down.
            .init(service: ControlService(server: server), serviceName: "control"),
        ]
        services += parts.compactMap { part in part.service.map { .init(service: $0, serviceName: part.name) } }
        services += [
            .init(service: StatusLineService(core: core, notifier: notifier), serviceName: "status-line"),
            .init(service: ReloadService(core: core, configPath: configPath, instance: instance, notifier: notifier, logger: logger,
                                         parts: [audit] + parts.compactMap(\.reload), signals: hangups, audit: audit),
                  serviceName: "reload"),
        ]
        if let interval = notifier.watchdogInterval() {
            services.append(.init(service: WatchdogService(core: core, notifier: notifier, interval: interval), serviceName: "watchdog"))
        }
        var config = ServiceGroupConfiguration(services: services, logger: logger)
        config.maximumGracefulShutdownDuration = .seconds(10)
        config.maximumCancellationDuration = .seconds(3)
        let group = ServiceGroup(configuration: config)
        defer { logger.notice("photolalad stopped") }
        // SIGTERM/SIGINT are relayed by a child of this task, ended with the group; another
        // gives back the start-up code's memory once the services run.
        try await withThrowingDiscardingTaskGroup { relay in
            relay.addTask { await Self.releaseStartupMemory() }
            relay.addTask {
                for await signal in stops {
                    logger.notice("\(signal) received: stopping")
                    await group.triggerGracefulShutdown()
                }
            }
            try await group.run()
            relay.cancelAll()
        }
    }

    // MARK: - Startup
    // What runs once before the services: the process's protections, the state directory,
    // the queue database and the control socket.

    package enum StartupError: Error, CustomStringConvertible {
        case stateDirectory(String, String)
        package var description: String {
            switch self {
            case let .stateDirectory(path, why):
                "cannot use the state directory \(path): \(why) (set daemon.state_dir, or create it writable by the daemon's user)"
            }
        }
    }

    /// Secrets live in the state directory: nothing we create is readable by others, and a
    /// crash must not leave a core dump holding tokens.
    static func hardenProcess() {
        umask(0o077)
        _ = photolala_disable_core_dumps()
        photolala_tune_malloc()
    }

    /// Start-up code (argument parsing, TOML, migrations, TLS set-up) runs once: its pages
    /// leave the daemon's RSS once the services have started.
    static func releaseStartupMemory() async {
        guard (try? await Sleep.for(.seconds(3))) != nil else { return }
        photolala_trim_malloc()
        photolala_release_code_pages()
    }

    func openDatabase() async throws -> QueueDatabase {
        let (logger, path) = (self.logger, settings.daemon.stateDir + "/queue.db")
        // The whole file is checked, and a migration may rebuild a table: off the pool.
        let database = try await Blocking.run {
            try QueueDatabase.open(path: path) { aside, why in
                logger.error("the queue database was damaged (\(why)); moved it aside and started a new one — a full scan re-queues every file", metadata: ["moved_to": "\(aside)"])
            }
        }
        if let (names, seconds) = database.migrated {
            logger.notice("the queue database was brought up to date", metadata: [
                "migrations": "\(names.joined(separator: ","))", "ms": "\(Int(seconds * 1000))"])
        }
        database.onProblem { problem in
            if let problem { logger.error("\(problem)") } else { logger.notice("the queue database can be written again") }
        }
        return database
    }

    func startControlServer(_ handler: DaemonControl, audit: any AuditRecorder) async throws -> ControlServer {
        let (gid, groupNote) = Self.lookupGroup(settings.daemon.socketGroup)
        if let groupNote { logger.warning("\(groupNote)") }
        let policy = AccessPolicy(daemonUID: getuid(), readerGroup: gid, readerGroupName: settings.daemon.socketGroup)
        return try await ControlServer.start(path: settings.daemon.socket, group: settings.daemon.socketGroup, policy: policy,
                                             handler: handler, audit: audit, logger: logger)
    }

    package static func prepareStateDirectory(_ path: String) throws {
        let fm = FileManager.default
        var isDir: ObjCBool = false
        if fm.fileExists(atPath: path, isDirectory: &isDir) {
            guard isDir.boolValue else { throw StartupError.stateDirectory(path, "it is not a directory") }
        } else {
            do {
                try fm.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw StartupError.stateDirectory(path, "\(error.localizedDescription)")
            }
        }
        guard chmod(path, 0o700) == 0 || access(path, W_OK) == 0 else {
            throw StartupError.stateDirectory(path, String(cString: strerror(errno)))
        }
        guard access(path, R_OK | W_OK | X_OK) == 0 else {
            throw StartupError.stateDirectory(path, "not writable by uid \(getuid())")
        }
    }

    /// The gid of `daemon.socket_group`, or nil with a note when it does not exist.
    package static func lookupGroup(_ name: String) -> (UInt32?, String?) {
        var grp = group()
        var result: UnsafeMutablePointer<group>? = nil
        var buffer = [CChar](repeating: 0, count: 16384)
        if getgrnam_r(name, &grp, &buffer, buffer.count, &result) == 0, result != nil {
            return (grp.gr_gid, nil)
        }
        return (nil, "the group '\(name)' (daemon.socket_group) does not exist: the control socket is mode 0600, so only root and the daemon's user can use photolalactl (create the group: groupadd --system \(name))")
    }
}
