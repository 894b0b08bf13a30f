import Config
import Logging
import PhotolalaCore
import ServiceLifecycle
import UnixSignals

/// SIGHUP re-reads the config file: a good file is applied, a bad one is logged with every
/// problem and the old settings stay. RELOADING=1 / READY=1 bracket the work for systemd.
/// Each reload is in the audit trail as systemd's (it sends SIGHUP: `systemctl reload`).
package struct ReloadService: Service {
    let core: DaemonCore
    let configPath: String
    var instance: Instance? = nil
    let notifier: SystemdNotifier
    let logger: Logger
    /// Each takes the new settings through its own mapping (the one used at start).
    let parts: [any Reconfigurable]
    /// Trapped before READY=1: a SIGHUP that arrives early must not kill the daemon.
    let signals: UnixSignalsSequence
    let audit: any AuditRecorder

    package init(core: DaemonCore, configPath: String, instance: Instance? = nil, notifier: SystemdNotifier, logger: Logger,
                 parts: [any Reconfigurable], signals: UnixSignalsSequence, audit: any AuditRecorder) {
        self.core = core
        self.configPath = configPath
        self.instance = instance
        self.notifier = notifier
        self.logger = logger
        self.parts = parts
        self.signals = signals
        self.audit = audit
    }

    package func run() async throws {
        for await _ in signals.cancelOnGracefulShutdown() {
            await reload()
        }
    }

    /// One reload, as a SIGHUP asks for it.
    package func reload() async {
        notifier.reloading()
        do {
            let fresh = try ConfigLoader.load(path: configPath, instance: instance)
            let old = await core.settings
            await core.apply(fresh)
            for part in parts { await part.apply(fresh) }
            LogLevelSwitch.shared.set(fresh.daemon.logLevel)
            if fresh.daemon.socket != old.daemon.socket || fresh.daemon.stateDir != old.daemon.stateDir {
                logger.warning("daemon.socket and daemon.state_dir take effect at the next restart")
            }
            logger.notice("configuration reloaded", metadata: ["path": "\(configPath)"])
            let changed = Self.changedSections(old, fresh)
            audit.record(AuditEvent(.configReload, by: .systemd, .ok, [
                "path": .string(configPath), "changed": .string(changed.isEmpty ? "nothing" : changed.joined(separator: ", ")),
            ]))
        } catch {
            let problem = error.description.replacingOccurrences(of: "\n", with: "; ")
            logger.error("configuration not reloaded, the previous settings stay: \(problem)")
            audit.record(AuditEvent(.configReload, by: .systemd, .failed, ["path": .string(configPath), "problem": .string(problem)]))
        }
        notifier.notify("READY=1")
        notifier.status(StatusSummary.oneLine(await core.status()))
    }

    /// The config file's sections whose settings differ, in the file's words.
    package static func changedSections(_ old: Settings, _ new: Settings) -> [String] {
        var out: [String] = []
        func note(_ name: String, _ differs: Bool) { if differs { out.append(name) } }
        note("daemon", old.daemon != new.daemon)
        note("account", old.account != new.account)
        note("credentials", old.credentials != new.credentials)
        note("watch", old.watch != new.watch)
        note("upload", old.upload != new.upload)
        note("catalog", old.catalog != new.catalog)
        note("tls", old.tls != new.tls)
        note("metrics", old.metrics != new.metrics)
        note("notify", old.notify != new.notify)
        note("audit", old.audit != new.audit)
        // A section this list does not know yet still counts.
        if out.isEmpty && old != new { out.append("other") }
        return out
    }
}
