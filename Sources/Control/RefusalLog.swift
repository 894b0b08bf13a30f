import NIOCore
import Synchronization

/// Refused requests are worth a log line, but a client retrying in a loop must not flood
/// the journal (and rotate away what matters): a few lines per uid a minute, then a count.
package final class RefusalLog: Sendable {
    private struct Window {
        var start: NIODeadline
        var logged = 0
        var suppressed = 0
    }
    private let state = Mutex<[UInt32: Window]>([:])
    package static let linesPerMinute = 5
    package init() {}

    /// Whether to log this refusal, and how many were left out before it.
    package func shouldLog(uid: UInt32, now: NIODeadline = .now()) -> (log: Bool, suppressed: Int) {
        state.withLock { windows in
            var w = windows[uid] ?? Window(start: now)
            if now - w.start > .minutes(1) {
                let left = w.suppressed
                w = Window(start: now, logged: 1)
                windows[uid] = w
                if windows.count > 1024 { windows = windows.filter { now - $0.value.start <= .minutes(1) } }
                return (true, left)
            }
            if w.logged < Self.linesPerMinute {
                w.logged += 1
                windows[uid] = w
                return (true, 0)
            }
            w.suppressed += 1
            windows[uid] = w
            return (false, 0)
        }
    }
}
