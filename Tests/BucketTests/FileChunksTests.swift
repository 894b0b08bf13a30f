import Digests
import Foundation
import NIOCore
import Synchronization
import Testing
@testable import Bucket

@Suite struct FileChunksTests {
    static func file(_ bytes: [UInt8]) throws -> (path: String, file: VerifiedFile) {
        let path = NSTemporaryDirectory() + "/file-chunks-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return (path, try VerifiedFile(path: path))
    }

    static let bytes = (0..<(300 * 1024 + 123)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }

    @Test func aRangeComesBackByteForByteWhenEachChunkIsDroppedBeforeTheNext() async throws {
        let (path, file) = try Self.file(Self.bytes)
        defer { unlink(path) }
        let chunks = FileChunks(file: file, offset: 100, length: Int64(Self.bytes.count - 100), chunkSize: 64 << 10, depth: 2,
                                pause: { _ in Issue.record("a dropped chunk was waited for") })
        var got: [UInt8] = []
        var sizes: [Int] = []
        for try await chunk in chunks {
            got += chunk.readableBytesView
            sizes.append(chunk.readableBytes)
        }
        #expect(got == Array(Self.bytes[100...]))
        #expect(sizes == [65536, 65536, 65536, 65536, 45079])
    }

    /// The consumer keeps every chunk; each wait drops its oldest. The stream must wait
    /// for every chunk past the ring's depth, and no chunk kept may change.
    @Test func noMoreThanDepthChunksAreOutWhileTheClientHoldsThem() async throws {
        let (path, file) = try Self.file(Self.bytes)
        defer { unlink(path) }
        let held = Mutex<[ByteBuffer]>([])
        let waits = Atomic<Int>(0)
        let chunks = FileChunks(file: file, offset: 0, length: Int64(Self.bytes.count), chunkSize: 32 << 10, depth: 3, pause: { waited in
            #expect(waited == 0, "the oldest chunk is dropped at the first wait")
            waits.add(1, ordering: .relaxed)
            held.withLock { _ = $0.removeFirst() }
        })
        var got: [UInt8] = []
        var most = 0
        for try await chunk in chunks {
            let count = held.withLock { $0.append(chunk); return $0.count }
            most = max(most, count)
            got += chunk.readableBytesView
        }
        // 10 chunks, 3 out at a time: the 4th to the 10th each waited once.
        #expect(waits.load(ordering: .relaxed) == 7)
        #expect(most == 3)
        #expect(got == Self.bytes)
        let kept = held.withLock { $0.flatMap { Array($0.readableBytesView) } }
        #expect(kept == Array(Self.bytes[(7 * 32 << 10)...]))
    }

    /// A chunk the client holds longer is looked for less often: each wait is told how
    /// many came before it for that chunk, and the count starts again with the next.
    @Test func theWaitsForOneChunkAreCountedSoTheyCanGrow() async throws {
        let (path, file) = try Self.file(Self.bytes)
        defer { unlink(path) }
        let held = Mutex<[ByteBuffer]>([])
        let told = Mutex<[Int]>([])
        let chunks = FileChunks(file: file, offset: 0, length: 3 * (64 << 10), chunkSize: 64 << 10, depth: 1, pause: { waited in
            told.withLock { $0.append(waited) }
            // The client lets go of the chunk only at the fourth look.
            if waited == 3 { held.withLock { $0.removeAll() } }
        })
        var count = 0
        for try await chunk in chunks {
            held.withLock { $0.append(chunk) }
            count += 1
        }
        #expect(count == 3)
        #expect(told.withLock { $0 } == [0, 1, 2, 3, 0, 1, 2, 3])
    }

    @Test func aCancelledUploadStopsWaiting() async throws {
        let (path, file) = try Self.file(Self.bytes)
        defer { unlink(path) }
        let chunks = FileChunks(file: file, offset: 0, length: Int64(Self.bytes.count), chunkSize: 64 << 10, depth: 1)
        let task = Task {
            var kept: [ByteBuffer] = []
            for try await chunk in chunks { kept.append(chunk) }
            return kept.count
        }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    static func address(_ buffer: ByteBuffer) -> UInt {
        buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
    }

    /// A body's buffers the client let go of serve the next body: no fresh pages to fault
    /// in and zero at the start of every upload.
    @Test func theBuffersOfABodyServeTheNext() async throws {
        let (path, file) = try Self.file(Self.bytes)
        defer { unlink(path) }
        let buffers = ChunkBuffers(limit: 4)
        func body() -> FileChunks {
            FileChunks(file: file, offset: 0, length: Int64(Self.bytes.count), chunkSize: 64 << 10, depth: 2, buffers: buffers,
                       pause: { _ in Issue.record("a dropped chunk was waited for") })
        }
        var first: Set<UInt> = []
        var got: [UInt8] = []
        for try await chunk in body() {
            first.insert(Self.address(chunk))
            got += chunk.readableBytesView
        }
        #expect(got == Self.bytes)
        #expect(first.count == 2, "a ring of two buffers")
        #expect(buffers.kept == 2)
        var second: [UInt] = []
        got = []
        for try await chunk in body() {
            second.append(Self.address(chunk))
            got += chunk.readableBytesView
        }
        #expect(got == Self.bytes, "a kept buffer holds nothing of the body before")
        #expect(Set(second) == first)
        #expect(buffers.kept == 2)
        buffers.drop()
        #expect(buffers.kept == 0)
    }

    /// A buffer the client still holds when its body ends is the client's: not kept, never
    /// written again; and no more than the limit are kept.
    @Test func aBufferTheClientStillHoldsIsNotKeptAndTheLimitHolds() async throws {
        let (path, file) = try Self.file(Self.bytes)
        defer { unlink(path) }
        let buffers = ChunkBuffers(limit: 2)
        var last: ByteBuffer?
        for try await chunk in FileChunks(file: file, offset: 0, length: Int64(Self.bytes.count), chunkSize: 32 << 10, depth: 4, buffers: buffers,
                                          pause: { _ in Issue.record("a dropped chunk was waited for") }) {
            last = chunk
        }
        let held = try #require(last)
        let heldBytes = Array(held.readableBytesView)
        #expect(buffers.kept == 2, "three of four came back, two are kept")
        let other = [UInt8](repeating: 0xA5, count: 96 << 10)
        let (otherPath, otherFile) = try Self.file(other)
        defer { unlink(otherPath) }
        var addresses: [UInt] = []
        for try await chunk in FileChunks(file: otherFile, offset: 0, length: Int64(other.count), chunkSize: 32 << 10, depth: 4,
                                          buffers: buffers) {
            addresses.append(Self.address(chunk))
            #expect(chunk.readableBytesView.allSatisfy { $0 == 0xA5 })
        }
        #expect(!addresses.contains(Self.address(held)))
        #expect(Array(held.readableBytesView) == heldBytes)
    }
}
