import CMultiMD5
import Foundation
import Synchronization
import Testing
import Digests

@Suite struct FileHasherTests {
    static func tempDir() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    static func md5sum(_ path: String) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/md5sum")
        p.arguments = [path]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(String(decoding: data, as: UTF8.self).prefix(32))
    }

    /// Random bytes written in 1 MiB chunks so a 300 MiB file does not need 300 MiB of memory.
    static func randomFile(_ url: URL, size: Int) throws {
        FileManager.default.createFile(atPath: url.path, contents: nil)
        let h = try FileHandle(forWritingTo: url)
        let random = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
        var remaining = size
        while remaining > 0 {
            let n = min(remaining, 1 << 20)
            h.write(try random.read(upToCount: n) ?? Data())
            remaining -= n
        }
        try random.close()
        try h.close()
    }

    @Test(arguments: [0, 1, 65535, (1 << 20) + 1])
    func matchesMd5sum(size: Int) throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("f.jpg")
        try Self.randomFile(file, size: size)
        let digest = try FileHasher().hash(path: file.path)
        #expect(digest.md5 == (try Self.md5sum(file.path)))
        #expect(digest.identity.size == Int64(size))
    }

    static func sha256sum(_ path: String) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        p.arguments = [path]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(String(decoding: data, as: UTF8.self).prefix(64))
    }

    /// The SHA-256 for signed uploads comes from the same pass as the MD5, and only when asked.
    @Test(arguments: [0, 65535, (1 << 20) + 1])
    func takesTheSHA256InTheSamePassWhenAsked(size: Int) throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("f.jpg")
        try Self.randomFile(file, size: size)
        let both = try FileHasher().hash(path: file.path, sha256: true)
        #expect(both.md5 == (try Self.md5sum(file.path)))
        #expect(both.sha256 == (try Self.sha256sum(file.path)))
        #expect(try FileHasher().hash(path: file.path).sha256 == nil)
    }

    @Test func largeFileMatchesMd5sum() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("big.mov")
        // Random head and tail around a sparse middle keep the test quick but still 300 MiB.
        try Self.randomFile(file, size: 3 << 20)
        let h = try FileHandle(forWritingTo: file)
        try h.seek(toOffset: UInt64(300 << 20) - 4096)
        h.write(Data(repeating: 0xAB, count: 4096))
        try h.close()
        let digest = try FileHasher().hash(path: file.path)
        #expect(digest.identity.size == 300 << 20)
        #expect(digest.md5 == (try Self.md5sum(file.path)))
    }

    /// The fraction of a file's pages in the page cache (mincore over a mapping).
    static func residentFraction(_ path: String) -> Double {
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var st = stat()
        guard fd >= 0, fstat(fd, &st) == 0, st.st_size > 0 else { return 0 }
        let size = Int(st.st_size)
        guard let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return 0 }
        defer { munmap(map, size) }
        let pages = (size + 4095) / 4096
        var vec = [UInt8](repeating: 0, count: pages)
        guard mincore(map, size, &vec) == 0 else { return 0 }
        return Double(vec.filter { $0 & 1 != 0 }.count) / Double(pages)
    }

    static func evict(_ path: String) {
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        _ = fsync(fd)
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
    }

    @Test func bigFilesGiveBackOnlyThePagesTheyBroughtIn() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("clip.mov")
        // Big enough for the kernel to cache it in large folios (up to 2 MiB), which a
        // drop chunk by chunk never covered.
        try Self.randomFile(file, size: 48 << 20)
        var hasher = FileHasher()
        hasher.dropCacheAbove = 1 << 20
        let expected = try Self.md5sum(file.path)

        // Cached before (just written, read by md5sum): it stays cached for whoever reads it next.
        #expect(Self.residentFraction(file.path) > 0.9)
        #expect(try hasher.hash(path: file.path).md5 == expected)
        #expect(Self.residentFraction(file.path) > 0.9)

        // Read from the disk by the hasher: dropped again as it goes.
        Self.evict(file.path)
        guard Self.residentFraction(file.path) < 0.1 else { return }  // tmpfs and the like cannot evict: nothing to see
        #expect(try hasher.hash(path: file.path).md5 == expected)
        #expect(Self.residentFraction(file.path) < 0.2)

        // Small files are left to the kernel either way.
        Self.evict(file.path)
        hasher.dropCacheAbove = 64 << 20
        #expect(try hasher.hash(path: file.path).md5 == expected)
        // Kept (a dropped file is under 0.2); not all of it: with every suite reading at
        // once, the kernel reclaims some of a freshly read file on its own (0.75 seen).
        #expect(Self.residentFraction(file.path) > 0.5)
    }

    @Test func missingFileIsVanished() throws {
        #expect(throws: FileHasher.Failure.vanished) { try FileHasher().hash(path: "/nonexistent/photo.jpg") }
    }

    @Test func directoryIsNotAFile() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(throws: FileHasher.Failure.notRegularFile) { try FileHasher().hash(path: dir.path) }
    }

    @Test func symlinkIsNotFollowedUnlessAsked() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("real.jpg")
        try Self.randomFile(file, size: 100)
        let link = dir.appendingPathComponent("link.jpg")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: file)
        #expect(throws: FileHasher.Failure.notRegularFile) { try FileHasher().hash(path: link.path) }
        #expect(try FileHasher().hash(path: link.path, followSymlinks: true).md5 == (try Self.md5sum(file.path)))
    }

    @Test func fileGrowingWhileReadIsRejected() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("growing.jpg")
        try Self.randomFile(file, size: 16 << 20)
        // A writer thread keeps rewriting bytes in place (the size stays, the mtime moves)
        // while the hasher reads: the result must be `.changed`, never a digest of bytes that
        // were still moving. Rewriting in place keeps the file from growing without bound.
        let stop = Mutex(false)
        let writer = Thread {
            guard let h = try? FileHandle(forWritingTo: file) else { return }
            var offset: UInt64 = 0
            while !stop.withLock({ $0 }) {
                try? h.seek(toOffset: offset)
                h.write(Data(repeating: 1, count: 4096))
                offset = (offset + 1_048_576) % UInt64(16 << 20)
                usleep(200)
            }
            try? h.close()
        }
        writer.start()
        defer { stop.withLock { $0 = true } }
        var outcomes: [String] = []
        for _ in 0..<20 {
            do {
                _ = try FileHasher().hash(path: file.path)
                outcomes.append("digest")
            } catch {
                outcomes.append("\(error)")
            }
        }
        // A read that no write happened to overlap may give a (then correct) digest; most must not.
        #expect(outcomes.filter { $0 == "the file changed while it was being read" }.count >= 10, "\(outcomes)")
        #expect(outcomes.allSatisfy { $0 == "the file changed while it was being read" || $0 == "digest" }, "\(outcomes)")
    }

    /// One file at a time per thread (CPUs without AVX2) and many at once (this CPU's best).
    @Test(arguments: [Int32(PL_MD5_SCALAR), pl_md5_lanes_best_level()])
    func poolHashesConcurrentlyAndReportsFailures(level: Int32) async throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        var expected: [String: String] = [:]
        for i in 0..<20 {
            let f = dir.appendingPathComponent("p\(i).jpg")
            try Self.randomFile(f, size: 1000 * i)
            expected[f.path] = try Self.md5sum(f.path)
        }
        let pool = HasherPool(workers: 3, level: level)
        #expect(pool.filesAtOnce == (level == PL_MD5_SCALAR ? 1 : 16))
        defer { pool.shutdown() }
        try await withThrowingTaskGroup(of: (String, HasherPool.Result).self) { group in
            for path in expected.keys { group.addTask { (path, await pool.hash(path: path)) } }
            group.addTask { ("/missing.jpg", await pool.hash(path: "/missing.jpg")) }
            for try await (path, result) in group {
                switch result {
                case .success(let d): #expect(d.md5 == expected[path])
                case .failure(let f): #expect(path == "/missing.jpg" && f == .vanished)
                }
            }
        }
        #expect(pool.bytesHashed == Int64((0..<20).map { 1000 * $0 }.reduce(0, +)))
    }

    /// A batch is answered in its own order, whatever order the lanes finish in, with a
    /// missing file's failure in its place; several batches at once do not mix.
    @Test(arguments: [Int32(PL_MD5_SCALAR), pl_md5_lanes_best_level()])
    func aBatchIsAnsweredInItsOrder(level: Int32) async throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        var paths: [String] = []
        var expected: [String] = []
        for i in 0..<40 {
            let f = dir.appendingPathComponent("b\(i).jpg")
            // Big ones first: the small ones behind them finish earlier.
            try Self.randomFile(f, size: (40 - i) * 20_000)
            paths.append(f.path)
            expected.append(try Self.md5sum(f.path))
        }
        paths.insert("/missing.jpg", at: 7)
        expected.insert("vanished", at: 7)
        let pool = HasherPool(workers: 2, level: level)
        defer { pool.shutdown() }
        let batch = paths
        let batches = try await withThrowingTaskGroup(of: (Int, [HasherPool.Result]).self) { group in
            for k in 0..<3 { group.addTask { (k, await pool.hash(paths: k == 1 ? batch.reversed() : batch)) } }
            var all: [Int: [HasherPool.Result]] = [:]
            for try await (k, results) in group { all[k] = results }
            return all
        }
        for (k, results) in batches {
            let want = k == 1 ? expected.reversed() : expected
            let got = results.map { r -> String in
                switch r {
                case .success(let d): d.md5
                case .failure(let f): f == .vanished ? "vanished" : "\(f)"
                }
            }
            #expect(got == Array(want), "batch \(k)")
        }
        #expect(await pool.hash(paths: []).isEmpty)
    }

    /// A stopping pool answers a batch at once, every file "stopping", and a cancelled
    /// caller is not kept waiting for the files being read.
    @Test func aBatchIsAnsweredWhenThePoolStopsOrTheCallerIsCancelled() async throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let f = dir.appendingPathComponent("one.jpg")
        try Self.randomFile(f, size: 10)
        let stopped = HasherPool(workers: 1)
        stopped.shutdown()
        let answers = await stopped.hash(paths: [f.path, f.path])
        #expect(answers.count == 2)
        for a in answers { #expect(a == .failure(.unreadable("the daemon is stopping"))) }

        // One thread, one file at a time, and the batch's first file 256 MiB (sparse: zeros
        // hashed at the CPU's speed, a few tenths of a second): the files behind it are still
        // queued when the caller is cancelled or the pool stops, so they are answered
        // "stopping", all of them, whatever the machine's load.
        let big = dir.appendingPathComponent("big.jpg")
        #expect(FileManager.default.createFile(atPath: big.path, contents: nil))
        #expect(truncate(big.path, 256 << 20) == 0)
        var many: [String] = [big.path]
        for i in 0..<399 {
            let g = dir.appendingPathComponent("m\(i).jpg")
            try Self.randomFile(g, size: 1_000)
            many.append(g.path)
        }
        let pool = HasherPool(workers: 1, level: Int32(PL_MD5_SCALAR))
        let files = many
        let waiting = Task { await pool.hash(paths: files) }
        waiting.cancel()
        let cancelled = await waiting.value
        #expect(cancelled.count == 400)
        #expect(cancelled.contains(.failure(.unreadable("the daemon is stopping"))))
        let running = Task { await pool.hash(paths: files) }
        try await Task.sleep(for: .milliseconds(5))
        pool.shutdown()
        let ended = await running.value
        #expect(ended.count == 400)
        #expect(ended.contains(.failure(.unreadable("the daemon is stopping"))))
    }

    @Test func poolThreadsAreNamedAndNicedInPsAndTop() async throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let f = dir.appendingPathComponent("one.jpg")
        try Self.randomFile(f, size: 10)
        let pool = HasherPool(workers: 2)
        defer { pool.shutdown() }
        // Once a file went through, both threads have started (one of them hashed it).
        _ = await pool.hash(path: f.path)
        var named: [String: Int] = [:]
        for _ in 0..<50 {
            named = [:]
            for task in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") {
                guard let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
                      comm.hasPrefix("photolala-hash"),
                      let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
                      let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 16,
                      let nice = Int(fields[16]) else { continue }
                // Fields after the name: state is the first, nice the 17th (proc(5): 3 and 19).
                let name = comm.trimmingCharacters(in: .whitespacesAndNewlines)
                named[name] = max(named[name] ?? 0, nice)
            }
            if named.count >= 2 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        // Other suites' pools may run too: ours are among them, niced.
        #expect(named["photolala-hash0"] == 10 && named["photolala-hash1"] == 10, "\(named)")
    }
}
