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
        await hash(paths: [path], followSymlinks: followSymlinks, sha256: sha256)[0]
    }

    /// Many files in one request, answered together in their order: one wake-up of the
    /// caller for the lot instead of one a file. Small files hash in microseconds, and a
    /// thread hop and an actor hop for each cost more than the read.
    package func hash(paths: [String], followSymlinks: Bool = false, sha256: Bool = false) async -> [Result] {
        guard !paths.isEmpty else { return [] }
        let answer = Answer(count: paths.count)
        return await withTaskCancellationHandler {
            await Blocking.completion { (done: @escaping @Sendable ([Result]) -> Void) in
                guard answer.wait(done) else { return }
                let accepted = state.withLock { s -> Bool in
                    guard !s.stopped else { return false }
                    for (i, path) in paths.enumerated() {
                        s.jobs.append(Job(path: path, followSymlinks: followSymlinks, sha256: sha256, done: { answer.give(i, $0) }))
                    }
                    return true
                }
                if accepted {
                    // One a job: a thread without lanes takes one job a wake-up.
                    for _ in paths { wake.signal() }
                } else {
                    answer.giveAll(.failure(.unreadable("the daemon is stopping")))
                }
            }
        } onCancel: {
            answer.giveAll(.failure(.unreadable("the daemon is stopping")))
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

    /// How long an idle thread keeps its lanes' buffers for the next file.
    static let keepLanes: DispatchTimeInterval = .milliseconds(500)

    /// Many files at once: waits only when no lane is busy, otherwise takes whatever has
    /// been queued into free lanes between rounds.
    private func laneLoop() {
        let dropCacheAbove = FileHasher.defaultDropCacheAbove
        // Made for each burst of work and dropped once every lane has been empty for a
        // while: its 1 MiB of buffers goes back to the system while the daemon idles. Not
        // at once: small files leave the lanes empty between two results many times a
        // second, and a new 1 MiB each time was an mmap, a munmap and 256 page faults.
        var current: LaneHasher<Job, HashPass>?
        while true {
            if current?.active ?? 0 == 0 {
                if current == nil || wake.wait(timeout: .now() + Self.keepLanes) == .timedOut {
                    current = nil
                    wake.wait()
                }
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

/// A request's answers, given once each: by the threads that read the files, or all at
/// once by the caller's cancellation (the threads' later answers are then dropped). The
/// caller is resumed when the last one is in.
private final class Answer: Sendable {
    private struct State: ~Copyable {
        var waiting: (@Sendable ([HasherPool.Result]) -> Void)?
        var results: [HasherPool.Result?]
        var missing: Int
        var complete = false
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(results: Array(repeating: nil, count: count), missing: count))
    }

    /// Holds the caller's completion; false when every answer came first (it is answered with them).
    func wait(_ continuation: @escaping @Sendable ([HasherPool.Result]) -> Void) -> Bool {
        let early = state.withLock { s -> [HasherPool.Result]? in
            if s.complete { return s.results.map { $0! } }
            s.waiting = continuation
            return nil
        }
        guard let early else { return true }
        continuation(early)
        return false
    }

    func give(_ index: Int, _ result: HasherPool.Result) {
        finish { s in
            guard case .none = s.results[index] else { return }
            s.results[index] = result
            s.missing -= 1
        }
    }

    /// Answers every file not answered yet with `result`.
    func giveAll(_ result: HasherPool.Result) {
        finish { s in
            for i in s.results.indices { if case .none = s.results[i] { s.results[i] = result } }
            s.missing = 0
        }
    }

    private func finish(_ update: (inout State) -> Void) {
        let resume = state.withLock { s -> ((@Sendable ([HasherPool.Result]) -> Void), [HasherPool.Result])? in
            guard !s.complete else { return nil }
            update(&s)
            guard s.missing == 0 else { return nil }
            s.complete = true
            guard let waiting = s.waiting else { return nil }
            s.waiting = nil
            return (waiting, s.results.map { $0! })
        }
        if let (waiting, results) = resume { waiting(results) }
    }
}
