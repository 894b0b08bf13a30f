import Digests
import Foundation
import ManifestFormat
import Testing
@testable import RestoreFiles

/// privacy.md "A restore that trusts nothing": whatever the manifest names, and whatever
/// was planted in the tree, nothing is written outside the root. Every test runs with
/// openat2 and with the O_NOFOLLOW walk used where the kernel lacks it.
@Suite struct RestoreRefusalTests {
    let w: WriterWorld
    let outside: String

    init() throws {
        w = try WriterWorld()
        outside = w.root + "-outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
    }

    static let modes = [false, true]

    func writer(walkOnly: Bool, overwrite: Bool = false) -> RestoreWriter {
        RestoreWriter(overwrite: overwrite, rule: OwnerRule(owners: .byName, mayChown: false, umask: 0o022), folderOwners: [:], walkOnly: walkOnly)
    }

    func outsideIsUntouched() -> Bool {
        ((try? FileManager.default.contentsOfDirectory(atPath: outside)) ?? ["?"]).isEmpty
    }

    @Test(arguments: modes) func unsafeNamesAreRefusedEvenWhenAPlanWasBypassed(walkOnly: Bool) {
        for path in ["../escape.jpg", "a/../../b.jpg", "a//b.jpg", "./a.jpg", "a/", "", "/etc/passwd"] {
            var it = w.item("x", [1])
            it.destination = Array(path.utf8)
            let error = #expect(throws: RestoreWriter.Failure.self) { try writer(walkOnly: walkOnly).parent(of: it) }
            #expect(error?.message.contains("unsafe path") == true)
            #expect(RestoreWriter.inspect(it, overwrite: false) != .write)
        }
        #expect(w.names("").isEmpty)
    }

    @Test(arguments: modes) func aLinkPlantedAtAFolderIsNotFollowed(walkOnly: Bool) async throws {
        try FileManager.default.createDirectory(atPath: w.root + "/photos", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: w.root + "/photos/2024", withDestinationPath: outside)
        let it = w.item("2024/x.jpg", [1, 2, 3])
        let error = await #expect(throws: RestoreWriter.Failure.self) { try await w.put(writer(walkOnly: walkOnly, overwrite: true), it, [1, 2, 3]) }
        #expect(error?.message == "\(w.root)/photos/2024 is a symbolic link where a folder should be: not followed, not restored")
        guard case .keep(let why) = RestoreWriter.inspect(it, overwrite: true) else { Issue.record("a dry run would follow the link"); return }
        #expect(why.contains("symbolic link"))
        // Deeper: the link is the first part below the root, and an absolute one to /.
        try FileManager.default.removeItem(atPath: w.root + "/photos")
        try FileManager.default.createSymbolicLink(atPath: w.root + "/photos", withDestinationPath: outside)
        await #expect(throws: RestoreWriter.Failure.self) { try await w.put(writer(walkOnly: walkOnly, overwrite: true), w.item("a/b/c.jpg", [1]), [1]) }
        try FileManager.default.removeItem(atPath: w.root + "/photos")
        try FileManager.default.createDirectory(atPath: w.root + "/photos/a", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: w.root + "/photos/a/up", withDestinationPath: "../../..")
        await #expect(throws: RestoreWriter.Failure.self) { try await w.put(writer(walkOnly: walkOnly, overwrite: true), w.item("a/up/c.jpg", [1]), [1]) }
        #expect(outsideIsUntouched())
    }

    @Test(arguments: modes) func aFileWhereAFolderShouldBeIsSaidSo(walkOnly: Bool) async throws {
        try FileManager.default.createDirectory(atPath: w.root + "/photos", withIntermediateDirectories: true)
        try Data("file".utf8).write(to: URL(fileURLWithPath: w.root + "/photos/2024"))
        let error = #expect(throws: RestoreWriter.Failure.self) { try writer(walkOnly: walkOnly).parent(of: w.item("2024/x.jpg", [1])) }
        #expect(error?.message.contains("is a file where a folder should be") == true)
    }

    @Test(arguments: modes) func aLinkPlantedAtAFileIsReplacedNeverWrittenThrough(walkOnly: Bool) async throws {
        try FileManager.default.createDirectory(atPath: w.root + "/photos", withIntermediateDirectories: true)
        let target = outside + "/target"
        try Data("outside".utf8).write(to: URL(fileURLWithPath: target))
        try FileManager.default.createSymbolicLink(atPath: w.root + "/photos/x.jpg", withDestinationPath: target)
        let data = Array("restored".utf8)
        let it = w.item("x.jpg", data)
        let keep = writer(walkOnly: walkOnly)
        let parent = try keep.parent(of: it)
        #expect(keep.existing(in: parent) == .link)
        #expect(!keep.holds(it.version, in: parent))
        guard case .keep = ConflictRule.decide(keep.existing(in: parent), size: it.version.size, overwrite: false) else {
            Issue.record("a link replaced without --overwrite"); return
        }
        // With --overwrite the link itself is replaced (renamed over), its target never opened.
        #expect(try await w.put(writer(walkOnly: walkOnly, overwrite: true), it, data, replace: true))
        #expect(w.stat("photos/x.jpg").map { $0.st_mode & S_IFMT == S_IFREG } == true)
        #expect(FileManager.default.contents(atPath: target) == Data("outside".utf8))
    }

    @Test(arguments: modes) func aFIFOAtAFilesNameIsReportedNeverOpened(walkOnly: Bool) async throws {
        try FileManager.default.createDirectory(atPath: w.root + "/photos", withIntermediateDirectories: true)
        #expect(mkfifo(w.root + "/photos/pipe.jpg", 0o644) == 0)
        let it = w.item("pipe.jpg", [1, 2, 3])
        let writer = writer(walkOnly: walkOnly, overwrite: true)
        let parent = try writer.parent(of: it)
        // Would block forever if it were opened for reading without O_NONBLOCK.
        #expect(writer.existing(in: parent) == .other("a named pipe (FIFO)"))
        var fifo = it
        fifo.version.size = 0
        #expect(!writer.holds(fifo.version, in: parent))
        #expect(ConflictRule.decide(writer.existing(in: parent), size: 3, overwrite: true) == .keep("a named pipe (FIFO) is there: left alone, not opened"))
        #expect(RestoreWriter.inspect(it, overwrite: true) == .keep("a named pipe (FIFO) is there: left alone, not opened"))
        // A FIFO where a folder should be is not opened either.
        #expect(mkfifo(w.root + "/photos/dir", 0o644) == 0)
        let error = #expect(throws: RestoreWriter.Failure.self) { try writer.parent(of: w.item("dir/x.jpg", [1])) }
        #expect(error?.message.contains("a named pipe (FIFO) where a folder should be") == true)
    }

    @Test func theFallbackWalkIsTheSameAsOpenat2() async throws {
        // Both find an existing deep folder and create missing ones, booking what they made.
        for walkOnly in Self.modes {
            let data = Array("deep \(walkOnly)".utf8)
            let it = w.item("\(walkOnly)/a/b/c.jpg", data)
            let writer = writer(walkOnly: walkOnly)
            #expect(try await w.put(writer, it, data))
            #expect(try await w.put(writer, w.item("\(walkOnly)/a/b/d.jpg", data), data))
            let created = writer.book.all.created.map { String(decoding: $0.path, as: UTF8.self) }.sorted()
            #expect(created == ["photos", "photos/\(walkOnly)", "photos/\(walkOnly)/a", "photos/\(walkOnly)/a/b"].filter { $0 != "photos" || !walkOnly })
        }
    }
}
