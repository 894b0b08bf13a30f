import Foundation
import PhotolalaCore
import Queue
import Testing
import Inventory

/// When the bucket is listed next, with plain dates.
@Suite struct InventoryScheduleTests {
    let schedule = InventorySchedule()
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let day: TimeInterval = 86400

    func listing(_ state: InventoryListing.State, listedAt: Date? = nil, failures: Int = 0) -> InventoryListing {
        InventoryListing(prefix: "photos/U/", state: state, startedAt: t0, listedAt: listedAt, failures: failures, updatedAt: t0)
    }

    @Test func atOnceAfterASignInOrAPassCutShort() {
        #expect(schedule.nextListing(photos: nil, interval: day, now: t0, random: 0.5) == t0)
        let later = t0.addingTimeInterval(300)
        #expect(schedule.nextListing(photos: listing(.listing), interval: day, now: later, random: 0.5) == later)
    }

    @Test func everyIntervalAfterACompleteListing() {
        #expect(schedule.nextListing(photos: listing(.complete, listedAt: t0), interval: day, now: t0, random: 0.5) == t0.addingTimeInterval(day))
    }

    @Test func aFailedPassIsTriedAgainSoonerWithBackoffButNeverLaterThanTheInterval() {
        let first = schedule.nextListing(photos: listing(.failed, failures: 1), interval: day, now: t0, random: 0)
        let third = schedule.nextListing(photos: listing(.failed, failures: 3), interval: day, now: t0, random: 0)
        #expect(first == t0.addingTimeInterval(30))
        #expect(third == t0.addingTimeInterval(240 * 0.5))
        #expect(schedule.nextListing(photos: listing(.failed, failures: 40), interval: 3600, now: t0, random: 1) == t0.addingTimeInterval(3600))
    }

    @Test func aRefusalIsAskedAgainAtTheInterval() {
        #expect(schedule.nextListing(photos: listing(.refused), interval: day, now: t0, random: 0.5) == t0.addingTimeInterval(day))
    }
}
