import Control
import RestoreWire
import Testing
import RestoreCtl

@Suite struct ObjectListingTests {
    let a = String(repeating: "a", count: 32)
    let b = String(repeating: "b", count: 32)
    let c = String(repeating: "c", count: 32)

    @Test func listedObjectsAreReadyOrArchivedTheRestMissing() throws {
        var listing = ObjectListing(wanted: [a, b, c])
        let text = "\(a) 10 STANDARD\n\(String(repeating: "d", count: 32)) 5 STANDARD\n\(b) 20 DEEP_ARCHIVE\nend\n"
        let bytes = Array(text.utf8)
        for cut in stride(from: 0, to: bytes.count, by: 7) {
            try Array(bytes[cut..<min(bytes.count, cut + 7)]).withUnsafeBytes { try listing.feed($0) }
        }
        #expect(listing.ended)
        let s = listing.statuses
        #expect(s[a] == ObjectStatus(md5: a, state: .ready, size: 10, storageClass: "STANDARD"))
        #expect(s[b]?.state == .archived && s[b]?.storageClass == "DEEP_ARCHIVE")
        #expect(s[c]?.state == .missing)
        #expect(s.count == 3)
    }

    @Test func aListingWithoutItsEndIsNotWhole() throws {
        var listing = ObjectListing(wanted: [a])
        try Array("\(a) 10 STANDARD\n".utf8).withUnsafeBytes { try listing.feed($0) }
        #expect(!listing.ended)
        #expect(throws: ObjectListing.Malformed.self) { try Array("nonsense\n".utf8).withUnsafeBytes { try listing.feed($0) } }
    }

    @Test func listingPaysOffForAThousandthOfTheBucket() {
        #expect(ObjectListing.worthListing(wanted: 500, bucketEstimate: 500))
        #expect(ObjectListing.worthListing(wanted: 1000, bucketEstimate: 1_000_000))
        #expect(!ObjectListing.worthListing(wanted: 999, bucketEstimate: 1_000_000))
        #expect(ObjectListing.worthListing(wanted: 1, bucketEstimate: 0))
    }
}
