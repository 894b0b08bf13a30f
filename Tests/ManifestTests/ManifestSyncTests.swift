import ManifestFormat
import Testing
@testable import Manifest

@Suite struct ManifestSyncTests {
    let keys = ManifestKeys(userId: "U", deviceId: "d")

    func sync(logs: [Int64], snapshots: [Int64: Bool] = [:]) -> ManifestSync {
        var listing = logs.map(keys.log)
        for (seq, indexed) in snapshots {
            listing.append(keys.snapshotPart(seq, part: 1))
            if indexed { listing.append(keys.snapshotIndex(seq)) }
        }
        return ManifestSync(listing: listing, keys: keys)
    }

    @Test func segmentsWrittenButNotRecordedAreTakenBackInOrder() {
        let s = sync(logs: [1, 2, 3, 4])
        #expect(s.rebuild(ledgerSeq: 2) == nil)
        #expect(s.toAdopt(after: 2) == [3, 4])
        #expect(s.toAdopt(after: 4).isEmpty)
        #expect(s.outcome(ledgerSeq: 4, ledgerSnapshot: 0) == .tidy([]))
    }

    @Test func anUnusableSegmentGoesWithEveryLaterOne() {
        let s = sync(logs: [1, 2, 3, 5])
        #expect(s.toAdopt(after: 1) == [2, 3])
        #expect(s.unusable(3) == [keys.log(3), keys.log(5)])
        // Log 5 lies beyond the gap at 4: nothing reads it, the ledger never recorded it.
        #expect(s.outcome(ledgerSeq: 3, ledgerSnapshot: 0) == .tidy([keys.log(5)]))
    }

    @Test func aSnapshotBeyondTheLedgerRebuildsTheMirror() {
        let s = sync(logs: [5, 6, 7], snapshots: [6: true, 8: false])
        #expect(s.rebuild(ledgerSeq: 0) == 6)
        #expect(s.rebuild(ledgerSeq: 6) == nil)
        #expect(s.toAdopt(after: 6) == [7])
        // The logs the snapshot covers are stale; the unfinished newer one may still be written.
        #expect(s.outcome(ledgerSeq: 7, ledgerSnapshot: 6) == .tidy([keys.log(5), keys.log(6)]))
    }

    @Test func aBucketThatLostSegmentsGetsASnapshot() {
        #expect(sync(logs: [1, 2]).outcome(ledgerSeq: 3, ledgerSnapshot: 0) == .writeSnapshot)
        #expect(sync(logs: [1, 3]).outcome(ledgerSeq: 3, ledgerSnapshot: 0) == .writeSnapshot)
        #expect(sync(logs: [3], snapshots: [2: true]).outcome(ledgerSeq: 3, ledgerSnapshot: 3) == .writeSnapshot)
        #expect(sync(logs: []).outcome(ledgerSeq: 0, ledgerSnapshot: 0) == .tidy([]))
    }
}
