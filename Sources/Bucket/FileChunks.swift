import Digests
import NIOCore
import Synchronization

/// A file range as a stream of `ByteBuffer`s of `chunkSize` bytes, read when the HTTP
/// client asks for the next one, with at most `depth` of them in memory per body.
///
/// The bound is ours to keep: the HTTP client writes a streamed body without waiting for
/// each write, and hears that the socket is full only later, from the event loop. A
/// 90 MB catalog snapshot to a slow loopback moto had 42 chunks (10.75 MB, heaptrack)
/// queued at once. So the stream reuses a ring of `depth` buffers, and refills one only
/// once the client has dropped it (written to the socket, or the request gone), which
/// `modifyIfUniquelyOwned` tells; until then it waits. A chunk handed out is never
/// written to again while anyone else holds it.
package struct FileChunks: AsyncSequence, Sendable {
    package typealias Element = ByteBuffer

    /// Why the body could not be read; an `S3Error` of kind `.localFile` to the caller.
    struct ReadFailure: Error, Sendable, CustomStringConvertible {
        var description: String
    }

    let file: VerifiedFile
    let offset: Int64
    let length: Int64
    let chunkSize: Int
    var depth = 8
    /// Where the ring's buffers come from and go back to when the body is done.
    var buffers: ChunkBuffers = .shared
    /// Waits before the stream looks again whether the oldest chunk was dropped; told how
    /// many times it waited for this chunk already.
    var pause: @Sendable (Int) async throws -> Void = Self.pause

    /// A full ring means the network is `depth` chunks behind the disk (2 MB at the
    /// default size): a quarter of a millisecond's wait never starves it, and neither do
    /// 2 ms. Doubling up to that: a fixed 250 µs looked again about twenty times for each
    /// chunk a 50 MB/s connection drains, each look a timer and a thread woken
    /// (docs/benchmarks.md, "The upload's waits").
    static let pause: @Sendable (Int) async throws -> Void = { waited in
        try await Task.sleep(for: .microseconds(250 << Swift.min(waited, 3)))
    }

    package func makeAsyncIterator() -> Iterator {
        Iterator(file: file, position: offset, remaining: length, chunkSize: chunkSize, depth: Swift.max(1, depth), pause: pause,
                 buffers: buffers)
    }

    package struct Iterator: AsyncIteratorProtocol {
        let file: VerifiedFile
        var position: Int64
        var remaining: Int64
        let chunkSize: Int
        let depth: Int
        let pause: @Sendable (Int) async throws -> Void
        let buffers: ChunkBuffers
        /// Our own reference to each buffer handed out, oldest at `next`.
        private var ring: [ByteBuffer] = []
        private var oldest = 0

        init(file: VerifiedFile, position: Int64, remaining: Int64, chunkSize: Int, depth: Int,
             pause: @escaping @Sendable (Int) async throws -> Void, buffers: ChunkBuffers) {
            self.file = file
            self.position = position
            self.remaining = remaining
            self.chunkSize = chunkSize
            self.depth = depth
            self.pause = pause
            self.buffers = buffers
        }

        package mutating func next() async throws -> ByteBuffer? {
            guard remaining > 0 else {
                // Those the client let go of go back; the others are the client's to drop.
                var done: [ByteBuffer] = []
                for i in ring.indices where ring[i].modifyIfUniquelyOwned({ $0.clear() }) != nil { done.append(ring[i]) }
                ring.removeAll()
                buffers.keep(done)
                return nil
            }
            let want = Int(Swift.min(Int64(chunkSize), remaining))
            var buffer: ByteBuffer
            if ring.count < depth {
                buffer = buffers.take(capacity: chunkSize)
            } else {
                var waited = 0
                while ring[oldest].modifyIfUniquelyOwned({ $0.clear() }) == nil {
                    try await pause(waited)
                    waited += 1
                }
                buffer = ring[oldest]
                // Our two references to one storage: the ring's dropped, the write below
                // does not copy it.
                ring[oldest] = ByteBuffer()
            }
            try read(want, into: &buffer)
            if ring.count < depth {
                ring.append(buffer)
            } else {
                ring[oldest] = buffer
                oldest = (oldest + 1) % depth
            }
            return buffer
        }

        private mutating func read(_ want: Int, into buffer: inout ByteBuffer) throws {
            let file = self.file
            let position = self.position
            var failure: VerifiedFile.Failure?
            let got = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in
                do throws(VerifiedFile.Failure) {
                    return try file.read(filling: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]), at: position)
                } catch {
                    failure = error
                    return 0
                }
            }
            if let failure { throw ReadFailure(description: "\(file.path): \(failure)") }
            guard got == want else {
                throw ReadFailure(description: "\(file.path) shrank during the upload: it changed since it was hashed")
            }
            // Uploaded bytes are not read again soon: keeps a big video from flushing the page cache.
            if file.size > 64 << 20 { file.advise(.dontNeed, from: position, length: Int64(got)) }
            self.position += Int64(got)
            remaining -= Int64(got)
        }
    }
}

/// The chunk buffers bodies leave behind, for the next body: a fresh 256 KB buffer is
/// sixty-four page faults, each a zeroed page, and every upload of a photo began with
/// eight of them: 3 % of the daemon's CPU in an upload of 300 photos (docs/benchmarks.md,
/// "The upload's fresh buffers"). Only a buffer nobody else holds comes back (the HTTP
/// client may still be writing the last ones); at most `limit` are kept, 4 MB at the
/// default size, and the uploader drops them when it finds nothing to send.
package final class ChunkBuffers: Sendable {
    package static let shared = ChunkBuffers(limit: 16)

    private let limit: Int
    private let free = Mutex<[ByteBuffer]>([])

    package init(limit: Int) {
        self.limit = limit
    }

    /// Buffers kept now.
    package var kept: Int { free.withLock { $0.count } }

    /// An empty buffer of at least `capacity` bytes: a kept one, or a new one.
    func take(capacity: Int) -> ByteBuffer {
        let kept = free.withLock { free -> ByteBuffer? in
            guard let last = free.last, last.capacity >= capacity else { return nil }
            return free.removeLast()
        }
        return kept ?? ByteBufferAllocator().buffer(capacity: capacity)
    }

    /// Lets go of every kept buffer (their memory back to malloc).
    package func drop() {
        free.withLock { $0.removeAll() }
    }

    /// Keeps `done` (empty, held by nobody else once the caller lets go) for other
    /// bodies, as many as there is room for.
    func keep(_ done: [ByteBuffer]) {
        guard !done.isEmpty else { return }
        free.withLock { $0.append(contentsOf: done.prefix(max(0, limit - $0.count))) }
    }
}
