#if canImport(Glibc)
import Glibc
#endif
import CMultiMD5
import Foundation
import Synchronization
import Testing
import Digests

/// Open files hashed in lanes as a restore hands them over, one by one: the same digests
/// as md5sum and sha256sum at every level this CPU runs, whatever the order and timing of
/// arrivals, and a file shorter or longer than announced is `.changed`.
@Suite struct OpenFileLanesTests {
    static var levels: [Int32] {
        [Int32(PL_MD5_SCALAR), Int32(PL_MD5_AVX2), Int32(PL_MD5_AVX512)].filter { $0 <= pl_md5_lanes_best_level() }
    }

    /// Collects answers from the hashing thread.
    final class Answers: Sendable {
        private let state = Mutex<[Int: OpenFileLanes.Result]>([:])
        func put(_ i: Int, _ r: OpenFileLanes.Result) { state.withLock { $0[i] = r } }
        var all: [Int: OpenFileLanes.Result] { state.withLock { $0 } }
    }

    @Test(arguments: levels)
    func filesArrivingOneByOneMatchMd5sumAndSha256sum(level: Int32) throws {
        let dir = try FileHasherTests.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let chunk = 64 << 10
        var sizes = [0, 1, 63, 64, 65, 4095, chunk - 1, chunk, chunk + 1, 3 * chunk + 17, (1 << 20) + 1]
        var rng = SplitMix(seed: 11)
        sizes += (0..<40).map { _ in Int(rng.next() % UInt64(6 * chunk)) }
        var fds: [Int32] = []
        var expected: [(String, String)] = []
        for (i, size) in sizes.enumerated() {
            let f = dir.appendingPathComponent("f\(i)")
            try FileHasherTests.randomFile(f, size: size)
            expected.append((try FileHasherTests.md5sum(f.path), try FileHasherTests.sha256sum(f.path)))
            fds.append(open(f.path, O_RDONLY | O_CLOEXEC))
        }
        defer { for fd in fds { close(fd) } }
        let lanes = OpenFileLanes(level: level, gather: 8, patience: 0.01)
        let answers = Answers()
        for (i, fd) in fds.enumerated() {
            lanes.submit(fd: fd, size: Int64(sizes[i]), sha256: i % 3 != 0) { answers.put(i, $0) }
            // Some arrive together, some trickle in (the thread waits for more, then goes on).
            if i % 7 == 0 { usleep(15_000) }
        }
        lanes.shutdown()
        let all = answers.all
        #expect(all.count == sizes.count)
        for i in sizes.indices {
            let digests = try #require(try all[i]?.get(), "file \(i)")
            #expect(Hex.string(digests.md5) == expected[i].0, "file \(i) of \(sizes[i]) bytes")
            #expect(digests.sha256.map(Hex.string) == (i % 3 != 0 ? expected[i].1 : nil), "file \(i)")
        }
    }

    @Test func aLoneFileIsHashedAfterThePatienceRunsOut() throws {
        let dir = try FileHasherTests.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let f = dir.appendingPathComponent("alone")
        try FileHasherTests.randomFile(f, size: 300_000)
        let fd = open(f.path, O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        let lanes = OpenFileLanes(gather: 8, patience: 0.02)
        defer { lanes.shutdown() }
        let answered = DispatchSemaphore(value: 0)
        let answers = Answers()
        lanes.submit(fd: fd, size: 300_000, sha256: true) {
            answers.put(0, $0)
            answered.signal()
        }
        // Not waiting for seven more files that never come.
        #expect(answered.wait(timeout: .now() + 5) == .success)
        #expect(Hex.string(try #require(try answers.all[0]?.get()).md5) == (try FileHasherTests.md5sum(f.path)))
    }

    @Test func aFileShorterOrLongerThanAnnouncedHasChanged() throws {
        let dir = try FileHasherTests.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let f = dir.appendingPathComponent("f")
        try FileHasherTests.randomFile(f, size: 100_000)
        let fd = open(f.path, O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        let lanes = OpenFileLanes(patience: 0.001)
        let answers = Answers()
        lanes.submit(fd: fd, size: 100_001, sha256: false) { answers.put(0, $0) }
        lanes.submit(fd: fd, size: 99_999, sha256: true) { answers.put(1, $0) }
        lanes.submit(fd: fd, size: 100_000, sha256: false) { answers.put(2, $0) }
        lanes.shutdown()
        let all = answers.all
        #expect(all[0].map { if case .failure(.changed) = $0 { true } else { false } } == true)
        #expect(all[1].map { if case .failure(.changed) = $0 { true } else { false } } == true)
        #expect(Hex.string(try #require(try all[2]?.get()).md5) == (try FileHasherTests.md5sum(f.path)))
        // After shutdown nothing is taken: the caller hears so at once.
        let late = Answers()
        lanes.submit(fd: fd, size: 1, sha256: false) { late.put(0, $0) }
        #expect(late.all[0].map { if case .failure = $0 { true } else { false } } == true)
    }
}
