import CMultiMD5
import Foundation
import Synchronization
import Testing
@testable import Digests

/// The pool hashing many files at once per thread, at every SIMD level this CPU runs:
/// the same digests as md5sum and sha256sum, and FileHasher's rules for files that are
/// missing, not regular, linked or changing.
@Suite struct LaneHasherTests {
    /// The SIMD levels this CPU runs (none on a CPU without AVX2: the pool hashes one file at a time there).
    static var levels: [Int32] { [Int32(PL_MD5_AVX2), Int32(PL_MD5_AVX512)].filter { $0 <= pl_md5_lanes_best_level() } }

    @Test(arguments: levels)
    func manyFilesAtOnceMatchMd5sumAndSha256sum(level: Int32) async throws {
        let dir = try FileHasherTests.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        // Sizes around a block, around a read chunk, and several chunks: lanes end at different rounds.
        let chunk = LaneHasher<Void, HashPass>.chunk
        var sizes = [0, 1, 63, 64, 65, 127, 128, 4095, chunk - 1, chunk, chunk + 1, chunk + 63, 3 * chunk + 17, (1 << 20) + 1]
        var rng = SplitMix(seed: 7)
        sizes += (0..<30).map { _ in Int(rng.next() % UInt64(5 * chunk)) }
        var expected: [String: (String, String)] = [:]
        for (i, size) in sizes.enumerated() {
            let f = dir.appendingPathComponent("p\(i).jpg")
            try FileHasherTests.randomFile(f, size: size)
            expected[f.path] = (try FileHasherTests.md5sum(f.path), try FileHasherTests.sha256sum(f.path))
        }
        let pool = HasherPool(workers: 2, level: level)
        defer { pool.shutdown() }
        #expect(pool.filesAtOnce == 16)
        try await withThrowingTaskGroup(of: (String, Bool, HasherPool.Result).self) { group in
            for (i, path) in expected.keys.sorted().enumerated() {
                let sha = i % 2 == 0
                group.addTask { (path, sha, await pool.hash(path: path, sha256: sha)) }
            }
            for try await (path, sha, result) in group {
                let digest = try result.get()
                #expect(digest.md5 == expected[path]!.0, "\(path)")
                #expect(digest.sha256 == (sha ? expected[path]!.1 : nil), "\(path)")
            }
        }
        #expect(pool.bytesHashed == Int64(sizes.reduce(0, +)))
        #expect(pool.inFlight == 0)
    }

    @Test(arguments: levels)
    func failuresAreTheSingleFileHashersOnes(level: Int32) async throws {
        let dir = try FileHasherTests.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("real.jpg")
        try FileHasherTests.randomFile(file, size: 100_000)
        let link = dir.appendingPathComponent("link.jpg")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: file)
        let pool = HasherPool(workers: 1, level: level)
        defer { pool.shutdown() }
        async let missing = pool.hash(path: dir.appendingPathComponent("gone.jpg").path)
        async let folder = pool.hash(path: dir.path)
        async let linked = pool.hash(path: link.path)
        async let followed = pool.hash(path: link.path, followSymlinks: true)
        async let plain = pool.hash(path: file.path)
        let (m, d, l, f, p) = await (missing, folder, linked, followed, plain)
        #expect(m == .failure(.vanished))
        #expect(d == .failure(.notRegularFile))
        #expect(l == .failure(.notRegularFile))
        #expect(try f.get().md5 == (try FileHasherTests.md5sum(file.path)))
        #expect(try p.get().md5 == (try FileHasherTests.md5sum(file.path)))
    }

    /// A file rewritten while its lane reads it is `.changed`, never a digest of moving bytes,
    /// and the other lanes' files still come out right.
    @Test func aFileChangingInOneLaneLeavesTheOthersRight() async throws {
        guard pl_md5_lanes_best_level() != PL_MD5_SCALAR else { return }
        let dir = try FileHasherTests.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let moving = dir.appendingPathComponent("moving.jpg")
        try FileHasherTests.randomFile(moving, size: 8 << 20)
        var steady: [String: String] = [:]
        for i in 0..<10 {
            let f = dir.appendingPathComponent("s\(i).jpg")
            try FileHasherTests.randomFile(f, size: 4 << 20)
            steady[f.path] = try FileHasherTests.md5sum(f.path)
        }
        let pool = HasherPool(workers: 1)
        defer { pool.shutdown() }
        // The writer moves the mtime while the lanes read: identity after != before. It
        // writes until that file's answer is in, however late a busy machine starts the hash,
        // on a thread of its own (the cooperative pool is full when the whole suite runs).
        let answered = AnsweredFlag()
        let writerDone = DispatchSemaphore(value: 0)
        let h = try FileHandle(forWritingTo: moving)
        Thread.detachNewThread {
            while !answered.value.withLock({ $0 }) {
                try? h.seek(toOffset: 0)
                h.write(Data(repeating: 1, count: 4096))
                usleep(1000)
            }
            try? h.close()
            writerDone.signal()
        }
        try await Task.sleep(for: .milliseconds(5))
        try await withThrowingTaskGroup(of: (String, HasherPool.Result).self) { group in
            group.addTask { (moving.path, await pool.hash(path: moving.path)) }
            for path in steady.keys { group.addTask { (path, await pool.hash(path: path)) } }
            for try await (path, result) in group {
                if path == moving.path {
                    answered.value.withLock { $0 = true }
                    #expect(result == .failure(.changed))
                } else {
                    #expect(try result.get().md5 == steady[path])
                }
            }
        }
        await withCheckedContinuation { done in DispatchQueue.global().async { writerDone.wait(); done.resume() } }
    }

    @Test func stoppingAnswersTheFilesInLanes() async throws {
        guard pl_md5_lanes_best_level() != PL_MD5_SCALAR else { return }
        let dir = try FileHasherTests.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let pool = HasherPool(workers: 1)
        var paths: [String] = []
        for i in 0..<20 {
            let f = dir.appendingPathComponent("big\(i).jpg")
            try FileHasherTests.randomFile(f, size: 16 << 20)
            paths.append(f.path)
        }
        try await withThrowingTaskGroup(of: HasherPool.Result.self) { group in
            for p in paths { group.addTask { await pool.hash(path: p) } }
            try await Task.sleep(for: .milliseconds(20))
            pool.shutdown()
            var stopped = 0
            for try await r in group where r == .failure(.unreadable("the daemon is stopping")) { stopped += 1 }
            // Every file got an answer (the group ended) and most never finished.
            #expect(stopped > 0)
        }
        #expect(pool.inFlight == 0)
    }
}

/// Shared between the test and its writer task (a `Mutex` alone cannot be captured).
private final class AnsweredFlag: Sendable {
    let value = Mutex(false)
}
