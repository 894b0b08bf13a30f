import Testing
import Catalog

/// A 412 on the pointer: a race, or a store that refuses conditions that hold.
@Suite struct PointerRefusalTests {
    let pointer = StoredPointer(body: Array("0cc175b9c0f1b6a831c399e269772661".utf8), etag: "e1")

    @Test func aChangedPointerMeansSomeonePublishedInBetween() {
        var other = pointer
        other.etag = "e2"
        #expect(PointerRefusal.judge(sent: .ifMatch("e1"), now: other) == .raced)
        #expect(PointerRefusal.judge(sent: .ifMatch("e1"), now: nil) == .raced, "deleted meanwhile: start over")
        #expect(PointerRefusal.judge(sent: .ifNoneMatch, now: pointer) == .raced)
    }

    @Test func anUnchangedPointerMeansTheStoreIgnoresConditions() {
        // Ceph Pacific: 412 to a quoted If-Match that matches.
        #expect(PointerRefusal.judge(sent: .ifMatch("e1"), now: pointer) == .storeIgnoresConditions)
        #expect(PointerRefusal.judge(sent: .ifNoneMatch, now: nil) == .storeIgnoresConditions)
    }

    @Test func anUnconditionalWriteIsNeverJudgedAsTheStoresFault() {
        #expect(PointerRefusal.judge(sent: .unconditional, now: pointer) == .raced)
    }
}
