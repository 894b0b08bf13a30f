#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

/// The kernel's inotify limits (`/proc/sys/fs/inotify/…`) and what the log says when one
/// is reached: which sysctl to raise, by how much, and what the watcher does meanwhile
/// (scans on a schedule instead of watching). Each sentence is said once per problem.
package enum InotifyLimit: String {
    case instances = "max_user_instances"
    case watches = "max_user_watches"
    case queuedEvents = "max_queued_events"

    /// The limit now; nil when /proc cannot tell.
    package var current: Int? {
        let fd = open("/proc/sys/fs/inotify/" + rawValue, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = retryingInterrupts { read(fd, &bytes, bytes.count) }
        guard n > 0 else { return nil }
        return Int(String(decoding: bytes[..<n].filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\n") },
                          as: UTF8.self))
    }

    /// No inotify instance could be made (`err`): every folder is scanned every `rescan`.
    static func noInstance(_ err: Int32, rescan: Duration) -> String {
        let limit = instances.current.map(String.init) ?? "unknown"
        return """
            cannot create an inotify instance (\(errnoText(err)); fs.inotify.max_user_instances = \(limit)): \
            all folders are scanned every \(human(rescan)) instead of watched. \
            \(raise) sysctl -w fs.inotify.max_user_instances=1024 (and persist in /etc/sysctl.d/)
            """
    }

    /// Who can raise a limit: in a container the kernel's limits are the host's, and only
    /// the host can change them (a NAS's own settings; Synology's are low). Until then the
    /// scans on a schedule are the safety net, and the line says so.
    static var raise: String {
        inContainer ? "Raise it on the host (a container cannot change it; until then the scans are the safety net):" : "Raise it:"
    }

    /// Docker leaves /.dockerenv, Podman /run/.containerenv; systemd-nspawn and others set $container.
    static let inContainer: Bool = {
        if access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0 { return true }
        return getenv("container").map { String(cString: $0) }.map { !$0.isEmpty } ?? false
    }()

    /// The watch limit (`limit`) left `unwatched` directories to be scanned every `rescan`.
    static func watchesReached(limit: Int, unwatched: Int, rescan: Duration) -> String {
        """
        inotify watch limit reached (fs.inotify.max_user_watches = \(limit)): \(unwatched) directories are scanned \
        every \(human(rescan)) instead of watched. \
        \(raise) sysctl -w fs.inotify.max_user_watches=\(max(524_288, limit * 2)) (and persist in /etc/sysctl.d/)
        """
    }

    /// The event queue overflowed: events were lost.
    static func overflowed() -> String {
        let queued = queuedEvents.current.map(String.init) ?? "unknown"
        return "inotify queue overflowed (fs.inotify.max_queued_events = \(queued)): events were lost, rescanning the watched folders"
    }

    /// A duration as the config spells it ("15m"), for log lines.
    package static func human(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        if seconds >= 3600, seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        if seconds >= 60, seconds % 60 == 0 { return "\(seconds / 60)m" }
        if seconds >= 1 { return "\(seconds)s" }
        return "\(duration.components.attoseconds / 1_000_000_000_000_000)ms"
    }
}
