import Foundation

/// S3 as a whole failing — a 503 storm, resets, a black hole — as one backoff shared by
/// every uploader. Each object already backs off on its own, but with many objects
/// queued that alone keeps every worker busy trying the *next* object, so a dead or
/// throttling S3 would get a steady stream of requests for as long as it stays down
/// (the reliability suite measured ~12 requests a second through a 30 s storm). Here,
/// once an attempt fails transiently, every worker waits; when the wait is over one of
/// them probes with a single object, and only an answer from S3 lets the others go.
///
/// The waits are the daemon's one `Backoff` (1 s to 5 minutes, never below half the
/// step). Failures of attempts that started before the latest failure was recorded do
/// not escalate: four uploads cut off by the same outage are one failure, not four.
///
/// A pure value: the caller passes the time and the random draw.
package struct OutageBackoff: Sendable, Equatable {
    package enum Admission: Sendable, Equatable {
        /// No outage: take work.
        case go
        /// The wait is over: this worker tries one object; the others wait for its outcome.
        case probe
        /// Wait until the date (nil: until the probe's outcome is recorded).
        case wait(until: Date?)
    }

    package private(set) var schedule: Backoff
    package private(set) var until: Date?
    package private(set) var since: Date?
    package private(set) var lastError: String?
    package private(set) var probing = false
    /// Counts recorded failures; an attempt remembers the epoch it started in.
    package private(set) var epoch = 0

    package init(base: TimeInterval = 1, cap: TimeInterval = 300) {
        schedule = Backoff(base: base, cap: cap, jitter: .equal)
    }

    package var failures: Int { schedule.failures }
    package var isActive: Bool { failures > 0 }

    package mutating func admit(now: Date) -> Admission {
        guard failures > 0 else { return .go }
        if probing { return .wait(until: nil) }
        if let until, now < until { return .wait(until: until) }
        probing = true
        return .probe
    }

    /// An attempt begun in `startedIn` failed in a way that says S3 is not answering
    /// properly (5xx, throttling, reset, time-out).
    package mutating func failed(_ why: String, startedIn: Int, now: Date, random: Double) {
        lastError = why
        guard startedIn == epoch || failures == 0 else { return }
        epoch += 1
        if since == nil { since = now }
        probing = false
        until = now.addingTimeInterval(schedule.fail(random: random))
    }

    /// S3 answered: the outage is over.
    package mutating func succeeded() {
        schedule.reset()
        until = nil
        since = nil
        lastError = nil
        probing = false
    }

    /// The probe found no work, or its attempt said nothing about S3 (cancelled, the file
    /// changed): another worker may probe now.
    package mutating func inconclusive(probe: Bool) {
        if probe { probing = false }
    }
}
