import Foundation
import ManifestFormat
import Queue
import Testing
@testable import Manifest

@Suite struct ManifestChangesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_100)
    let folders = ["/srv/photos", "/srv/photos/phone", "/home/a"]

    func file(_ state: FileState, md5: String? = "0123456789abcdef0123456789abcdef", size: Int64 = 10, mtime: Int64 = 5) -> ManifestCandidate.FileRow {
        ManifestCandidate.FileRow(state: state, size: size, md5: md5, mtimeSec: mtime, mtimeNsec: 7, updatedAt: 1_800_000_000.25)
    }

    func current(_ kind: Int, folder: String = "/srv/photos", size: Int64 = 10, mtime: Int64 = 5) -> ManifestRecord {
        ManifestRecord(kind: kind, path: "/srv/photos/a.jpg", folder: folder, time: 1, size: kind == 3 ? nil : size,
                       md5: kind == 3 ? nil : "0123456789abcdef0123456789abcdef", mtimeSec: kind == 3 ? nil : mtime, mtimeNsec: kind == 3 ? nil : 7)
    }

    func record(_ file: ManifestCandidate.FileRow?, _ current: ManifestRecord?, path: String = "/srv/photos/a.jpg") -> ManifestRecord? {
        ManifestChanges.record(for: ManifestCandidate(path: path, file: file, current: current), folders: folders, now: now)
    }

    @Test func anUploadedFileAppearsOnce() {
        let r = record(file(.uploaded), nil)
        #expect(r?.kind == 1 && r?.folder == "/srv/photos" && r?.time == 1_800_000_000_250 && r?.mtimeNsec == 7)
        #expect(record(file(.uploaded), current(1)) == nil)
        #expect(record(file(.uploaded), current(3))?.kind == 1)
    }

    @Test func newBytesOrANewTimeAreAChange() {
        #expect(record(file(.uploaded, size: 11), current(1))?.kind == 2)
        #expect(record(file(.uploaded, mtime: 6), current(2))?.kind == 2)
        #expect(record(file(.uploaded, md5: "ffffffffffffffffffffffffffffffff"), current(1))?.kind == 2)
    }

    @Test func onlyWhatTheBucketHoldsCounts() {
        // Being read again, waiting, failed: the manifest keeps the version in the bucket.
        for state in [FileState.pending, .queued, .uploading, .failed] {
            #expect(record(file(state), current(1)) == nil)
            #expect(record(file(state), nil) == nil)
        }
    }

    @Test func aFileGoneOrMovedAwayWentAway() {
        let gone = record(file(.gone), current(1))
        #expect(gone?.kind == 3 && gone?.size == nil && gone?.time == 1_800_000_000_250)
        let moved = record(nil, current(2))
        #expect(moved?.kind == 3 && moved?.time == 1_800_000_100_000)
        #expect(record(file(.gone), current(3)) == nil)
        #expect(record(nil, nil) == nil)
    }

    @Test func theInnermostWatchedFolderHoldsAPath() {
        #expect(ManifestChanges.folder(of: "/srv/photos/phone/x.jpg", in: folders) == "/srv/photos/phone")
        #expect(ManifestChanges.folder(of: "/srv/photos/x.jpg", in: folders) == "/srv/photos")
        #expect(ManifestChanges.folder(of: "/srv/photosX/x.jpg", in: folders) == nil)
        #expect(ManifestChanges.folder(of: "/x.jpg", in: ["/"]) == "/")
        // A path keeps the folder its entries were written under while that folder holds it.
        #expect(ManifestChanges.folder(of: "/srv/photos/phone/x.jpg", current: current(1), in: folders) == "/srv/photos")
        #expect(record(file(.uploaded), nil, path: "/elsewhere/a.jpg") == nil)
    }

    @Test func recordsAndEntriesConvertBothWays() throws {
        let r = try #require(record(file(.uploaded), nil, path: "/srv/photos/2024/Cafe\u{301}.jpg"))
        let entry = try #require(ManifestChanges.entry(r))
        #expect(entry.path == Array("2024/Cafe\u{301}.jpg".utf8))
        #expect(ManifestChanges.record(entry) == r)
        let root = ManifestRecord(kind: 3, path: "/a.jpg", folder: "/", time: 1, size: nil, md5: nil, mtimeSec: nil, mtimeNsec: nil)
        #expect(ManifestChanges.entry(root)?.path == Array("a.jpg".utf8))
        #expect(ManifestChanges.record(ManifestChanges.entry(root)!) == root)
        var bad = entry
        bad.path = [0x66, 0xff]
        #expect(ManifestChanges.record(bad) == nil)
    }
}
