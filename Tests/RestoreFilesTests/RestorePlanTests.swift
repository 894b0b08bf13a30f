import Foundation
import ManifestFormat
import Testing
import RestoreFiles

@Suite struct RestorePlanTests {
    func file(_ folder: String, _ path: String) -> ManifestReplay.File {
        ManifestReplay.File(folder: folder, path: Array(path.utf8),
                            version: FileVersion(size: 1, md5: MD5Value(high: 1, low: 1), mtimeSec: 0, mtimeNsec: 0), time: 0)
    }

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

    @Test func eachFolderBecomesOneSafeNameUnderTo() {
        let names = RestorePlan.names(folders: ["/srv/photos", "/home/al/Pictures", "/a/photos", "/x/..", "/", "", "/y/.", "/z/", "/c/photos",
                                                "/etc", "/b/photos-2"])
        let text = names.mapValues { String(decoding: $0, as: UTF8.self) }
        #expect(text == ["/srv/photos": "photos", "/home/al/Pictures": "Pictures", "/a/photos": "photos-2", "/x/..": "folder-4", "/": "folder-5",
                         "": "folder-6", "/y/.": "folder-7", "/z/": "folder-8", "/c/photos": "photos-3", "/etc": "etc",
                         "/b/photos-2": "photos-2-2"])
        // Whatever a folder is called, its name is one safe part: nothing resolves outside DIR.
        for name in names.values {
            #expect(RestorePlan.isSafeName(name) && !name.contains(UInt8(ascii: "/")))
        }
        let long = "/" + String(repeating: "é", count: 200)
        #expect(onlyName(long) == "folder-1")
    }

    func onlyName(_ folder: String) -> String {
        String(decoding: RestorePlan.names(folders: [folder])[folder] ?? [], as: UTF8.self)
    }

    @Test func namesUnderToDoNotDependOnWhatIsAskedFor() {
        let all = [file("/a/photos", "x.jpg"), file("/b/photos", "y.jpg")]
        let folders = RestorePlan.deviceFolders(record: ["/b/photos", "/a/photos"], files: all)
        let everything = RestorePlan.plan(all, deviceFolders: folders, to: "/r", watched: [])
        let justA = RestorePlan.plan([all[0]], deviceFolders: folders, to: "/r", watched: [])
        #expect(everything.items.map(\.displayPath) == ["/r/photos-2/x.jpg", "/r/photos/y.jpg"])
        #expect(justA.items.map(\.displayPath) == ["/r/photos-2/x.jpg"])
        // A folder the record does not list comes after those it does, sorted.
        #expect(RestorePlan.deviceFolders(record: ["/z"], files: [file("/b", "1"), file("/a", "2"), file("/z", "3")]) == ["/z", "/a", "/b"])
    }

    @Test func itemsKeepTheExactBytesBelowTheirRoot() {
        let plan = RestorePlan.plan([file("/srv/photos", "2024/Cafe\u{301}.jpg")], deviceFolders: ["/srv/photos"], to: "/restore/", watched: [])
        let items = plan.items
        #expect(items.count == 1 && plan.refused.isEmpty)
        #expect(items[0].root == "/restore")
        #expect(items[0].destination == Array("photos/2024/Cafe\u{301}.jpg".utf8))
        #expect(items[0].sourcePath == Array("/srv/photos/2024/Cafe\u{301}.jpg".utf8))
        #expect(items[0].displayPath == "/restore/photos/2024/Cafe\u{301}.jpg")
        let inPlace = RestorePlan.plan([file("/srv/photos", "a.jpg")], deviceFolders: [], to: nil, watched: ["/srv/photos"])
        #expect(inPlace.items.map(\.displayPath) == ["/srv/photos/a.jpg"] && inPlace.items[0].root == "/srv/photos")
    }

    @Test func inPlaceOnlyIntoThisNASsOwnWatchedFolders() {
        let watched = ["/srv/photos", "/home/al/Pictures"]
        let files = [file("/srv/photos", "ok.jpg"), file("/etc", "cron.d/evil"), file("/etc", "passwd"), file("/x/..", "evil"),
                     file("/srv/photos/", "slash.jpg"), file("/srv/photos/../../etc", "evil"), file("", "empty"), file("srv/photos", "relative"),
                     file("/srv//photos", "double"), file("/home/al/pictures", "case.jpg"), file("/srv/photos/sub", "sub.jpg")]
        let plan = RestorePlan.plan(files, deviceFolders: [], to: nil, watched: watched)
        #expect(plan.items.map(\.displayPath) == ["/srv/photos/ok.jpg"])
        #expect(plan.refused.reduce(0) { $0 + $1.files } == files.count - 1)
        #expect(plan.refused.allSatisfy { $0.reason.contains("--to DIR") })
        let etc = plan.refused.first { $0.subject == "/etc" }
        #expect(etc?.files == 2 && etc?.reason.contains("is not one of this NAS's watched folders (/srv/photos, /home/al/Pictures)") == true)
        #expect(plan.refused.first { $0.subject == "/x/.." }?.reason.contains("not an absolute, normalised folder") == true)
        #expect(plan.refused.first { $0.subject == "" }?.reason.contains("not an absolute, normalised folder") == true)
        #expect(RestorePlan.inPlaceRefusal("/", watched: ["/"]) == nil)
        #expect(RestorePlan.inPlaceRefusal("/", watched: []) != nil)
        // Unicode twins are different folders.
        #expect(RestorePlan.inPlaceRefusal("/p/Cafe\u{301}", watched: ["/p/Café"]) != nil)
    }

    @Test func unsafePathsAreRefusedWhateverTheRoot() {
        for to in [nil, "/r"] {
            let files = ["../escape.jpg", "a/../../b.jpg", "a//b.jpg", "./a.jpg", "a/", "/abs.jpg", "ok/fine.jpg", String(repeating: "n", count: 256)]
                .map { file("/srv/photos", $0) }
            let plan = RestorePlan.plan(files, deviceFolders: ["/srv/photos"], to: to, watched: ["/srv/photos"])
            #expect(plan.items.map { String(decoding: $0.path, as: UTF8.self) } == ["ok/fine.jpg"])
            #expect(plan.refused.count == 7 && plan.refused.allSatisfy { $0.reason.contains("unsafe path") && $0.files == 1 })
        }
    }

    @Test func controlCharactersFromTheManifestAreShownEscaped() {
        let plan = RestorePlan.plan([file("/e\u{1B}[2Jvil", "a")], deviceFolders: [], to: nil, watched: [])
        #expect(plan.refused[0].subject == "/e\\u{1b}[2Jvil" && !plan.refused[0].reason.contains("\u{1B}"))
        let item = RestoreItem(folder: "/p", path: Array("a\nb".utf8), version: file("/p", "a").version, root: "/r", destination: Array("a\nb".utf8))
        #expect(item.displayPath == "/r/a\\u{a}b")
    }

    @Test func folderOwnersFollowTheirFoldersToTheirRoots() {
        let owner = Ownership(uid: 1000, gid: 100, user: "al", group: "users", mode: 0o2750)
        let records: [String: [[UInt8]: Ownership]] = ["/srv/photos": [[]: owner, Array("2024".utf8): owner, Array("../x".utf8): owner]]
        let to = RestorePlan.plan([file("/srv/photos", "2024/a.jpg")], deviceFolders: ["/srv/photos"], to: "/r", watched: [], folderOwners: records)
        #expect(to.folderOwners == ["/r": [Array("photos".utf8): owner, Array("photos/2024".utf8): owner]])
        // In place, the watched folder itself is not the restore's to change.
        let inPlace = RestorePlan.plan([file("/srv/photos", "2024/a.jpg")], deviceFolders: [], to: nil, watched: ["/srv/photos"], folderOwners: records)
        #expect(inPlace.folderOwners == ["/srv/photos": [Array("2024".utf8): owner]])
        let refused = RestorePlan.plan([file("/srv/photos", "2024/a.jpg")], deviceFolders: [], to: nil, watched: [], folderOwners: records)
        #expect(refused.folderOwners.isEmpty)
    }
}
