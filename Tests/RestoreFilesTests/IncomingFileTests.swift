import Digests
import Foundation
import ManifestFormat
import RestoreFiles
import Testing

@Suite struct IncomingFileTests {
    let w: WriterWorld
    init() throws { w = try WriterWorld() }

    /// Bytes 0, 1, 2, … that no two offsets of a buffer share by accident.
    static func body(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) } }

    /// Pieces of every awkward size: smaller than a page, across a buffer's end, larger than a buffer.
    static func pieces(_ data: [UInt8]) -> [ArraySlice<UInt8>] {
        let sizes = [1, 4095, 7000, 16_384, 40_000, 3, 9_999]
        var out: [ArraySlice<UInt8>] = []
        var at = 0
        var i = 0
        while at < data.count {
            let n = min(sizes[i % sizes.count], data.count - at)
            out.append(data[at..<(at + n)])
            at += n
            i += 1
        }
        return out
    }

    /// How many of the file's pages the page cache holds.
    static func resident(_ fd: Int32, size: Int) -> Int? {
        guard size > 0, let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return nil }
        defer { munmap(map, size) }
        let pages = (size + 4095) / 4096
        var vector = [UInt8](repeating: 0, count: pages)
        guard mincore(map, size, &vector) == 0 else { return nil }
        return vector.reduce(0) { $0 + Int($1 & 1) }
    }

    /// Whether `path` is on tmpfs (whose files are the page cache, direct or not): the
    /// filesystem type of the longest mount point above it.
    static func onTmpfs(_ path: String) -> Bool {
        let mounts = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        var best: (point: String, type: String) = ("", "")
        for line in mounts.split(separator: "\n") {
            let f = line.split(separator: " ")
            guard f.count > 2 else { continue }
            let point = String(f[1])
            if (path == point || path.hasPrefix(point == "/" ? "/" : point + "/")) && point.count >= best.point.count {
                best = (point, String(f[2]))
            }
        }
        return best.type == "tmpfs"
    }

    /// A new temporary file for `it` that gathers its body in `buffers`.
    func gathering(_ it: RestoreItem, in buffers: DirectBuffers) throws -> IncomingFile {
        let writer = RestoreWriter(overwrite: false)
        return try writer.incoming(in: try writer.parent(of: it), direct: buffers)
    }

    /// Commits `incoming` as `it` (read back first, as the mirror and the restore do) and
    /// expects `data` under its name.
    func expectPlaced(_ incoming: IncomingFile, _ it: RestoreItem, _ data: [UInt8]) async throws {
        #expect(try await incoming.commit(it.version, replace: false, readBack: w.readBack(incoming)))
        #expect(FileManager.default.contents(atPath: it.root + "/" + String(decoding: it.destination, as: UTF8.self)) == Data(data))
    }

    @Test func aBodyInOddPiecesIsWrittenPastThePageCacheByteForByte() async throws {
        let buffers = DirectBuffers(size: 16_384, limit: 2)
        let data = Self.body(100_003)
        let it = w.item("direct.jpg", data)
        let incoming = try gathering(it, in: buffers)
        #expect(incoming.writesDirect)
        for piece in Self.pieces(data) { try piece.withUnsafeBytes { try incoming.append($0) } }
        #expect(incoming.written == Int64(data.count))
        // Six whole buffers are in the file, none of them through the page cache; the tail waits.
        var st = Glibc.stat()
        #expect(fstat(incoming.descriptor, &st) == 0 && st.st_size == 6 * 16_384)
        if !Self.onTmpfs(w.root) {
            #expect(Self.resident(incoming.descriptor, size: 6 * 16_384) == 0)
        }
        try incoming.settle()
        try incoming.settle()
        #expect(!incoming.writesDirect && buffers.kept == 1)
        #expect(fstat(incoming.descriptor, &st) == 0 && st.st_size == Int64(data.count))
        try await expectPlaced(incoming, it, data)
        #expect(buffers.kept == 1)
    }

    @Test func bytesAppendedAfterASettleFollowTheGatheredOnes() async throws {
        let buffers = DirectBuffers(size: 16_384, limit: 2)
        let data = Self.body(70_000)
        let it = w.item("after.jpg", data)
        let incoming = try gathering(it, in: buffers)
        try data[..<40_000].withUnsafeBytes { try incoming.append($0) }
        try incoming.settle()
        try data[40_000...].withUnsafeBytes { try incoming.append($0) }
        try await expectPlaced(incoming, it, data)
    }

    @Test func aBodyOfWholeBuffersAndAnEmptyOneArriveToo() async throws {
        let buffers = DirectBuffers(size: 16_384, limit: 2)
        for (name, data) in [("whole.jpg", Self.body(3 * 16_384)), ("empty.jpg", [])] {
            let it = w.item(name, data)
            let incoming = try gathering(it, in: buffers)
            try data.withUnsafeBytes { try incoming.append($0) }
            try incoming.settle()
            try await expectPlaced(incoming, it, data)
        }
    }

    @Test func commitWritesAGatheredTailItselfAndABodyThatDoesNotMatchLeavesNothing() async throws {
        let buffers = DirectBuffers(size: 16_384, limit: 2)
        let data = Self.body(20_000)
        let it = w.item("tail.jpg", data)
        let incoming = try gathering(it, in: buffers)
        try data.withUnsafeBytes { try incoming.append($0) }
        // The digests of what it must be (the read-back of a settled file gives the same).
        let digests = OpenFileDigests(md5: MD5.digest(data), sha256: nil)
        #expect(try incoming.commit(it.version, replace: false, readBack: digests))
        #expect(FileManager.default.contents(atPath: w.root + "/photos/tail.jpg") == Data(data))

        let other = w.item("other.jpg", data)
        let wrong = try gathering(other, in: buffers)
        try Self.body(20_001).withUnsafeBytes { try wrong.append($0) }
        #expect(throws: RestoreWriter.Failure.self) { try wrong.commit(other.version, replace: false, readBack: digests) }
        #expect(w.names("photos") == ["tail.jpg"])
        // The first file's buffer served the second, and came back again.
        #expect(buffers.kept == 1)
    }

    @Test func aDiscardedBodyGivesItsBufferBackAndNoMoreThanTheLimitIsKept() throws {
        let buffers = DirectBuffers(size: 16_384, limit: 1)
        let files = try (0..<3).map { n in
            let it = w.item("d\(n).jpg", [1])
            let incoming = try gathering(it, in: buffers)
            try Self.body(5_000).withUnsafeBytes { try incoming.append($0) }
            return incoming
        }
        #expect(buffers.kept == 0)
        for f in files { f.discard() }
        #expect(buffers.kept == 1 && w.names("photos").isEmpty)
        buffers.drop()
        #expect(buffers.kept == 0)
    }

    @Test func rangesWrittenAtTheirOffsetsGoThroughThePageCache() async throws {
        let buffers = DirectBuffers(size: 16_384, limit: 2)
        let data = Self.body(50_000)
        let it = w.item("ranges.jpg", data)
        let incoming = try gathering(it, in: buffers)
        try data[25_000...].withUnsafeBytes { try incoming.write($0, at: 25_000) }
        #expect(!incoming.writesDirect && buffers.kept == 1)
        try data[..<25_000].withUnsafeBytes { try incoming.write($0, at: 0) }
        try await expectPlaced(incoming, it, data)
    }
}
