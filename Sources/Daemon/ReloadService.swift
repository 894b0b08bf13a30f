import Config
import Logging
import PhotolalaCore
import ServiceLifecycle
import UnixSignals

/// SIGHUP re-reads the config file: a good file is applied, a bad one is logged with every
/// problem and the old settings stay. RELOADING=1 / READY=1 bracket the work for systemd.
struct ReloadService: Service {
    let core: DaemonCore
    let configPath: String
    let notifier: SystemdNotifier
    let logger: Logger
    /// Each takes the new settings through its own mapping (the one used at start).
    let parts: [any Reconfigurable]
    /// Trapped before READY=1: a SIGHUP that arrives early must not kill the daemon.
    let signals: UnixSignalsSequence

    func run() async throws {
        for await _ in signals.cancelOnGracefulShutdown() {
            notifier.reloading()
            do {
                let fresh = try ConfigLoader.load(path: configPath)
                let old = await core.settings
                await core.apply(fresh)
                for part in parts { await part.apply(fresh) }
                LogLevelSwitch.shared.set(fresh.daemon.logLevel)
                if fresh.daemon.socket != old.daemon.socket || fresh.daemon.stateDir != old.daemon.stateDir {
                    logger.warning("daemon.socket and daemon.state_dir take effect at the next restart")
                }
                logger.notice("configuration reloaded", metadata: ["path": "\(configPath)"])
            } catch {
                logger.error("configuration not reloaded, the previous settings stay: \(error.description.replacingOccurrences(of: "\n", with: "; "))")
            }
            notifier.notify("READY=1")
            notifier.status(StatusSummary.oneLine(await core.status()))
        }
    }
}
