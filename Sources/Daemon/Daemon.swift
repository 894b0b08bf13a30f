/// Daemon: wires the services into one ServiceGroup: lifecycle, signals, reload and the systemd notify protocol.
#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Backend
import Control
import Ingest
import Credentials
import Foundation
import Logging
import PhotolalaCore
import Queue
import ServiceLifecycle
import Upload
import UnixSignals

/// Starts photolalad: state directory, database and control socket first (READY=1 only
/// once all three work), then the services in dependency order until SIGTERM/SIGINT.
public struct Daemon: Sendable {
    public enum StartupError: Error, CustomStringConvertible {
        case stateDirectory(String, String)
        public var description: String {
            switch self {
            case let .stateDirectory(path, why):
                "cannot use the state directory \(path): \(why) (set daemon.state_dir, or create it writable by the daemon's user)"
            }
        }
    }

    let settings: Settings
    let configPath: String
    let logger: Logger
    let notifier = SystemdNotifier()

    public init(settings: Settings, configPath: String) {
        self.settings = settings
        self.configPath = configPath
        self.logger = Logger(label: "photolalad")
    }

    public func run() async throws {
        // Secrets live in the state directory: nothing we create is readable by others,
        // and a crash must not leave a core dump holding tokens.
        umask(0o077)
        _ = photolala_disable_core_dumps()
        photolala_tune_malloc()

        try Self.prepareStateDirectory(settings.daemon.stateDir)
        let dbPath = settings.daemon.stateDir + "/queue.db"
        let database = try QueueDatabase.open(path: dbPath) { aside, why in
            logger.error("the queue database was damaged (\(why)); moved it aside and started a new one — a full scan re-queues every file", metadata: ["moved_to": "\(aside)"])
        }
        database.onProblem { problem in
            if let problem { logger.error("\(problem)") } else { logger.notice("the queue database can be written again") }
        }
        let core = try DaemonCore(settings: settings, database: database, logger: logger)
        var hooks = DaemonHooks()

        let account = AccountService(
            stateDir: settings.daemon.stateDir,
            backend: BackendClient(baseURL: settings.account.apiURL, logger: logger),
            deviceName: settings.account.deviceName ?? HostName.current(),
            refreshBeforeExpiry: settings.credentials.refreshBeforeExpiry,
            appleCheckInterval: settings.credentials.appleCheckInterval, logger: logger)
        await account.restore()
        await core.addStatusContributor { s in await account.contribute(to: &s) }
        hooks.login = DaemonHooks.login(account)
        hooks.logout = DaemonHooks.logout(account)
        hooks.resume = { await account.resume() }
        try database.resetInterruptedUploads()
        let ingest = IngestService(database: database, options: .init(settings), logger: logger, statusChanges: core.statusChanges)
        // One pass per photo when S3 signs payloads: the hasher takes the SHA-256 for the uploader.
        let payloadDigests = ingest.payloadDigests
        await core.addStatusContributor { s in await ingest.contribute(to: &s) }
        let uploader = UploaderService(database: database, account: account, gate: DaemonGate(core: core, account: account),
                                       options: .init(settings.upload, followSymlinks: settings.watch.followSymlinks), logger: logger,
                                       payloadDigests: payloadDigests)
        await core.addStatusContributor { s in await uploader.contribute(to: &s) }
        // TEMPORARY until the uploader waits on the queue's signal itself.
        Task {
            let ready = database.signals.readyToUpload
            var since = await ready.current
            while !Task.isCancelled {
                await ready.wait(since: since, until: nil as Date?)
                since = await ready.current
                uploader.poke()
            }
        }
        hooks.rescan = {
            await ingest.rescanAll(reason: "photolalactl rescan")
            return .json(ControlReply(ok: true, message: "Rescanning every watched folder."))
        }
        var accountHooks = AccountService.Hooks()
        accountHooks.pausesChanged = { await core.changed() }
        accountHooks.credentialsDropped = { await uploader.cancelInFlight() }
        await account.setHooks(accountHooks)
        hooks.resume = {
            await account.resume()
            uploader.poke()
        }
        hooks.retry = {
            do {
                let (count, _) = try database.retryFailed()
                uploader.poke()
                await core.changed()
                return .json(ControlReply(ok: true, message: count == 0 ? "No failed files." : "\(count) failed file\(count == 1 ? "" : "s") put back in the queue."))
            } catch {
                return .error(500, "internal", "could not retry: \(error)")
            }
        }
        hooks.queue = { request in DaemonHooks.queue(database, request) }

        // Trapped before the control socket listens (let alone READY=1): a client that can
        // connect may send SIGTERM at once (tests and scripts take a connectable socket for
        // "up"), and a signal that arrives early must neither kill the daemon (the default
        // action; the process suite caught an exit by SIGTERM) nor be lost (SIGTERM before
        // the group runs still stops it cleanly).
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let stops = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let (gid, groupNote) = Self.lookupGroup(settings.daemon.socketGroup)
        if let groupNote { logger.warning("\(groupNote)") }
        let policy = AccessPolicy(daemonUID: getuid(), readerGroup: gid, readerGroupName: settings.daemon.socketGroup)
        let server = try await ControlServer.start(
            path: settings.daemon.socket, group: settings.daemon.socketGroup, policy: policy,
            handler: DaemonControl(core: core, hooks: hooks), logger: logger)

        await core.markRunning()
        let status = await core.status()
        notifier.ready(status: StatusSummary.oneLine(status))
        // Start-up code (argument parsing, TOML, migrations, TLS set-up) runs once: let
        // its pages leave the daemon's RSS once the services have started.
        Task.detached(priority: .background) {
            try? await Task.sleep(for: .seconds(3))
            photolala_trim_malloc()
            photolala_release_code_pages()
        }
        logger.notice("photolalad \(PhotolalaVersion.current) started", metadata: [
            "folders": "\(settings.watch.folders.count)", "socket": "\(settings.daemon.socket)", "state": "\(status.state.rawValue)",
        ])

        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            // First, so it stops last: status answers while the others wind down.
            .init(service: ControlService(server: server), serviceName: "control"),
            .init(service: account, serviceName: "account"),
            .init(service: ingest, serviceName: "ingest"),
            .init(service: uploader, serviceName: "uploader"),
            .init(service: StatusLineService(core: core, notifier: notifier), serviceName: "status-line"),
            .init(service: ReloadService(core: core, configPath: configPath, notifier: notifier, logger: logger,
                                         onApply: { _, fresh in
                                             await uploader.apply(.init(fresh.upload, followSymlinks: fresh.watch.followSymlinks))
                                             await ingest.apply(.init(fresh))
                                             await account.reconfigure(
                                                 backend: BackendClient(baseURL: fresh.account.apiURL, logger: logger),
                                                 deviceName: fresh.account.deviceName ?? HostName.current(),
                                                 refreshBeforeExpiry: fresh.credentials.refreshBeforeExpiry,
                                                 appleCheckInterval: fresh.credentials.appleCheckInterval)
                                         }, signals: hangups),
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
        let stopper = Task {
            for await signal in stops {
                logger.notice("\(signal) received: stopping")
                await group.triggerGracefulShutdown()
            }
        }
        defer { stopper.cancel() }
        try await group.run()
    }

    static func prepareStateDirectory(_ path: String) throws {
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
    static func lookupGroup(_ name: String) -> (UInt32?, String?) {
        var grp = group()
        var result: UnsafeMutablePointer<group>? = nil
        var buffer = [CChar](repeating: 0, count: 16384)
        if getgrnam_r(name, &grp, &buffer, buffer.count, &result) == 0, result != nil {
            return (grp.gr_gid, nil)
        }
        return (nil, "the group '\(name)' (daemon.socket_group) does not exist: the control socket is mode 0600, so only root and the daemon's user can use photolalactl (create the group: groupadd --system \(name))")
    }
}
