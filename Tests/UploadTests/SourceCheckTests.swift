#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Digests
import PhotolalaCore
import Queue
import Testing
import Upload

@Suite struct SourceCheckTests {
    let dir: String

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("source-check-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ text: String) throws -> String {
        let path = dir + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    func job(_ path: String) throws -> UploadJob {
        var st = stat()
        #expect(stat(path, &st) == 0)
        return UploadJob(md5: "0123456789abcdef0123456789abcdef", size: Int64(st.st_size), path: path,
                         identity: FileIdentity(st), attempts: 0)
    }

    @Test func aVanishedFileLeavesTheQueue() throws {
        let path = try write("a.jpg", "abc")
        let j = try job(path)
        try FileManager.default.removeItem(atPath: path)
        #expect(SourceCheck(followSymlinks: false).recheck(j, unreadable: "EIO") == .sourceChanged(gone: true))
        #expect(SourceCheck(followSymlinks: false).outcome(.vanished, j) == .sourceChanged(gone: true))
    }

    @Test func aFifoSwappedInLeavesTheQueue() throws {
        let path = try write("b.jpg", "abc")
        let j = try job(path)
        try FileManager.default.removeItem(atPath: path)
        #expect(mkfifo(path, 0o600) == 0)
        #expect(SourceCheck(followSymlinks: false).recheck(j, unreadable: nil) == .sourceChanged(gone: true))
    }

    @Test func aRewrittenFileIsReadAgainEvenIfItCouldNotBeRead() throws {
        let path = try write("c.jpg", "abc")
        let j = try job(path)
        _ = try write("c.jpg", "abcdef")
        #expect(SourceCheck(followSymlinks: false).recheck(j, unreadable: "Permission denied") == .sourceChanged(gone: false))
        #expect(SourceCheck(followSymlinks: false).outcome(.changed, j) == .sourceChanged(gone: false))
    }

    @Test func onlyTheVeryFileThatWasHashedUnreadableFails() throws {
        let path = try write("d.jpg", "abc")
        let j = try job(path)
        #expect(SourceCheck(followSymlinks: false).recheck(j, unreadable: "cannot read the file: EIO") == .failed("cannot read the file: EIO"))
        #expect(SourceCheck(followSymlinks: false).outcome(.unreadable("EIO"), j) == .failed("cannot read the file: EIO"))
        // Read, but not the hashed bytes: read again rather than fail.
        #expect(SourceCheck(followSymlinks: false).recheck(j, unreadable: nil) == .sourceChanged(gone: false))
    }

    @Test func aLinkIsFollowedOnlyWhenTheWatcherFollowsLinks() throws {
        let target = try write("e.jpg", "abc")
        let link = dir + "/link.jpg"
        #expect(symlink(target, link) == 0)
        var j = try job(target)
        j.path = link
        #expect(SourceCheck(followSymlinks: false).recheck(j, unreadable: nil) == .sourceChanged(gone: true))
        #expect(SourceCheck(followSymlinks: true).recheck(j, unreadable: "EIO") == .failed("EIO"))
    }
}
