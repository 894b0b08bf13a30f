import Foundation
import PhotolalaCore
import Testing
import Catalog

/// When the catalog is published or read, with plain dates.
@Suite struct CatalogScheduleTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    func at(_ seconds: TimeInterval) -> Date { t0.addingTimeInterval(seconds) }

    func schedule(publish: TimeInterval = 600, check: TimeInterval = 3600) -> CatalogSchedule {
        CatalogSchedule(publishInterval: publish, checkInterval: check,
                        backoff: Backoff(base: 15, cap: 900, jitter: .none, floor: 5))
    }

    @Test func withNothingOfOursToPublishOrLookAfterTheBucketIsLeftAlone() {
        var s = schedule()
        #expect(s.next(now: t0, pending: 0, listed: 0, drained: true) == .idle)
        s.failed(now: t0, random: 0)
        #expect(s.next(now: at(3600), pending: 0, listed: 0, drained: false) == .idle)
        #expect(s.next(now: at(3600), pending: 1, listed: 0, drained: false) == .publish)
    }

    @Test func aRecordingCutShortIsReadAgainAtOnceEvenWithNothingSeeminglyOurs() {
        var s = schedule()
        s.published(now: t0)
        s.recordingCut()
        #expect(s.next(now: at(1), pending: 0, listed: 0, drained: true) == .check)
        #expect(s.next(now: at(1), pending: 5, listed: 0, drained: false) == .publish, "without the interval")
        s.failed(now: at(1), random: 0)
        #expect(s.next(now: at(2), pending: 0, listed: 0, drained: true) == .wait(until: at(16)), "a failed read backs off")
        s.read(now: at(16))
        #expect(s.next(now: at(17), pending: 0, listed: 0, drained: true) == .idle)
    }

    @Test func theFirstWakeReadsTheCatalogAndPublishesWhatWaits() {
        let s = schedule()
        #expect(s.next(now: t0, pending: 0, listed: 1, drained: true) == .check)
        #expect(s.next(now: t0, pending: 3, listed: 1, drained: false) == .publish)
    }

    @Test func whileABackupRunsRowsArePublishedAtMostOncePerInterval() {
        var s = schedule()
        s.published(now: t0)
        #expect(s.next(now: at(1), pending: 50, listed: 1, drained: false) == .wait(until: at(600)))
        #expect(s.next(now: at(599), pending: 5000, listed: 1, drained: false) == .wait(until: at(600)))
        #expect(s.next(now: at(600), pending: 5000, listed: 1, drained: false) == .publish)
    }

    @Test func whenTheQueueDrainsTheLastRowsGoOutWithoutWaitingTheInterval() {
        var s = schedule()
        s.published(now: t0)
        #expect(s.next(now: at(61), pending: 7, listed: 1, drained: true) == .publish)
        // But not more than once a minute: a trickle of single photos.
        #expect(s.next(now: at(30), pending: 1, listed: 1, drained: true) == .wait(until: at(60)))
    }

    @Test func aShortPublishIntervalIsAlsoTheDrainSpacing() {
        var s = schedule(publish: 2)
        #expect(s.drainSpacing == 2)
        s.published(now: t0)
        #expect(s.next(now: at(1), pending: 1, listed: 1, drained: true) == .wait(until: at(2)))
        #expect(s.next(now: at(2), pending: 1, listed: 1, drained: true) == .publish)
        #expect(schedule(publish: 86400).drainSpacing == 60)
    }

    @Test func withNothingWaitingTheCatalogIsReadEveryCheckInterval() {
        var s = schedule()
        s.read(now: t0)
        #expect(s.next(now: at(10), pending: 0, listed: 1, drained: true) == .wait(until: at(3600)))
        #expect(s.next(now: at(3600), pending: 0, listed: 1, drained: true) == .check)
        // A publish is a read too.
        s.published(now: at(3000))
        #expect(s.next(now: at(3600), pending: 0, listed: 1, drained: true) == .wait(until: at(6600)))
    }

    @Test func rowsWaitingDeferTheCheckToTheirPublish() {
        var s = schedule(publish: 600, check: 60)
        s.published(now: t0)
        #expect(s.next(now: at(120), pending: 1, listed: 1, drained: false) == .wait(until: at(600)))
    }

    @Test func aFailureIsRetriedAfterABackoffWhateverTheIntervals() {
        var s = schedule()
        s.published(now: t0)
        #expect(s.failed(now: at(10), random: 0.5) == at(25))
        #expect(s.next(now: at(20), pending: 9, listed: 1, drained: true) == .wait(until: at(25)))
        #expect(s.next(now: at(25), pending: 9, listed: 1, drained: false) == .publish, "the interval does not hold back a retry")
        #expect(s.failed(now: at(25), random: 0.5) == at(55), "doubling")
        #expect(s.next(now: at(55), pending: 0, listed: 1, drained: true) == .check)
        s.read(now: at(56))
        #expect(s.retryAt == nil && s.backoff.failures == 0)
        #expect(s.next(now: at(57), pending: 0, listed: 1, drained: true) == .wait(until: at(3656)))
    }

    @Test func theBackoffIsCapped() {
        var s = schedule()
        var last = t0
        for _ in 0..<20 { last = s.failed(now: t0, random: 0) }
        #expect(last == at(900))
    }

    @Test func aRestartKeepsThePublishIntervalButChecksAtOnce() {
        let s = CatalogSchedule(publishInterval: 600, checkInterval: 3600, lastPublishAt: t0)
        #expect(s.next(now: at(5), pending: 0, listed: 1, drained: true) == .check)
        #expect(s.next(now: at(5), pending: 3, listed: 1, drained: false) == .wait(until: at(600)))
    }

    @Test func reloadedIntervalsApplyToWhatAlreadyHappened() {
        var s = schedule()
        s.published(now: t0)
        s.reconfigure(publishInterval: 30, checkInterval: 3600)
        #expect(s.next(now: at(30), pending: 1, listed: 1, drained: false) == .publish)
    }
}
