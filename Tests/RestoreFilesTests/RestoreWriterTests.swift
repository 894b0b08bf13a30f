import Digests
import Foundation
import ManifestFormat
import Testing
import RestoreFiles

/// A temporary folder as the restore's root (`--to DIR`); items go to `photos/…` below it.
struct WriterWorld {
    let root: String

    init() throws {
        root = NSTemporaryDirectory() + "restore-writer-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    func item(_ path: String, _ data: [UInt8], mtime: (Int64, Int64) = (1_700_000_000, 123_456_789), owner: Ownership? = nil) -> RestoreItem {
        RestoreItem(folder: "/srv/photos", path: Array(path.utf8),
                    version: FileVersion(size: Int64(data.count), md5: MD5Value(bytes: MD5.digest(data))!, mtimeSec: mtime.0, mtimeNsec: mtime.1),
                    root: root, destination: Array(("photos/" + path).utf8), owner: owner)
    }

    func put(_ writer: RestoreWriter, _ item: RestoreItem, _ data: [UInt8], replace: Bool = false) async throws -> Bool {
        let parent = try writer.parent(of: item)
        let incoming = try writer.incoming(in: parent, sha256: item.version.sha256 != nil)
        try data.withUnsafeBytes { try incoming.append($0) }
        return try incoming.commit(item.version, replace: replace, readBack: await readBack(incoming))
    }

    static let lanes = OpenFileLanes()

    /// The digests of what was written, read back as the restore reads them.
    func readBack(_ incoming: IncomingFile) async throws -> OpenFileDigests {
        let (fd, size, sha256) = (incoming.descriptor, incoming.written, incoming.wantsSHA256)
        return try await withCheckedThrowingContinuation { c in
            Self.lanes.submit(fd: fd, size: size, sha256: sha256) { c.resume(with: $0) }
        }
    }

    func stat(_ path: String) -> Glibc.stat? {
        var st = Glibc.stat()
        return lstat(root + "/" + path, &st) == 0 ? st : nil
    }

    func names(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root + "/" + path)) ?? []).sorted()
    }
}

@Suite struct RestoreWriterTests {
    let w: WriterWorld
    init() throws { w = try WriterWorld() }

    @Test func theSHA256TheManifestRecordedHasTheLastWord() async throws {
        let data = Array("the bytes the NAS had".utf8)
        let writer = RestoreWriter(overwrite: false)
        var good = w.item("good.jpg", data)
        good.version.sha256 = SHA256Value(bytes: SHA256.digest(data))
        #expect(try await w.put(writer, good, data))
        #expect(writer.holds(good.version, in: try writer.parent(of: good)))
        // The same MD5 (a collision, as far as the writer can tell) but another SHA-256.
        var forged = w.item("forged.jpg", data)
        forged.version.sha256 = SHA256Value(bytes: SHA256.digest(Array("other".utf8)))
        await #expect(throws: RestoreWriter.Failure.self) { try await w.put(writer, forged, data) }
        #expect(w.stat("photos/forged.jpg") == nil && w.names("photos") == ["good.jpg"])
        // Already there with the right MD5 but not the recorded SHA-256: not "the same bytes".
        var again = good
        again.version.sha256 = forged.version.sha256
        #expect(!writer.holds(again.version, in: try writer.parent(of: again)))
    }

    @Test func aFileArrivesWholeWithItsTimeAndNoTemporaryLeft() async throws {
        let data = Array("hello photo".utf8)
        let it = w.item("2024/Summer trip/Cafe\u{301}.jpg", data)
        let writer = RestoreWriter(overwrite: false)
        #expect(try await w.put(writer, it, data))
        let path = w.root + "/photos/2024/Summer trip/Cafe\u{301}.jpg"
        #expect(FileManager.default.contents(atPath: path) == Data(data))
        let st = try #require(w.stat("photos/2024/Summer trip/Cafe\u{301}.jpg"))
        #expect(st.st_mtim.tv_sec == 1_700_000_000 && st.st_mtim.tv_nsec == 123_456_789)
        // Nothing recorded: what a new file gets (0666 less the umask), never 0600 left from the temporary.
        #expect(UInt32(st.st_mode & 0o7777) == 0o666 & ~OwnerRule.currentUmask())
        #expect(w.names("photos/2024/Summer trip").count == 1)
        let parent = try writer.parent(of: it)
        #expect(writer.existing(in: parent) == .file(size: Int64(data.count)))
        #expect(writer.holds(it.version, in: parent))
        #expect(writer.finish().isEmpty)
    }

