import Dispatch
import Synchronization

/// Sleeping that gives its memory back when it is cancelled.
///
/// `Task.sleep` on Linux enqueues its job with `dispatch_after`, which cannot be taken
/// back: a cancelled sleep returns at once, but its job and the task around it stay
/// allocated until the deadline passes (swiftlang/swift#60441, open; about 780 bytes a
/// sleep here). The stages race a sleep against their wake signal, and every commit wakes
/// them, so a busy daemon cancelled about a hundred sleeps a second, each holding its
/// memory for minutes to hours: the soak measured 146 MB an hour of growth with a
/// library of constant size (docs/decisions.md "A cancelled sleep"). A dispatch timer
/// source per sleep is no cure either: a cancelled one still leaves some 30 bytes behind.
/// So every sleep of the process waits in one table, served by one timer that is moved
/// to the earliest deadline; a cancelled sleep leaves the table at once.
package enum Sleep {
    /// Returns at `deadline` (at once when it is past); throws `CancellationError` when the
    /// task is cancelled first, and then keeps nothing.
    package static func until(_ deadline: ContinuousClock.Instant) async throws {
        try await SleepTable.shared.sleep(until: deadline)
    }

    /// Sleeps `duration` from now.
    package static func `for`(_ duration: Duration) async throws {
        try await until(.now.advanced(by: duration))
    }
}

/// The table of sleeps and the one timer that serves it (one for the process; a test
/// makes its own to count what it holds).
package final class SleepTable: Sendable {
    package static let shared = SleepTable()

    package init() {}

    /// `Sleep.until` on this table.
    package func sleep(until deadline: ContinuousClock.Instant) async throws {
        let remaining = ContinuousClock.now.duration(to: deadline)
        guard remaining > .zero else { return try Task.checkCancellation() }
        let id = ticket()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                add(id, after: remaining, continuation)
            }
        } onCancel: {
            cancel(id)
        }
    }

    private struct Sleeper {
        var at: UInt64
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var sleepers: [UInt64: Sleeper] = [:]
        /// Tickets given out whose continuation is not added yet, and those of them
        /// cancelled meanwhile (the cancellation handler can run first): both only between
        /// `ticket()` and `add`, so they stay as small as that moment is short.
        var issued: Set<UInt64> = []
        var cancelledEarly: Set<UInt64> = []
        var nextTicket: UInt64 = 0
        /// Where the timer is set (uptime nanoseconds), nil when it is not.
        var armedAt: UInt64?
        var timer: (any DispatchSourceTimer)?
    }

    private let state = Mutex(State())

    /// Sleeps waiting now, and tickets given out but not yet added (none once settled).
    package var waiting: Int { state.withLock { $0.sleepers.count + $0.issued.count + $0.cancelledEarly.count } }

    private func ticket() -> UInt64 {
        state.withLock { s in
            s.nextTicket &+= 1
            s.issued.insert(s.nextTicket)
            return s.nextTicket
        }
    }

    private func add(_ id: UInt64, after remaining: Duration, _ continuation: CheckedContinuation<Void, any Error>) {
        let (seconds, attoseconds) = remaining.components
        let scaled = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let nanoseconds = scaled.overflow ? UInt64(Int64.max) : UInt64(clamping: scaled.partialValue &+ attoseconds / 1_000_000_000)
        let now = DispatchTime.now().uptimeNanoseconds
        let at = now.addingReportingOverflow(nanoseconds).overflow ? UInt64.max : now + nanoseconds
        let cancelled = state.withLock { s -> Bool in
            s.issued.remove(id)
            if s.cancelledEarly.remove(id) != nil { return true }
            s.sleepers[id] = Sleeper(at: at, continuation: continuation)
            if s.armedAt.map({ at < $0 }) ?? true { arm(&s, at: at) }
            return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
    }

    private func cancel(_ id: UInt64) {
        let sleeper = state.withLock { s -> Sleeper? in
            guard let sleeper = s.sleepers.removeValue(forKey: id) else {
                // Not added yet: `add` resumes it. Already woken: nothing to do.
                if s.issued.contains(id) { s.cancelledEarly.insert(id) }
                return nil
            }
            return sleeper
        }
        // An early fire of the timer finds nothing due and moves it on: no re-arm here.
        sleeper?.continuation.resume(throwing: CancellationError())
    }

    private func fire() {
        let due = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
            let now = DispatchTime.now().uptimeNanoseconds
            var due: [CheckedContinuation<Void, any Error>] = []
            var earliest: UInt64?
            for (id, sleeper) in s.sleepers {
                if sleeper.at <= now {
                    due.append(sleeper.continuation)
                    s.sleepers[id] = nil
                } else if earliest.map({ sleeper.at < $0 }) ?? true {
                    earliest = sleeper.at
                }
            }
            s.armedAt = nil
            if let earliest { arm(&s, at: earliest) }
            return due
        }
        for continuation in due { continuation.resume() }
    }

    /// Moves the one timer (made at the first sleep) to `at`; the timer is rescheduled,
    /// never made again, so arming costs no memory.
    private func arm(_ s: inout State, at: UInt64) {
        if s.timer == nil {
            let timer = DispatchSource.makeTimerSource()
            timer.setEventHandler { [unowned self] in fire() }
            timer.schedule(deadline: .distantFuture)
            timer.activate()
            s.timer = timer
        }
        s.armedAt = at
        s.timer?.schedule(deadline: DispatchTime(uptimeNanoseconds: at), leeway: .milliseconds(1))
    }
}
