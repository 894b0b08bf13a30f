#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

extension WatchTree {
    /// The wait after one more failure, on the clock the watcher's timers run on.
    static func nextWait(_ backoff: inout Backoff) -> Duration {
        Backoff.duration(backoff.fail(random: Double.random(in: 0..<1)))
    }

    /// What is at `path` now (`S_IFDIR`, `S_IFREG`, …), nil when nothing is: an event
    /// names a path that may have been renamed or replaced since.
    static func fileType(_ path: String, follow: Bool) -> mode_t? {
        var st = stat()
        let rc = follow ? stat(path, &st) : lstat(path, &st)
        return rc == 0 ? st.st_mode & S_IFMT : nil
    }

    /// A number from /proc (the inotify limits), for the log lines that say which one to raise.
    static func readProcInt(_ path: String) -> Int? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = retryingInterrupts { read(fd, &bytes, bytes.count) }
        guard n > 0 else { return nil }
        return Int(String(decoding: bytes[..<n], as: UTF8.self).trimmingCharacters(in: " \n"))
    }

    /// A duration as the config spells it ("15m"), for log lines.
    static func human(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        if seconds >= 3600, seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        if seconds >= 60, seconds % 60 == 0 { return "\(seconds / 60)m" }
        if seconds >= 1 { return "\(seconds)s" }
        return "\(duration.components.attoseconds / 1_000_000_000_000_000)ms"
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let c = s.first, set.contains(c) { s.removeFirst() }
        while let c = s.last, set.contains(c) { s.removeLast() }
        return String(s)
    }
}
