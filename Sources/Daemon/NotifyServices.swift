import Logging
import PhotolalaCore
import ServiceLifecycle

/// Pings systemd's watchdog at half of WATCHDOG_USEC, but only while the daemon's core
/// answers: a wedged actor stops the pings and systemd restarts us.
struct WatchdogService: Service {
    let core: DaemonCore
    let notifier: SystemdNotifier
    let interval: Duration

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            _ = await core.isUserPaused   // a hop onto the core: a wedged actor stops the pings
            notifier.watchdog()
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval / 2) }
        }
    }
}

/// Keeps systemd's STATUS= line current and says STOPPING=1 the moment shutdown begins.
/// Event-driven (no polling): wakes on a change, then waits a second so a burst of
/// changes costs one update.
struct StatusLineService: Service {
    let core: DaemonCore
    let notifier: SystemdNotifier

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var last = ""
            for await _ in core.changes() {
                let line = StatusSummary.oneLine(await core.status())
                if line != last {
                    notifier.status(line)
                    last = line
                }
                try await Task.sleep(for: .seconds(1))
            }
        }
        notifier.stopping()
        await core.markStopping()
    }
}
