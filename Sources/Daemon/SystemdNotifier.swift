#if canImport(Glibc)
import Glibc
#endif
import CSystemd

/// The systemd notify protocol through libsystemd's sd_notify. Without NOTIFY_SOCKET
/// every call is a no-op, so the daemon runs the same by hand.
package struct SystemdNotifier: Sendable {
    package init() {}

    package func notify(_ state: String) {
        _ = sd_notify(0, state)
    }

    package func ready(status: String) { notify("READY=1\nSTATUS=\(Self.oneLine(status))") }
    package func status(_ line: String) { notify("STATUS=\(Self.oneLine(line))") }
    package func stopping() { notify("STOPPING=1\nSTATUS=Stopping") }
    package func watchdog() { notify("WATCHDOG=1") }

    /// RELOADING=1 must carry MONOTONIC_USEC for systemd ≥ 253's Type=notify-reload; older ones ignore it.
    package func reloading() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let usec = UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
        notify("RELOADING=1\nMONOTONIC_USEC=\(usec)\nSTATUS=Reloading configuration")
    }

    /// The watchdog interval systemd asked for (WATCHDOG_USEC), or nil when it is off.
    package func watchdogInterval() -> Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(usec))
    }

    static func oneLine(_ s: String) -> String {
        String(s.map { $0.isNewline ? " " : $0 })
    }
}
