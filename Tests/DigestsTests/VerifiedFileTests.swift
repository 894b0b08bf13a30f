#if canImport(Glibc)
import Glibc
#endif
import Digests
import Foundation
import PhotolalaCore
import Testing

/// The one way to open the very file that was hashed: what it refuses, and how it says so.
@Suite struct VerifiedFileTests {
    static func tempDir() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("verified-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    static func identity(_ path: String) throws -> FileIdentity {
        var st = stat()
        try #require(lstat(path, &st) == 0)
        return FileIdentity(st)
    }

    @Test func opensTheHashedFileAndReadsItByOffset() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("a.jpg").path
        let bytes = (0..<10_000).map { UInt8($0 % 251) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let file = try VerifiedFile(path: path, expected: try Self.identity(path))
        #expect(file.size == 10_000)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = try buffer.withUnsafeMutableBytes { try file.read(filling: $0, at: 9000) }
        #expect(n == 1000 && Array(buffer[0..<n]) == Array(bytes[9000...]))
        #expect(try buffer.withUnsafeMutableBytes { try file.read(into: $0, at: 10_000) } == 0)
        #expect(file.isUnchanged)
    }

    @Test func aRangeIsDigestedInOneReadFedInPiecesOrAtOnce() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let abc = dir.appendingPathComponent("abc").path
        try Data("xxabcyy".utf8).write(to: URL(fileURLWithPath: abc))
        let digest = try VerifiedFile(path: abc).digest(from: 2, length: 3, sha256: true)
        #expect(digest.md5Hex == "900150983cd24fb0d6963f7d28e17f72")
        #expect(digest.sha256Hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(try VerifiedFile(path: abc).digest(from: 2, length: 3, md5: false).md5 == nil)

        let empty = dir.appendingPathComponent("empty").path
        try Data().write(to: URL(fileURLWithPath: empty))
        let none = try VerifiedFile(path: empty).digest(sha256: true)
        #expect(none.md5Hex == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(none.sha256Hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")

        let bytes = (0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let big = dir.appendingPathComponent("big").path
        try Data(bytes).write(to: URL(fileURLWithPath: big))
        let file = try VerifiedFile(path: big)
        #expect(try file.digest(sha256: true, chunkSize: 7) == file.digest(sha256: true, chunkSize: 1 << 20))
        // Past the end: not the file that was hashed.
        #expect(throws: VerifiedFile.Failure.changed) { try file.digest(from: 100_000, length: 4) }
    }

    @Test func missingIsVanished() {
        #expect(throws: VerifiedFile.Failure.vanished) { try VerifiedFile(path: "/nonexistent/photo.jpg") }
        #expect(throws: VerifiedFile.Failure.vanished) { try VerifiedFile(path: "/etc/passwd/photo.jpg") }
    }

    @Test func anotherFileThanTheHashedOneIsChanged() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("a.jpg").path
        try Data("first".utf8).write(to: URL(fileURLWithPath: path))
        let hashed = try Self.identity(path)
        try Data("second, longer".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: VerifiedFile.Failure.changed) { try VerifiedFile(path: path, expected: hashed) }
    }

    @Test func aLinkOrFifoSwappedInIsChangedWithoutWaiting() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let real = dir.appendingPathComponent("real.jpg").path
        try Data("photo".utf8).write(to: URL(fileURLWithPath: real))
        let hashed = try Self.identity(real)
        let link = dir.appendingPathComponent("link.jpg").path
        #expect(symlink(real, link) == 0)
        #expect(throws: VerifiedFile.Failure.changed) { try VerifiedFile(path: link, expected: hashed) }
        #expect(throws: VerifiedFile.Failure.notRegularFile) { try VerifiedFile(path: link) }
        // Followed when the watcher follows links: the target's identity is the one hashed.
        #expect(try VerifiedFile(path: link, expected: hashed, followSymlinks: true).identity == hashed)
        // A blocking open of a FIFO would wait for a writer forever.
        let fifo = dir.appendingPathComponent("fifo.jpg").path
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: VerifiedFile.Failure.changed) { try VerifiedFile(path: fifo, expected: hashed) }
        #expect(throws: VerifiedFile.Failure.notRegularFile) { try VerifiedFile(path: dir.path) }
    }

    @Test func rewrittenOrReplacedAfterOpeningIsNoticed() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("a.jpg").path
        try Data("photo".utf8).write(to: URL(fileURLWithPath: path))
        let file = try VerifiedFile(path: path, expected: try Self.identity(path))
        // Replaced by rename: our descriptor stays on the old inode, the path tells.
        let other = dir.appendingPathComponent("b.jpg").path
        try Data("photo".utf8).write(to: URL(fileURLWithPath: other))
        #expect(rename(other, path) == 0)
        #expect(throws: VerifiedFile.Failure.changed) { try file.checkUnchanged() }
        #expect(unlink(path) == 0)
        #expect(throws: VerifiedFile.Failure.vanished) { try file.checkUnchanged() }
        #expect(!file.isUnchanged)
    }

    // Root reads everything: the refusal cannot be made as root.
    @Test(.enabled(if: geteuid() != 0)) func unreadableNamesTheReasonAndWhatToDo() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("secret.jpg").path
        try Data("photo".utf8).write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, 0) == 0)
        #expect(throws: VerifiedFile.Failure.unreadable(
            "permission denied: the daemon's user cannot read it (see photolalad(8), \"Permissions\")")) {
            try VerifiedFile(path: path)
        }
    }

    @Test func interruptedCallsAreRetried() {
        var calls = 0
        let result = retryingInterrupts { () -> Int in
            calls += 1
            if calls < 3 { errno = EINTR; return -1 }
            return 7
        }
        #expect(result == 7 && calls == 3)
        #expect(retryingInterrupts { () -> Int32 in errno = EBADF; return -1 } == -1 && errno == EBADF)
    }
}
