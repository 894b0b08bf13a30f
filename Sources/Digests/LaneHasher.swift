import CMultiMD5
#if canImport(Glibc)
import Glibc
#endif

/// Hashes up to 16 files at once on one thread, each in its own SIMD lane (CMultiMD5):
/// a queue of photos costs a fraction of the CPU one-at-a-time MD5 does.
///
/// Each lane owns a slice of one buffer (the kernel gathers every lane's words with
/// 32-bit offsets into it) and a source that reads the file and says what it came to:
/// `HashPass` keeps `FileHasher`'s rules (no links followed unless asked, identity checked
/// before and after, SHA-256 on the way); `OpenFilePass` reads a file the caller holds open.
final class LaneHasher<Tag, Source: LaneSource> {
    static var lanes: Int { 16 }
    /// Read per lane at a time: 16 lanes × 64 KiB is the same 1 MiB a few single-stream
    /// hashers hold, and a syscall per 64 KiB is lost in the hashing.
    static var chunk: Int { 64 << 10 }

    private struct Lane {
        var reader: Source
        var tag: Tag
        /// Unhashed bytes are slot[start..<end].
        var start = 0
        var end = 0
        var eof = false
    }

    let level: Int32
    private let slot = chunk + 64
    private let arena: UnsafeMutableRawBufferPointer
    private let state: UnsafeMutablePointer<pl_md5_lanes>
    private var lanes: [Lane?]
    private var offsets = [UInt32](repeating: 0, count: 16)

    init(level: Int32) {
        self.level = level
        arena = .allocate(byteCount: Self.lanes * slot, alignment: 4096)
        state = .allocate(capacity: 1)
        state.initialize(to: pl_md5_lanes())
        lanes = Array(repeating: nil, count: Self.lanes)
    }

    deinit {
        arena.deallocate()
        state.deallocate()
    }

    var active: Int { lanes.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }
    var free: Int { Self.lanes - active }

    /// Puts a file in a free lane (there must be one).
    func add(_ reader: Source, tag: Tag) {
        guard let i = lanes.firstIndex(where: { $0 == nil }) else { preconditionFailure("no free lane") }
        pl_md5_lanes_reset(state, UInt32(i))
        lanes[i] = Lane(reader: reader, tag: tag)
    }

    /// Takes every file out, unfinished (the daemon is stopping).
    func removeAll() -> [Tag] {
        defer { lanes = Array(repeating: nil, count: Self.lanes) }
        return lanes.compactMap { $0?.tag }
    }

    /// One round: lanes that ran dry read their next chunk, every lane with whole blocks
    /// hashes as many as the shortest of them has, and lanes at their end are finished.
    func step() -> [(Tag, Result<Source.Output, FileHasher.Failure>)] {
        var finished: [(Tag, Result<Source.Output, FileHasher.Failure>)] = []
        let base = arena.baseAddress!
        for i in lanes.indices {
            guard var lane = lanes[i], !lane.eof, lane.end - lane.start < 64 else { continue }
            let mine = base + i * slot
            let left = lane.end - lane.start
            if left > 0 { memmove(mine, mine + lane.start, left) }
            lane.start = 0
            lane.end = left
            do {
                let n = try lane.reader.read(into: UnsafeMutableRawBufferPointer(start: mine + left, count: Self.chunk))
                if n == 0 { lane.eof = true } else { lane.end += n }
                lanes[i] = lane
            } catch {
                finished.append((lane.tag, .failure(error)))
                lanes[i] = nil
            }
        }

        var mask: UInt32 = 0
        var blocks = Int.max
        for i in lanes.indices {
            guard let lane = lanes[i], lane.end - lane.start >= 64 else { continue }
            mask |= 1 << UInt32(i)
            blocks = min(blocks, (lane.end - lane.start) / 64)
            offsets[i] = UInt32(i * slot + lane.start)
        }
        if mask != 0 {
            offsets.withUnsafeBufferPointer { o in
                pl_md5_lanes_blocks(level, state, base.assumingMemoryBound(to: UInt8.self), o.baseAddress, mask, blocks)
            }
            for i in lanes.indices where mask & (1 << UInt32(i)) != 0 { lanes[i]!.start += 64 * blocks }
        }

        for i in lanes.indices {
            guard let lane = lanes[i], lane.eof, lane.end - lane.start < 64 else { continue }
            var digest = [UInt8](repeating: 0, count: 16)
            pl_md5_lanes_final(state, UInt32(i), (base + i * slot + lane.start).assumingMemoryBound(to: UInt8.self),
                               lane.end - lane.start, UInt64(lane.reader.offset), &digest)
            do throws(FileHasher.Failure) {
                finished.append((lane.tag, .success(try lane.reader.finish(md5: digest))))
            } catch {
                finished.append((lane.tag, .failure(error)))
            }
            lanes[i] = nil
        }
        return finished
    }
}

/// What a lane reads: the next bytes of one file, then (given the MD5) the file's digests.
protocol LaneSource: AnyObject {
    associatedtype Output
    /// Bytes read so far.
    var offset: Int64 { get }
    /// The next bytes into `buffer`; 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(FileHasher.Failure) -> Int
    /// After the last read.
    func finish(md5: [UInt8]) throws(FileHasher.Failure) -> Output
}

extension HashPass: LaneSource {}
