import Foundation
import PhotolalaCore

/// When the catalog stage reads or publishes the catalog (app-catalog.md, "When"):
///
/// - Photos waiting for their rows are published at most once per `publishInterval`
///   while a backup runs, so the apps see it progress, and at once when the queue has
///   drained, so the last photos do not wait out the interval. A drain publish still
///   waits `drainSpacing` after the previous one: a trickle of single photos must not
///   rewrite an 85 MB catalog every few seconds.
/// - With nothing waiting, the catalog is read every `checkInterval` to put back rows of
///   ours an app dropped (a publish reads it too, so it counts as a check). With no row
///   of ours in it either there is nothing to look after: the bucket is left alone.
/// - A failed attempt (S3 unreachable, the catalog unreadable, races lost) is retried
///   after a backoff, whatever the intervals say, until one succeeds.
///
/// A pure value: the service passes the time and the queue's counts, tests plain dates.
package struct CatalogSchedule: Sendable, Equatable {
    package enum Decision: Sendable, Equatable {
        /// Rows are waiting: read the catalog, merge them in, publish.
        case publish
        /// Nothing is waiting: read the catalog and put back what an app dropped.
        case check
        case wait(until: Date)
        /// Nothing of ours to publish or to look after: wait for rows to become ready.
        case idle
    }

    package var publishInterval: TimeInterval
    package var checkInterval: TimeInterval
    package private(set) var lastPublishAt: Date?
    /// The last successful read of the catalog, by a check or a publish.
    package private(set) var lastReadAt: Date?
    /// Set after a failure: nothing before it, and the next attempt is due then.
    package private(set) var retryAt: Date?
    package private(set) var backoff: Backoff
    /// The last run was killed while recording a sync: what the queue and the ledger say
    /// may disagree, so the catalog is read at once, even with nothing seemingly of ours.
    package private(set) var unsettled = false

    package init(publishInterval: TimeInterval, checkInterval: TimeInterval, lastPublishAt: Date? = nil,
                lastReadAt: Date? = nil,
                backoff: Backoff = Backoff(base: 15, cap: 900, jitter: .equal, floor: 5)) {
        self.publishInterval = publishInterval
        self.checkInterval = checkInterval
        self.lastPublishAt = lastPublishAt
        self.lastReadAt = lastReadAt
        self.backoff = backoff
    }

    /// The least time between two publishes when the queue drains: a minute, or the
    /// publish interval if that is shorter.
    package var drainSpacing: TimeInterval { min(publishInterval, 60) }

    /// What to do now, given how many photos wait for their rows, how many of ours the
    /// catalog held when last read, and whether nothing is left to read, upload or preview.
    package func next(now: Date, pending: Int, listed: Int, drained: Bool) -> Decision {
        if pending == 0 && listed == 0 && !unsettled { return .idle }
        if let retryAt {
            guard now >= retryAt else { return .wait(until: retryAt) }
            return pending > 0 ? .publish : .check
        }
        if unsettled { return pending > 0 ? .publish : .check }
        if pending > 0 {
            // A publish reads the catalog too, so a check waits for it rather than
            // publishing before the interval.
            let last = lastPublishAt ?? .distantPast
            var due = last.addingTimeInterval(publishInterval)
            if drained { due = min(due, last.addingTimeInterval(drainSpacing)) }
            return now >= due ? .publish : .wait(until: due)
        }
        let checkDue = (lastReadAt ?? .distantPast).addingTimeInterval(checkInterval)
        return now >= checkDue ? .check : .wait(until: checkDue)
    }

    /// A new snapshot and pointer went up.
    package mutating func published(now: Date) {
        lastPublishAt = now
        read(now: now)
    }

    /// The catalog was read and holds every row of ours (nothing had to be published).
    package mutating func read(now: Date) {
        lastReadAt = now
        unsettled = false
        retryAt = nil
        backoff.reset()
    }

    /// The last run's recording of a sync was cut short: read the catalog first thing.
    package mutating func recordingCut() {
        unsettled = true
    }

    /// An attempt failed or found the catalog unreadable; returns when to try again.
    @discardableResult
    package mutating func failed(now: Date, random: Double) -> Date {
        let at = now.addingTimeInterval(backoff.fail(random: random))
        retryAt = at
        return at
    }

    /// New intervals on reload; what already happened keeps counting.
    package mutating func reconfigure(publishInterval: TimeInterval, checkInterval: TimeInterval) {
        self.publishInterval = publishInterval
        self.checkInterval = checkInterval
    }
}
