import Foundation
import Queue
import Testing
import Upload

/// How the uploader learns whether an object is already in the bucket, with plain dates.
@Suite struct PresenceCheckTests {
    let check = PresenceCheck()
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func listing(_ state: InventoryListing.State, listedAt: Date? = nil, updatedAt: Date? = nil) -> InventoryListing {
        InventoryListing(prefix: "photos/U/", state: state, startedAt: t0, listedAt: listedAt, updatedAt: updatedAt ?? t0)
    }

    @Test func afterASignInUploadsWaitForTheFirstListingToBeginThenToEnd() {
        #expect(check.mode(listing: nil, waitingSince: t0, now: t0.addingTimeInterval(5)) == .wait(until: t0.addingTimeInterval(60)))
        #expect(check.mode(listing: listing(.listing, updatedAt: t0), waitingSince: t0, now: t0.addingTimeInterval(90))
                == .wait(until: t0.addingTimeInterval(120)))
        #expect(check.mode(listing: listing(.complete, listedAt: t0), waitingSince: t0, now: t0) == .inventory)
    }

    @Test func noListingThatBeginsOrAStalledOneFallsBackToHead() {
        #expect(check.mode(listing: nil, waitingSince: t0, now: t0.addingTimeInterval(61)) == .head)
        #expect(check.mode(listing: listing(.listing, updatedAt: t0), waitingSince: t0, now: t0.addingTimeInterval(121)) == .head)
    }

    @Test func aRefusedOrFailedListingMeansHeadUnlessAnEarlierOneCompleted() {
        #expect(check.mode(listing: listing(.refused), waitingSince: t0, now: t0) == .head)
        #expect(check.mode(listing: listing(.failed), waitingSince: t0, now: t0) == .head)
        #expect(check.mode(listing: listing(.failed, listedAt: t0), waitingSince: t0, now: t0) == .inventory)
        // A later pass under way does not stop uploads trusting the complete one.
        #expect(check.mode(listing: listing(.listing, listedAt: t0), waitingSince: t0, now: t0.addingTimeInterval(999)) == .inventory)
    }

    @Test func withAListingNothingIsAskedAndWhatIsSentIsConditional() {
        let entry = InventoryEntry(key: "photos/U/m.dat", size: 100, etag: "m", seenAt: t0)
        #expect(check.step(mode: .inventory, presence: .present(entry), size: 100, overwrite: false) == .alreadyThere)
        #expect(check.step(mode: .inventory, presence: .present(entry), size: 99, overwrite: false) == .put(ifNoneMatch: false))
        #expect(check.step(mode: .inventory, presence: .absent, size: 100, overwrite: false) == .put(ifNoneMatch: true))
        #expect(check.step(mode: .inventory, presence: .unknown, size: 100, overwrite: false) == .head)
    }

    @Test func withoutAListingAHeadDecides() {
        #expect(check.step(mode: .head, presence: .unknown, size: 100, overwrite: false) == .head)
        #expect(check.afterHead(listedSize: 100, size: 100) == .alreadyThere)
        #expect(check.afterHead(listedSize: nil, size: 100) == .put(ifNoneMatch: true))
        #expect(check.afterHead(listedSize: 7, size: 100) == .put(ifNoneMatch: false))
    }

    @Test func anObjectVerifyFoundWrongIsReplacedUnasked() {
        let entry = InventoryEntry(key: "photos/U/m.dat", size: 100, etag: "x", seenAt: t0)
        for mode in [PresenceCheck.Mode.inventory, .head] {
            #expect(check.step(mode: mode, presence: .present(entry), size: 100, overwrite: true) == .put(ifNoneMatch: false))
        }
    }
}
