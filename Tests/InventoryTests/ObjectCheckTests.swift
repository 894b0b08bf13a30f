import Bucket
import Foundation
import Queue
import Testing
import Inventory

/// What a complete listing says about one backed-up object, with plain values.
@Suite struct ObjectCheckTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let md5 = String(repeating: "a", count: 32)
    let other = String(repeating: "b", count: 32)

    func object(size: Int64 = 100, expected: String? = nil, uploadedAt: Date? = nil, listed: (Int64, String)?) -> UploadedObject {
        UploadedObject(md5: md5, size: size, expectedETag: expected, uploadedAt: uploadedAt ?? t0.addingTimeInterval(-60),
                       listed: listed.map { InventoryEntry(key: "photos/U/\(md5).dat", size: $0.0, etag: $0.1, seenAt: t0) },
                       hasLiveFile: true)
    }

    func verdict(_ o: UploadedObject, etags: Bool = true, kms: Bool = false) -> ObjectCheck.Verdict {
        ObjectCheck.verdict(o, listingStartedAt: t0, checkETags: etags, sseKms: kms)
    }

    @Test func presenceAndSize() {
        #expect(verdict(object(listed: nil)) == .missing)
        #expect(verdict(object(listed: (99, md5))) == .wrongSize)
        #expect(verdict(object(listed: (100, md5))) == .ok)
    }

    @Test func whatWasSentDuringTheListingIsNotJudgedByIt() {
        #expect(verdict(object(uploadedAt: t0, listed: nil)) == .tooRecent)
        #expect(verdict(object(uploadedAt: t0.addingTimeInterval(5), listed: nil)) == .tooRecent)
    }

    @Test func aSinglePutsETagIsItsMD5() {
        #expect(verdict(object(expected: md5, listed: (100, md5.uppercased()))) == .ok)
        #expect(verdict(object(expected: md5, listed: (100, other))) == .wrongETag)
        // Found there, sent by someone else in one PUT: still its MD5.
        #expect(verdict(object(listed: (100, other))) == .wrongETag)
    }

    @Test func aMultipartETagIsComparedWithTheOneRecordedWhenItWasSent() {
        let etag = other + "-3"
        #expect(verdict(object(expected: etag, listed: (100, etag))) == .ok)
        #expect(verdict(object(expected: etag, listed: (100, other + "-4"))) == .wrongETag)
        // Uploaded in parts by another tool: the part size is unknown, the ETag proves nothing.
        #expect(verdict(object(listed: (100, etag))) == .unproven)
    }

    @Test func sseKMSMakesEveryETagUnproven() {
        #expect(verdict(object(expected: md5, listed: (100, other)), kms: true) == .unproven)
        #expect(verdict(object(expected: md5, listed: nil), kms: true) == .missing)
        #expect(verdict(object(expected: md5, listed: (1, other)), kms: true) == .wrongSize)
    }

    @Test func aPeriodicListingChecksOnlyPresenceAndSize() {
        #expect(verdict(object(expected: md5, listed: (100, other)), etags: false) == .ok)
        #expect(verdict(object(listed: nil), etags: false) == .missing)
    }
}
