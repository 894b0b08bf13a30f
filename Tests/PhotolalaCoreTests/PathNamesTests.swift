import Testing
@testable import PhotolalaCore

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
    }
}
