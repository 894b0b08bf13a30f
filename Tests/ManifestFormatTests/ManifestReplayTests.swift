import Foundation
import Testing
import ManifestFormat

@Suite struct ManifestReplayTests {
    func version(_ n: UInt64) -> FileVersion {
        FileVersion(size: Int64(n), md5: MD5Value(high: n, low: n), mtimeSec: 1_700_000_000, mtimeNsec: 5)
    }

    func e(_ kind: ManifestEntry.Kind, _ path: String, _ time: Int64, _ n: UInt64 = 1, folder: String = "/p") -> ManifestEntry {
        ManifestEntry(kind: kind, folder: folder, path: Array(path.utf8), time: time, version: kind == .gone ? nil : version(n))
    }


    func history() -> [ManifestEntry] {
        [e(.appeared, "a.jpg", 100, 1), e(.appeared, "b.jpg", 110, 2), e(.changed, "a.jpg", 200, 3),
         e(.gone, "b.jpg", 300), e(.appeared, "c.jpg", 400, 4), e(.appeared, "b.jpg", 500, 5)]
    }

    func state(asOf: Int64?) -> [String: UInt64] {
        var r = ManifestReplay(asOf: asOf)
        r.apply(history())
        return Dictionary(uniqueKeysWithValues: r.files.map { (String(decoding: $0.path, as: UTF8.self), $0.version.md5.high) })
    }

    @Test func replaysUpToAMoment() {
        #expect(state(asOf: 50) == [:])
        #expect(state(asOf: 100) == ["a.jpg": 1])
        #expect(state(asOf: 150) == ["a.jpg": 1, "b.jpg": 2])
        #expect(state(asOf: 250) == ["a.jpg": 3, "b.jpg": 2])
        // Before the deletion the file comes back; after it, not.
        #expect(state(asOf: 299) == ["a.jpg": 3, "b.jpg": 2])
        #expect(state(asOf: 300) == ["a.jpg": 3])
        #expect(state(asOf: 450) == ["a.jpg": 3, "c.jpg": 4])
        #expect(state(asOf: nil) == ["a.jpg": 3, "b.jpg": 5, "c.jpg": 4])
    }

    @Test func twinsAndFoldersStayApart() {
        var r = ManifestReplay(asOf: nil)
        r.apply([e(.appeared, "Café.jpg", 1, 1), e(.appeared, "Cafe\u{301}.jpg", 1, 2),
                 e(.appeared, "x.jpg", 1, 3, folder: "/p"), e(.appeared, "x.jpg", 1, 4, folder: "/q")])
        #expect(r.files.count == 4)
        #expect(r.folderList == ["/p", "/q"])
        r.apply(e(.gone, "Cafe\u{301}.jpg", 2))
        #expect(r.files.map(\.version.md5.high).sorted() == [1, 3, 4])
    }

    @Test func filesComeSortedByFolderThenPath() {
        var r = ManifestReplay(asOf: nil)
        r.apply([e(.appeared, "b", 1, folder: "/q"), e(.appeared, "z", 1), e(.appeared, "a", 1)])
        #expect(r.files.map { "\($0.folder)/\(String(decoding: $0.path, as: UTF8.self))" } == ["/p/a", "/p/z", "/q/b"])
    }
}
