import Digests
import Foundation
import ManifestFormat
import Testing
@testable import Restore

@Suite struct RestoreWriterTests {
    let root: String

    init() throws {
        root = NSTemporaryDirectory() + "restore-writer-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    func item(_ path: String, _ data: [UInt8], mtime: (Int64, Int64) = (1_700_000_000, 123_456_789)) -> RestoreItem {
        RestoreItem(folder: "/srv/photos", path: Array(path.utf8),
                    version: FileVersion(size: Int64(data.count), md5: MD5Value(bytes: MD5.digest(data))!, mtimeSec: mtime.0, mtimeNsec: mtime.1),
                    root: root + "/photos", destination: Array(path.utf8))
    }

    func put(_ writer: RestoreWriter, _ item: RestoreItem, _ data: [UInt8], replace: Bool = false) throws -> Bool {
        let parent = try writer.parent(of: item)
        let incoming = try writer.incoming(in: parent)
        try data.withUnsafeBytes { try incoming.append($0) }
        return try incoming.commit(item.version, replace: replace)
    }

    @Test func aFileArrivesWholeWithItsTimeAndNoTemporaryLeft() throws {
        let data = Array("hello photo".utf8)
        let it = item("2024/Summer trip/Cafe\u{301}.jpg", data)
        let writer = RestoreWriter(overwrite: false)
        #expect(try put(writer, it, data))
        let path = root + "/photos/2024/Summer trip/Cafe\u{301}.jpg"
        #expect(FileManager.default.contents(atPath: path) == Data(data))
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mtim.tv_sec == 1_700_000_000 && st.st_mtim.tv_nsec == 123_456_789)
        let names = try FileManager.default.contentsOfDirectory(atPath: root + "/photos/2024/Summer trip")
        #expect(names.count == 1)
        let parent = try writer.parent(of: it)
        #expect(writer.existing(in: parent) == .file(size: Int64(data.count)))
        #expect(writer.holds(it.version, in: parent))
    }

    @Test func bytesThatDoNotMatchTheKeyAreRefused() throws {
        let good = Array("the real bytes".utf8)
        let it = item("a.jpg", good)
        #expect(throws: RestoreWriter.Failure.self) { try put(RestoreWriter(overwrite: false), it, Array("other  bytes!!".utf8)) }
        #expect(!FileManager.default.fileExists(atPath: root + "/photos/a.jpg"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/photos").isEmpty)
    }

    @Test func aFileThatAppearedMeanwhileIsLeftAlone() throws {
        let data = Array("mine".utf8)
        let it = item("b.jpg", data)
        let writer = RestoreWriter(overwrite: false)
        let parent = try writer.parent(of: it)
        let incoming = try writer.incoming(in: parent)
        try data.withUnsafeBytes { try incoming.append($0) }
        try Data("theirs".utf8).write(to: URL(fileURLWithPath: root + "/photos/b.jpg"))
        #expect(try incoming.commit(it.version, replace: false) == false)
        #expect(FileManager.default.contents(atPath: root + "/photos/b.jpg") == Data("theirs".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/photos") == ["b.jpg"])
        #expect(try put(writer, it, data, replace: true))
        #expect(FileManager.default.contents(atPath: root + "/photos/b.jpg") == Data(data))
    }

    @Test func linksBelowTheRootAreNeverFollowed() throws {
        let elsewhere = root + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/photos", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/photos/2024", withDestinationPath: elsewhere)
        let it = item("2024/x.jpg", [1, 2, 3])
        #expect(throws: RestoreWriter.Failure.self) { try put(RestoreWriter(overwrite: true), it, [1, 2, 3]) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
    }

    @Test func unsafeNamesInAManifestAreRefused() {
        for path in ["../escape.jpg", "a/../../b.jpg", "a//b.jpg", "./a.jpg", "a/"] {
            #expect(throws: RestoreWriter.Failure.self) { try RestoreWriter(overwrite: false).parent(of: item(path, [1])) }
        }
    }

    @Test func temporaryNamesAreHiddenShortAndStable() {
        let long = Array(repeating: UInt8(ascii: "x"), count: 255)
        let name = RestoreWriter.temporaryName(for: long)
        #expect(name.first == UInt8(ascii: ".") && name.count == 31)
        #expect(name == RestoreWriter.temporaryName(for: long))
        #expect(name != RestoreWriter.temporaryName(for: Array("y".utf8)))
    }

    @Test func aDryRunLooksWithoutTouching() throws {
        let data = Array("same".utf8)
        let it = item("c/d.jpg", data)
        #expect(RestoreWriter.inspect(it, overwrite: false) == .write)
        #expect(!FileManager.default.fileExists(atPath: root + "/photos"))
        #expect(try put(RestoreWriter(overwrite: false), it, data))
        #expect(RestoreWriter.inspect(it, overwrite: false) == .alreadyThere)
        var other = it
        other.version.md5 = MD5Value(high: 0, low: 0)
        guard case .keep = RestoreWriter.inspect(other, overwrite: false) else { Issue.record("not kept"); return }
    }
}
