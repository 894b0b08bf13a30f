import Foundation
import PhotolalaCore

/// A change the queue could not record (a full disk) is put back by rescanning every
/// folder, 5 s, 10 s, … up to 5 minutes apart, until a whole rescan records without an
/// error. Scans re-read nothing already hashed, so a long outage costs listings, not
/// hashing. The ingest stage performs the rescans; this value decides when.
package struct WriteRecovery {
    package static let schedule = Backoff(base: 5, cap: 300, jitter: .none)

    private var lost = false
    private var recovering = false
    private var backoff = Self.schedule

    /// A write failed. The wait before the first rescan when a recovery is to start now,
    /// nil when one is under way already (it sees this failure).
    mutating func failed() -> TimeInterval? {
        lost = true
        guard !recovering else { return nil }
        recovering = true
        backoff = Self.schedule
        return backoff.fail(random: 0)
    }

    /// A rescan begins: the failures from now on are the ones it did not put back.
    mutating func rescanBegins() {
        lost = false
    }

    /// The rescan ended: nil when it recorded everything (the recovery is over), otherwise
    /// the wait before the next one.
    mutating func rescanEnded() -> TimeInterval? {
        guard lost else {
            recovering = false
            return nil
        }
        return backoff.fail(random: 0)
    }

    /// The recovery stopped with the stage.
    mutating func stopped() {
        recovering = false
    }
}

/// After a burst of work (a first scan queues and hashes a hundred thousand files), the
/// heap keeps what the burst freed and SQLite keeps its page caches: 10 to 15 MB the
/// daemon no longer needs. Two seconds after the work runs out, it is given back.
struct MemoryRelease {
    static let delay: Duration = .seconds(2)

    private var workSinceRelease = false
    private var checkScheduled = false

    /// Scans or hashing ran.
    mutating func worked() {
        workSinceRelease = true
    }

    /// The stage may be idle: true when a check is to be scheduled in `delay`.
    mutating func mayBeIdle(_ idle: Bool) -> Bool {
        guard workSinceRelease, idle, !checkScheduled else { return false }
        checkScheduled = true
        return true
    }

    /// The scheduled check: true when memory is to be given back now (still idle);
    /// busy again, the next time the work runs out does it.
    mutating func check(idle: Bool) -> Bool {
        checkScheduled = false
        guard idle else { return false }
        workSinceRelease = false
        return true
    }
}
