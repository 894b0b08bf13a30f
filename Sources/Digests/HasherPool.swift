import CLinux
import CMultiMD5
import Foundation
import PhotolalaCore
import Synchronization

/// A few dedicated threads that hash files, each with its own fixed buffer: blocking
/// reads stay off Swift's cooperative pool, and memory is fixed whatever the file sizes
/// (at most 1 MiB a thread). Threads run at low priority so a big scan never starves the NAS.
/// Where the CPU has AVX2 or AVX-512, each thread hashes up to 16 files at once
/// (`LaneHasher`); elsewhere one at a time with OpenSSL.
package final class HasherPool: Sendable {
    package typealias Result = Swift.Result<FileDigest, FileHasher.Failure>

    private struct Job: Sendable {
        var path: String
        var followSymlinks: Bool
        var sha256: Bool
        var done: @Sendable (Result) -> Void
    }

    private struct State: ~Copyable {
        var jobs: [Job] = []
        var head = 0
        var stopped = false
        var busy = 0
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    package let workers: Int
    /// CMultiMD5's level: `PL_MD5_SCALAR` hashes one file at a time per thread.
    package let level: Int32
    /// Bytes hashed since start, for the hashing rate in status.
    private let hashedBytes = Atomic<Int64>(0)

    /// `level`: CMultiMD5's, the best this CPU runs unless a test asks for another.
    package init(workers: Int = ProcessInfo.processInfo.activeProcessorCount, level: Int32? = nil) {
        self.workers = max(1, workers)
        self.level = level ?? pl_md5_lanes_best_level()
        for i in 0..<self.workers {
            let thread = Thread { [self] in
                photolala_name_this_thread("photolala-hash\(i)")
                self.workLoop()
            }
            thread.stackSize = 512 << 10
            thread.start()
        }
    }

    /// Files each thread hashes at once: callers keep at least this many per thread queued.
    package var filesAtOnce: Int { level == Int32(PL_MD5_SCALAR) ? 1 : LaneHasher<Void, HashPass>.lanes }

    package var bytesHashed: Int64 { hashedBytes.load(ordering: .relaxed) }
    package var inFlight: Int { state.withLock { $0.busy + ($0.jobs.count - $0.head) } }
    /// Files being read right now.
    package var busy: Int { state.withLock { $0.busy } }

    /// `sha256`: also the SHA-256, in the same read (see `PayloadDigests`). A task
    /// cancelled while waiting is answered at once ("stopping"); the thread reading its
    /// file finishes it and the digest is dropped.
    package func hash(path: String, followSymlinks: Bool = false, sha256: Bool = false) async -> Result {
        let answer = Answer()
        return await withTaskCancellationHandler {
            await Blocking.completion { (done: @escaping @Sendable (Result) -> Void) in
                guard answer.wait(done) else { return }
                let accepted = state.withLock { s -> Bool in
                    guard !s.stopped else { return false }
                    s.jobs.append(Job(path: path, followSymlinks: followSymlinks, sha256: sha256, done: { answer.give($0) }))
                    return true
                }
                if accepted { wake.signal() } else { answer.give(.failure(.unreadable("the daemon is stopping"))) }
            }
        } onCancel: {
            answer.give(.failure(.unreadable("the daemon is stopping")))
        }
    }

    /// Lets the workers finish their current file and exit; queued jobs are answered as cancelled.
    package func shutdown() {
        let pending = state.withLock { s -> [Job] in
            s.stopped = true
            let rest = Array(s.jobs[s.head...])
            s.jobs.removeAll()
            s.head = 0
            return rest
        }
        for job in pending { job.done(.failure(.unreadable("the daemon is stopping"))) }
        for _ in 0..<workers { wake.signal() }
    }

    private func workLoop() {
        // Nice the thread: hashing yields to everything else the NAS is doing. On an idle
        // machine that costs nothing (measured at md5sum's speed, docs/benchmarks.md); on
        // a busy one, losing the CPU to the NAS's own work is the point.
        _ = photolala_nice_this_thread(10)
        if filesAtOnce > 1 { return laneLoop() }
        let hasher = FileHasher()
        while true {
            wake.wait()
            guard let taken = take(upTo: 1) else { return }
            guard let job = taken.first else { continue }
            let result: Result
            do {
                let digest = try hasher.hash(path: job.path, followSymlinks: job.followSymlinks, sha256: job.sha256)
                hashedBytes.add(digest.identity.size, ordering: .relaxed)
                result = .success(digest)
            } catch {
                result = .failure(error)
            }
            state.withLock { $0.busy -= 1 }
            job.done(result)
        }
    }

    /// Up to `count` queued jobs, now counted busy; nil once the pool is stopping.
    private func take(upTo count: Int) -> [Job]? {
        state.withLock { s in
            if s.stopped { return nil }
            let n = min(count, s.jobs.count - s.head)
            guard n > 0 else { return [] }
            let jobs = Array(s.jobs[s.head..<(s.head + n)])
            s.head += n
            if s.head > 1024 && s.head * 2 > s.jobs.count {
                s.jobs.removeFirst(s.head)
                s.head = 0
            }
            s.busy += n
            return jobs
        }
    }

    /// Many files at once: waits only when no lane is busy, otherwise takes whatever has
    /// been queued into free lanes between rounds.
    private func laneLoop() {
        let dropCacheAbove = FileHasher.defaultDropCacheAbove
        // Made for each burst of work and dropped when every lane is empty: its 1 MiB of
        // buffers goes back to the system while the daemon idles.
        var current: LaneHasher<Job, HashPass>?
        while true {
            if current?.active ?? 0 == 0 {
                current = nil
                wake.wait()
            }
            guard let taken = take(upTo: current?.free ?? LaneHasher<Job, HashPass>.lanes) else {
                let stopped = current?.removeAll() ?? []
                state.withLock { $0.busy -= stopped.count }
                for job in stopped { job.done(.failure(.unreadable("the daemon is stopping"))) }
                return
            }
            guard current != nil || !taken.isEmpty else { continue }
            let engine = current ?? LaneHasher<Job, HashPass>(level: level)
            current = engine
            for job in taken {
                do {
                    engine.add(try HashPass(path: job.path, followSymlinks: job.followSymlinks, sha256: job.sha256,
                                                    dropCacheAbove: dropCacheAbove), tag: job)
                } catch {
                    state.withLock { $0.busy -= 1 }
                    job.done(.failure(error))
                }
            }
            guard engine.active > 0 else { continue }
            for (job, result) in engine.step() {
                if case .success(let digest) = result { hashedBytes.add(digest.identity.size, ordering: .relaxed) }
                state.withLock { $0.busy -= 1 }
                job.done(result)
            }
        }
    }
}

/// One hash's answer, given once: by the thread that read the file, or by the caller's
/// cancellation first (the thread's later answer is then dropped).
private final class Answer: Sendable {
    private struct State: ~Copyable {
        var waiting: (@Sendable (HasherPool.Result) -> Void)?
        var early: HasherPool.Result?
        var given = false
    }

    private let state = Mutex(State())

    /// Holds the caller's completion; false when the answer came first (it is answered with it).
    func wait(_ continuation: @escaping @Sendable (HasherPool.Result) -> Void) -> Bool {
        let early = state.withLock { s -> HasherPool.Result? in
            if let early = s.early { return early }
            s.waiting = continuation
            return nil
        }
        guard let early else { return true }
        continuation(early)
        return false
    }

    func give(_ result: HasherPool.Result) {
        let waiting = state.withLock { s -> (@Sendable (HasherPool.Result) -> Void)? in
            guard !s.given else { return nil }
            s.given = true
            guard let waiting = s.waiting else {
                s.early = result
                return nil
            }
            s.waiting = nil
            return waiting
        }
        waiting?(result)
    }
}