    @Test func bytesThatDoNotMatchTheKeyAreRefused() async throws {
        let good = Array("the real bytes".utf8)
        let it = w.item("a.jpg", good)
        await #expect(throws: RestoreWriter.Failure.self) { try await w.put(RestoreWriter(overwrite: false), it, Array("other  bytes!!".utf8)) }
        #expect(w.names("photos").isEmpty)
    }

    @Test func aFileThatAppearedMeanwhileIsLeftAlone() async throws {
        let data = Array("mine".utf8)
        let it = w.item("b.jpg", data)
        let writer = RestoreWriter(overwrite: false)
        let parent = try writer.parent(of: it)
        let incoming = try writer.incoming(in: parent)
        try data.withUnsafeBytes { try incoming.append($0) }
        try Data("theirs".utf8).write(to: URL(fileURLWithPath: w.root + "/photos/b.jpg"))
        #expect(try await incoming.commit(it.version, replace: false, readBack: w.readBack(incoming)) == false)
        #expect(FileManager.default.contents(atPath: w.root + "/photos/b.jpg") == Data("theirs".utf8))
        #expect(w.names("photos") == ["b.jpg"])
        #expect(try await w.put(writer, it, data, replace: true))
        #expect(FileManager.default.contents(atPath: w.root + "/photos/b.jpg") == Data(data))
    }

    @Test func temporaryNamesAreHiddenShortAndStable() {
        let long = Array(repeating: UInt8(ascii: "x"), count: 255)
        let name = RestoreWriter.temporaryName(for: long)
        #expect(name.first == UInt8(ascii: ".") && name.count == 31)
        #expect(name == RestoreWriter.temporaryName(for: long))
        #expect(name != RestoreWriter.temporaryName(for: Array("y".utf8)))
    }

    @Test func aTemporaryFileIsCreatedNewNeverThroughWhatStandsAtItsName() async throws {
        let data = Array("fresh".utf8)
        let it = w.item("t.jpg", data)
        let victim = w.root + "/victim"
        try Data("do not touch".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createDirectory(atPath: w.root + "/photos", withIntermediateDirectories: true)
        let temp = String(decoding: RestoreWriter.temporaryName(for: Array("t.jpg".utf8)), as: UTF8.self)
        try FileManager.default.createSymbolicLink(atPath: w.root + "/photos/" + temp, withDestinationPath: victim)
        let writer = RestoreWriter(overwrite: false)
        let incoming = try writer.incoming(in: try writer.parent(of: it))
        var st = Glibc.stat()
        #expect(lstat(w.root + "/photos/" + temp, &st) == 0 && st.st_mode & S_IFMT == S_IFREG && st.st_mode & 0o777 == 0o600)
        try data.withUnsafeBytes { try incoming.append($0) }
        #expect(try await incoming.commit(it.version, replace: false, readBack: w.readBack(incoming)))
        #expect(FileManager.default.contents(atPath: victim) == Data("do not touch".utf8))
        #expect(w.names("photos") == ["t.jpg"])
    }

    @Test func aDryRunLooksWithoutTouching() async throws {
        let data = Array("same".utf8)
        let it = w.item("c/d.jpg", data)
        #expect(RestoreWriter.inspect(it, overwrite: false) == .write)
        #expect(!FileManager.default.fileExists(atPath: w.root + "/photos"))
        #expect(try await w.put(RestoreWriter(overwrite: false), it, data))
        #expect(RestoreWriter.inspect(it, overwrite: false) == .alreadyThere)
        var other = it
        other.version.md5 = MD5Value(high: 0, low: 0)
        guard case .keep = RestoreWriter.inspect(other, overwrite: false) else { Issue.record("not kept"); return }
    }
}
