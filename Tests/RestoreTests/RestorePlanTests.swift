import Foundation
import ManifestFormat
import Testing
@testable import Restore

@Suite struct RestorePlanTests {
    func file(_ folder: String, _ path: String) -> ManifestReplay.File {
        ManifestReplay.File(folder: folder, path: Array(path.utf8),
                            version: FileVersion(size: 1, md5: MD5Value(high: 1, low: 1), mtimeSec: 0, mtimeNsec: 0), time: 0)
    }

    let files = [
        ManifestReplay.File(folder: "/srv/photos", path: Array("2019/a.jpg".utf8),
                            version: FileVersion(size: 1, md5: MD5Value(high: 1, low: 1), mtimeSec: 0, mtimeNsec: 0), time: 0),
    ]

    @Test func filtersTakeFilesAndFoldersByWholeNames() throws {
        let all = [file("/srv/photos", "2019/a.jpg"), file("/srv/photos", "2019/b.jpg"), file("/srv/photos", "2019x/c.jpg"),
                   file("/home/al/Pictures", "2019/d.jpg")]
        let names: ([ManifestReplay.File]) -> [String] = { $0.map { String(decoding: $0.path, as: UTF8.self) } }
        #expect(names(try RestorePlan.select(all, filters: []).files).count == 4)
        #expect(names(try RestorePlan.select(all, filters: ["/srv/photos/2019"]).files) == ["2019/a.jpg", "2019/b.jpg"])
        #expect(names(try RestorePlan.select(all, filters: ["/srv/photos/2019/"]).files) == ["2019/a.jpg", "2019/b.jpg"])
        #expect(names(try RestorePlan.select(all, filters: ["/srv/photos/2019/b.jpg"]).files) == ["2019/b.jpg"])
        #expect(names(try RestorePlan.select(all, filters: ["/home"]).files) == ["2019/d.jpg"])
        #expect(try RestorePlan.select(all, filters: ["/"]).files.count == 4)
        let picked = try RestorePlan.select(all, filters: ["/srv/photos/201", "/srv/photos/2019x"])
        #expect(names(picked.files) == ["2019x/c.jpg"] && picked.unmatched == ["/srv/photos/201"])
        #expect(throws: RestorePlan.Problem.self) { try RestorePlan.select(all, filters: ["2019"]) }
    }

    @Test func filtersTellUnicodeTwinsApart() throws {
        let all = [file("/p", "Café/a.jpg"), file("/p", "Cafe\u{301}/a.jpg")]
        let picked = try RestorePlan.select(all, filters: ["/p/Cafe\u{301}"])
        #expect(picked.files.map(\.path) == [Array("Cafe\u{301}/a.jpg".utf8)])
    }

    @Test func toPutsEachFolderUnderItsLastName() {
        #expect(RestorePlan.roots(folders: ["/srv/photos", "/home/al/Pictures"], to: "/restore/") ==
                ["/srv/photos": "/restore/photos", "/home/al/Pictures": "/restore/Pictures"])
        #expect(RestorePlan.roots(folders: ["/a/photos", "/b/photos", "/c/photos"], to: "out") ==
                ["/a/photos": "out/photos", "/b/photos": "out/photos-2", "/c/photos": "out/photos-3"])
        #expect(RestorePlan.roots(folders: ["/"], to: "/r") == ["/": "/r/root"])
        #expect(RestorePlan.roots(folders: ["/srv/photos"], to: nil) == ["/srv/photos": "/srv/photos"])
    }

    @Test func itemsKeepTheExactBytesBelowTheirRoot() {
        let items = RestorePlan.items([file("/srv/photos", "2024/Cafe\u{301}.jpg")], to: "/restore")
        #expect(items.count == 1)
        #expect(items[0].root == "/restore/photos")
        #expect(items[0].destination == Array("2024/Cafe\u{301}.jpg".utf8))
        #expect(items[0].sourcePath == Array("/srv/photos/2024/Cafe\u{301}.jpg".utf8))
        #expect(items[0].displayPath == "/restore/photos/2024/Cafe\u{301}.jpg")
        #expect(RestorePlan.items([file("/srv/photos", "a.jpg")], to: nil)[0].displayPath == "/srv/photos/a.jpg")
    }
}
