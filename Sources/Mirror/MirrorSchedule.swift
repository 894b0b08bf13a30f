import Foundation
import PhotolalaCore

/// When the mirror looks at the account next (mirror.md "When it runs"), as a pure value
/// tested with plain dates: a full pass (the catalog, then a listing of every object) at
/// start, every `list_interval` and on `mirror --pass`; between them, every
/// `check_interval`, one GET of the catalog's pointer, and a pull when it changed; a pass
/// that failed is tried again sooner, with backoff, never more often than the check.
package struct MirrorSchedule: Sendable, Equatable {
    /// What is due.
    package enum Next: Sendable, Equatable {
        /// A full pass: the catalog and a listing of `photos/{userId}/`.
        case fullPass
        /// The catalog's pointer: has anything changed?
        case check
        /// Nothing until then (or a wake).
        case wait(until: Date)
    }

    /// Where the schedule stands (the stage's memory; a restart begins with a full pass).
    package struct Memory: Sendable, Equatable {
        /// When the last full pass completed (nil: none since the start).
        package var fullPassAt: Date?
        /// When the pointer was last read (by a check or a pass).
        package var checkedAt: Date?
        /// Passes or checks that failed in a row, and when the last one did.
        package var failures = 0
        package var failedAt: Date?
        /// `mirror --pass` asked for one.
        package var passAsked = false

        package init(fullPassAt: Date? = nil, checkedAt: Date? = nil, failures: Int = 0, failedAt: Date? = nil, passAsked: Bool = false) {
            self.fullPassAt = fullPassAt
            self.checkedAt = checkedAt
            self.failures = failures
            self.failedAt = failedAt
            self.passAsked = passAsked
        }
    }

    package var checkInterval: TimeInterval
    package var listInterval: TimeInterval
    /// After a failure: 30 s doubling, never past the check interval (nor 1 h).
    package var retry = Backoff(base: 30, cap: 3600, jitter: .equal, floor: 10)

    package init(checkInterval: TimeInterval, listInterval: TimeInterval) {
        self.checkInterval = checkInterval
        self.listInterval = listInterval
    }

    package func next(_ m: Memory, now: Date, random: Double) -> Next {
        if m.passAsked { return .fullPass }
        if m.failures > 0, let failedAt = m.failedAt {
            let at = failedAt.addingTimeInterval(min(max(checkInterval, 10), retry.delay(after: m.failures, random: random)))
            guard at <= now else { return .wait(until: at) }
            // The pass that failed is the one tried again.
            return m.fullPassAt == nil || m.fullPassAt!.addingTimeInterval(listInterval) <= now ? .fullPass : .check
        }
        guard let full = m.fullPassAt else { return .fullPass }
        let fullDue = full.addingTimeInterval(listInterval)
        if fullDue <= now { return .fullPass }
        let checkDue = (m.checkedAt ?? full).addingTimeInterval(checkInterval)
        if checkDue <= now { return .check }
        return .wait(until: min(fullDue, checkDue))
    }

    /// When status says the next look is (a check or a full pass): now, while one is due.
    package func nextLookAt(_ m: Memory, now: Date) -> Date {
        if case .wait(let until) = next(m, now: now, random: 0.5) { return until }
        return now
    }
}

/// When an archived object is looked at again once asked back (`thaw_archived`): the
/// first look after one check interval (a store that answers at once, a test's), then
/// doubling up to 6 h (S3's Bulk tier takes 5–12 h for GLACIER, up to 48 h for
/// DEEP_ARCHIVE). A copy that became readable and then expired before it was fetched
/// shows as archived again, with no request under way: it is asked back again.
package struct ThawRule: Sendable, Equatable {
    package var checkInterval: TimeInterval
    package var cap: TimeInterval = 6 * 3600
    /// Days the copy stays readable once brought back (`RestoreObject`'s Days).
    package var days = 7
    /// S3's cheapest tier: the mirror is never in a hurry (config.md: it costs money).
    package static let tier = "Bulk"

    package init(checkInterval: TimeInterval) {
        self.checkInterval = checkInterval
    }

    /// When the n-th look (1: the first) after asking is due.
    package func nextLook(askedAt: Date, looks: Int) -> Date {
        var wait = max(10, checkInterval)
        var total = wait
        var n = 1
        while n < looks {
            wait = min(cap, wait * 2)
            total += wait
            n += 1
        }
        return askedAt.addingTimeInterval(total)
    }

    /// What a HEAD of a thawing object says to do.
    package enum Step: Sendable, Equatable {
        /// Readable now: fetch it.
        case fetch
        /// Still being brought back.
        case wait
        /// No request under way and not readable (the copy expired, or the request was
        /// lost): ask again.
        case askAgain
        /// No longer archived at all (someone moved it back to a readable class).
        case readable
        /// The account no longer holds it.
        case gone
    }

    package static func step(storageClass: String?, restore: RestoreStatus?, exists: Bool) -> Step {
        guard exists else { return .gone }
        guard let storageClass, MirrorPlan.isArchived(storageClass) else { return .readable }
        switch restore {
        case .available?: return .fetch
        case .inProgress?: return .wait
        case nil: return .askAgain
        }
    }

    package enum RestoreStatus: Sendable, Equatable {
        case inProgress
        case available
    }
}
