import PhotolalaCore
import Testing
import Digests

@Suite struct PayloadDigestsTests {
    static func identity(_ inode: UInt64, mtimeNsec: Int64 = 0) -> FileIdentity {
        FileIdentity(device: 1, inode: inode, size: 10, mtimeSec: 100, mtimeNsec: mtimeNsec)
    }

    @Test func anEntryServesOnlyTheIdentityItWasTakenFor() {
        let digests = PayloadDigests()
        digests.store(md5: "a", identity: Self.identity(1), sha256: "sha-a")
        #expect(digests.take(md5: "a", identity: Self.identity(1, mtimeNsec: 5)) == nil)
        // Spent by the mismatch too: the upload reads the file itself.
        #expect(digests.take(md5: "a", identity: Self.identity(1)) == nil)
        digests.store(md5: "b", identity: Self.identity(2), sha256: "sha-b")
        #expect(digests.take(md5: "b", identity: Self.identity(2)) == "sha-b")
        #expect(digests.take(md5: "b", identity: Self.identity(2)) == nil)
    }

    @Test func keepsAtMostItsCapacityDroppingTheOldest() {
        let digests = PayloadDigests(capacity: 3)
        for i in 0..<2000 {
            digests.store(md5: "m\(i)", identity: Self.identity(UInt64(i)), sha256: "s\(i)")
            #expect(digests.count <= 3)
        }
        #expect(digests.take(md5: "m1996", identity: Self.identity(1996)) == nil)
        #expect(digests.take(md5: "m1997", identity: Self.identity(1997)) == "s1997")
        #expect(digests.take(md5: "m1999", identity: Self.identity(1999)) == "s1999")
    }

    @Test func turningItOffForgetsEverything() {
        let digests = PayloadDigests()
        #expect(!digests.wanted)
        digests.setWanted(true)
        #expect(digests.wanted)
        digests.store(md5: "a", identity: Self.identity(1), sha256: "sha-a")
        digests.setWanted(false)
        #expect(!digests.wanted)
        #expect(digests.count == 0)
        #expect(digests.take(md5: "a", identity: Self.identity(1)) == nil)
    }
}
