import Testing
import Catalog

/// The merge orders two newest-first streams; at equal dates the rows already there
/// come first, undated ones last.
@Suite struct CatalogMergeTests {
    typealias Theirs = (date: Double?, value: String)
    typealias Ours = (date: Double, value: String)

    func merged(_ theirs: [Theirs], _ ours: [Ours]) throws -> [String] {
        var t = theirs.makeIterator()
        var o = ours.makeIterator()
        var out: [String] = []
        try CatalogMerge.merge(existing: { t.next() }, ours: { o.next() }) { item in
            switch item {
            case .existing(let v): out.append("t:" + v)
            case .ours(let v): out.append("o:" + v)
            }
        }
        return out
    }

    @Test func interleavesByDateNewestFirst() throws {
        #expect(try merged([(9, "a"), (5, "b"), (1, "c")], [(10, "x"), (6, "y"), (2, "z"), (0, "w")])
            == ["o:x", "t:a", "o:y", "t:b", "o:z", "t:c", "o:w"])
    }

    @Test func atEqualDatesTheirRowsComeFirstAndEachSideKeepsItsOrder() throws {
        #expect(try merged([(5, "a"), (5, "b")], [(5, "x"), (5, "y")]) == ["t:a", "t:b", "o:x", "o:y"])
    }

    @Test func undatedRowsOfTheirsGoAfterEveryDatedOne() throws {
        #expect(try merged([(3, "a"), (nil, "junk")], [(-100, "x")]) == ["t:a", "o:x", "t:junk"])
    }

    @Test func eitherSideMayBeEmpty() throws {
        #expect(try merged([], []) == [])
        #expect(try merged([(1, "a")], []) == ["t:a"])
        #expect(try merged([], [(1, "x"), (0, "y")]) == ["o:x", "o:y"])
    }

    @Test func anErrorStopsTheMerge() {
        struct Broken: Error {}
        #expect(throws: Broken.self) {
            try CatalogMerge.merge(existing: { () throws -> Theirs? in throw Broken() }, ours: { nil as Ours? }) { _ in }
        }
    }
}
