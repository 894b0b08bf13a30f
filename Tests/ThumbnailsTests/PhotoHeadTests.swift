import Digests
import Foundation
import PhotolalaCore
import Testing
import Thumbnails

/// What the daemon itself reads of a photo: the head MD5 and the format, from the very
/// file that was hashed and nothing else.
@Suite struct PhotoHeadTests {
    let dir: URL

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("photo-file-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ bytes: [UInt8]) throws -> (String, FileIdentity) {
        let path = dir.appendingPathComponent(name).path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var st = stat()
        stat(path, &st)
        return (path, FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                                   mtimeSec: Int64(st.st_mtim.tv_sec), mtimeNsec: Int64(st.st_mtim.tv_nsec)))
    }

    @Test func theHeadIsTheFirst4096Bytes() throws {
        let bytes: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0] + (0..<10_000).map { UInt8($0 % 251) }
        let (path, identity) = try write("a.jpg", bytes)
        let file = try VerifiedFile(path: path, expected: identity, followSymlinks: false)
        let head = try ThumbnailService.head(of: file)
        #expect(head.format == .jpeg)
        #expect(head.md5 == Self.md5Hex(Array(bytes.prefix(4096))))
        #expect(file.isUnchanged)
    }

    @Test func aShortFileIsItsOwnHead() throws {
        let bytes: [UInt8] = Array("GIF89a tiny".utf8)
        let (path, identity) = try write("t.gif", bytes)
        let head = try ThumbnailService.head(of: VerifiedFile(path: path, expected: identity, followSymlinks: false))
        #expect(head.format == .gif && head.md5 == Self.md5Hex(bytes))
    }

    @Test func anotherFileAtThePathIsRefused() throws {
        let (path, identity) = try write("b.jpg", [0xFF, 0xD8, 0xFF, 0])
        var other = identity
        other.mtimeNsec += 1
        #expect(throws: VerifiedFile.Failure.changed) { try VerifiedFile(path: path, expected: other, followSymlinks: false) }
        #expect(throws: VerifiedFile.Failure.vanished) {
            try VerifiedFile(path: path + ".gone", expected: identity, followSymlinks: false)
        }
    }

    @Test func aSymlinkIsRefusedUnlessFollowed() throws {
        let (path, identity) = try write("c.jpg", [0xFF, 0xD8, 0xFF, 0])
        let link = dir.appendingPathComponent("link.jpg").path
        symlink(path, link)
        #expect(throws: VerifiedFile.Failure.changed) { try VerifiedFile(path: link, expected: identity, followSymlinks: false) }
        #expect(try ThumbnailService.head(of: VerifiedFile(path: link, expected: identity, followSymlinks: true)).format == .jpeg)
    }

    @Test func aRewriteIsNoticedAfterTheRead() throws {
        let (path, identity) = try write("d.jpg", [0xFF, 0xD8, 0xFF, 0])
        let file = try VerifiedFile(path: path, expected: identity, followSymlinks: false)
        try Data([0xFF, 0xD8, 0xFF, 1, 2]).write(to: URL(fileURLWithPath: path))
        #expect(!file.isUnchanged)
    }

    static func md5Hex(_ bytes: [UInt8]) -> String {
        Hex.string(MD5.digest(bytes))
    }
}
