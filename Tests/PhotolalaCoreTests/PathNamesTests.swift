import Testing
import PhotolalaCore

@Suite struct PathNamesTests {
    @Test func parentOfAbsolutePaths() {
        #expect(PathNames.parent(of: "/a/b.jpg") == "/a")
        #expect(PathNames.parent(of: "/b.jpg") == "/")
        #expect(PathNames.parent(of: "b.jpg") == "")
        #expect(PathNames.parent(of: "/a/b/c") == "/a/b")
    }

    @Test func parentKeepsTheExactBytes() {
        // "é" decomposed (NFD): the parent is the NFD folder, not an equal-looking NFC one.
        let nfd = "/Cafe\u{301}/x.jpg"
        let parent = PathNames.parent(of: nfd)
        #expect(Array(parent.utf8) == Array("/Cafe\u{301}".utf8))
        // A combining mark right after the slash must not merge with it.
        #expect(Array(PathNames.parent(of: "/a/\u{301}x").utf8) == Array("/a".utf8))
    }

    @Test func isInside() {
        #expect(PathNames.isInside("/a/b", "/a"))
        #expect(!PathNames.isInside("/ab", "/a"))
        #expect(!PathNames.isInside("/a", "/a"))
        #expect(PathNames.isInside("/a", "/"))
        #expect(!PathNames.isInside("/", "/"))
        #expect(PathNames.isInside("/photos/2026/x.jpg", "/photos"))
        #expect(!PathNames.isInside("/photo", "/photos"))
        #expect(!PathNames.isInside("/photos", "/photos/"))
        // Byte for byte: the NFD twin of a folder holds nothing of the NFC one, and back.
        #expect(!PathNames.isInside("/Cafe\u{301}/x.jpg", "/Caf\u{E9}"))
        #expect(!PathNames.isInside("/Caf\u{E9}/x.jpg", "/Cafe\u{301}"))
        #expect(PathNames.isInside("/Cafe\u{301}/x.jpg", "/Cafe\u{301}"))
    }

    @Test func isWithinIsByteExact() {
        #expect(PathNames.isWithin("/a", "/a"))
        #expect(PathNames.isWithin("/a/b/c", "/a"))
        #expect(!PathNames.isWithin("/ab", "/a"))
        #expect(PathNames.isWithin("/a", "/"))
        #expect(PathNames.isWithin("/", "/"))
        // An NFD folder is not inside (nor equal to) its NFC twin, though the Strings are ==.
        #expect("/Caf\u{E9}" == "/Cafe\u{301}")
        #expect(!PathNames.isWithin("/Cafe\u{301}/x.jpg", "/Caf\u{E9}"))
        #expect(!PathNames.isWithin("/Cafe\u{301}", "/Caf\u{E9}"))
        // hasPrefix(root + "/") would say yes here: "/a/" is no prefix of the root "/".
        #expect(!"/x".hasPrefix("/" + "/"))
        #expect(PathNames.isWithin("/x", "/"))
    }

    @Test func renamedMovesOnlyWhatIsWithin() {
        #expect(PathNames.renamed("/a/b/c.jpg", from: "/a/b", to: "/z") == "/z/c.jpg")
        #expect(PathNames.renamed("/a/b", from: "/a/b", to: "/z") == "/z")
        #expect(PathNames.renamed("/a/bc", from: "/a/b", to: "/z") == nil)
        #expect(PathNames.renamed("/Cafe\u{301}/x", from: "/Caf\u{E9}", to: "/z") == nil)
        #expect(PathNames.renamed("/x/y", from: "/", to: "/r") == "/r/x/y")
    }
}
