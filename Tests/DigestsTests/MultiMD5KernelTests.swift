import CMultiMD5
import Testing
import Digests

/// The SIMD kernel against OpenSSL's MD5, at every level this CPU runs: any lane mix,
/// any block count per call, every padding length.
@Suite struct MultiMD5KernelTests {
    static var levels: [Int32] { Array(Int32(PL_MD5_SCALAR)...pl_md5_lanes_best_level()) }

    /// Hashes 16 streams of the given lengths in random rounds (random lanes, random block
    /// counts, lanes idle in between) and returns each stream's digest.
    static func lanesDigest(_ streams: [[UInt8]], level: Int32, seed: UInt64) -> [[UInt8]] {
        var rng = SplitMix(seed: seed)
        let slot = (streams.map(\.count).max() ?? 0) + 64
        var arena = [UInt8](repeating: 0, count: 16 * slot)
        for (i, s) in streams.enumerated() { arena.replaceSubrange(i * slot..<(i * slot + s.count), with: s) }
        var state = pl_md5_lanes()
        for i in 0..<16 { pl_md5_lanes_reset(&state, UInt32(i)) }
        var done = [Int](repeating: 0, count: 16)   // blocks hashed per lane
        var offsets = [UInt32](repeating: 0, count: 16)
        while true {
            let left = (0..<16).map { streams[$0].count / 64 - done[$0] }
            guard left.contains(where: { $0 > 0 }) else { break }
            var mask: UInt32 = 0
            for i in 0..<16 where left[i] > 0 && rng.next() % 3 != 0 { mask |= 1 << UInt32(i) }
            if mask == 0 { continue }
            let most = (0..<16).filter { mask & (1 << UInt32($0)) != 0 }.map { left[$0] }.min()!
            let blocks = 1 + Int(rng.next() % UInt64(most))
            for i in 0..<16 { offsets[i] = UInt32(i * slot + done[i] * 64) }
            arena.withUnsafeBufferPointer { a in
                pl_md5_lanes_blocks(level, &state, a.baseAddress, offsets, mask, blocks)
            }
            for i in 0..<16 where mask & (1 << UInt32(i)) != 0 { done[i] += blocks }
        }
        return (0..<16).map { i in
            var out = [UInt8](repeating: 0, count: 16)
            let tail = Array(streams[i][(done[i] * 64)...])
            pl_md5_lanes_final(&state, UInt32(i), tail, tail.count, UInt64(streams[i].count), &out)
            return out
        }
    }

    @Test(arguments: levels)
    func everyLaneMatchesOpenSSL(level: Int32) {
        var rng = SplitMix(seed: 2026)
        // Every padding case (55/56/63/64/65 bytes over a block) and streams of many blocks.
        let edges = [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128]
        for round in 0..<40 {
            let streams = (0..<16).map { i -> [UInt8] in
                let n = round == 0 ? edges[i % edges.count] : Int(rng.next() % 9000)
                return (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            let got = Self.lanesDigest(streams, level: level, seed: UInt64(round))
            for i in 0..<16 {
                #expect(got[i] == MD5.digest(streams[i]), "level \(level), round \(round), lane \(i), \(streams[i].count) bytes")
            }
        }
    }

    /// Lanes in one half of the register only (a mirror's 8 streams take lanes 0-7): the
    /// half-width kernel, in either half, with a few lanes or all eight.
    @Test(arguments: levels)
    func lanesInOneHalfMatchOpenSSL(level: Int32) {
        var rng = SplitMix(seed: 8)
        for round in 0..<12 {
            let half = round % 2
            let busy = round < 4 ? 8 : 1 + Int(rng.next() % 8)
            let streams = (0..<16).map { i -> [UInt8] in
                guard i / 8 == half, i % 8 < busy else { return [] }
                return (0..<Int(rng.next() % 9000)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            let got = Self.lanesDigest(streams, level: level, seed: UInt64(round))
            for i in 0..<16 where !streams[i].isEmpty {
                #expect(got[i] == MD5.digest(streams[i]), "level \(level), round \(round), lane \(i), \(streams[i].count) bytes")
            }
        }
    }

    @Test func knownVectorsInEveryLane() {
        let fox = Array("The quick brown fox jumps over the lazy dog".utf8)
        for level in Self.levels {
            let got = Self.lanesDigest(Array(repeating: fox, count: 16), level: level, seed: 1)
            #expect(got.allSatisfy { Hex.string($0) == "9e107d9d372bb6826bd81d3542a419d6" })
            let empty = Self.lanesDigest(Array(repeating: [], count: 16), level: level, seed: 1)
            #expect(empty.allSatisfy { Hex.string($0) == "d41d8cd98f00b204e9800998ecf8427e" })
        }
    }

    @Test func lanesOutsideTheMaskAreNotTouched() {
        for level in Self.levels {
            var state = pl_md5_lanes()
            for i in 0..<16 { pl_md5_lanes_reset(&state, UInt32(i)) }
            let before = state
            let data = [UInt8](repeating: 7, count: 16 * 128)
            let offsets = (0..<16).map { UInt32($0 * 128) }
            pl_md5_lanes_blocks(level, &state, data, offsets, 0b1010_0000_0000_0101, 2)
            for i in 0..<16 {
                let touched = (0b1010_0000_0000_0101 >> i) & 1 == 1
                #expect((withUnsafeBytes(of: state.a) { Array($0) } != withUnsafeBytes(of: before.a) { Array($0) }))
                let same = lane(state, i) == lane(before, i)
                #expect(same == !touched, "level \(level) lane \(i)")
            }
        }
    }

    private func lane(_ s: pl_md5_lanes, _ i: Int) -> [UInt32] {
        [s.a, s.b, s.c, s.d].map { t in withUnsafeBytes(of: t) { $0.load(fromByteOffset: 4 * i, as: UInt32.self) } }
    }
}

/// A small seeded generator: the same lanes and rounds on every run.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
