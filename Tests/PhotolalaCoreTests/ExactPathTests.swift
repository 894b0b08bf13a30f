import Foundation
import Testing
import PhotolalaCore

@Suite struct ExactPathTests {
    let nfc = "Caf\u{E9}.jpg"          // é precomposed (Linux, Windows)
    let nfd = "Cafe\u{301}.jpg"        // e + combining acute (macOS over SMB)

    @Test func canonicallyEquivalentNamesAreDifferentPaths() {
        #expect(nfc == nfd, "Swift compares Strings by canonical equivalence")
        #expect(ExactPath(nfc) != ExactPath(nfd))
        #expect(ExactPath(nfc) == ExactPath("Caf\u{E9}.jpg"))
        #expect(Set([ExactPath(nfc), ExactPath(nfd)]).count == 2)
    }

    @Test func exactKeyedKeepsBothTwins() {
        var d = ExactKeyed<Int>()
        d[nfc] = 1
        d[nfd] = 2
        #expect(d.count == 2)
        #expect(d[nfc] == 1 && d[nfd] == 2)
        d[nfd, default: 0] += 10
        #expect(d[nfd] == 12)
        #expect(d.removeValue(forKey: nfc) == 1)
        #expect(d.keys.count == 1 && d.keys[0].utf8.elementsEqual(nfd.utf8))
        #expect(d.pairs.map(\.value) == [12])
    }

    @Test func bytesCompareWhateverTheirLengthOrSpelling() {
        #expect(ExactPath.bytesEqual("", ""))
        #expect(!ExactPath.bytesEqual("", "a"))
        #expect(ExactPath.bytesEqual("/a/b", "/a/b"))
        #expect(!ExactPath.bytesEqual("/a/b", "/a/c"))
        #expect(!ExactPath.bytesEqual("/a/b", "/a/bc"))
        #expect(!ExactPath.bytesEqual("Caf\u{E9}", "Cafe\u{301}"))
        // A string not stored as UTF-8 (from an NSString bridge) compares by its bytes too.
        #expect(ExactPath.bytesEqual(String(NSString(string: "/Caf\u{E9}")), "/Caf\u{E9}"))
        #expect(ExactPath.bytesStart("/a/b", with: "/a"))
        #expect(ExactPath.bytesStart("/a", with: ""))
        #expect(!ExactPath.bytesStart("/a", with: "/a/b"))
        #expect(!ExactPath.bytesStart("Cafe\u{301}/x", with: "Caf\u{E9}"))
    }

    @Test func sameParentComparesTheFolderPartByteForByte() {
        #expect(ExactPath.sameParent("/srv/p/2024/a.jpg", "/srv/p/2024/b.jpg"))
        #expect(!ExactPath.sameParent("/srv/p/2024/a.jpg", "/srv/p/2025/a.jpg"))
        #expect(!ExactPath.sameParent("/srv/p/2024/a.jpg", "/srv/p/2024/x/a.jpg"))
        #expect(!ExactPath.sameParent("/srv/p/Caf\u{E9}/a.jpg", "/srv/p/Cafe\u{301}/a.jpg"))   // NFC and NFD: two folders
        #expect(!ExactPath.sameParent("a.jpg", "b.jpg"))
        #expect(ExactPath.sameParent("/a.jpg", "/b.jpg"))
    }
}
