#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CMultiMD5
import Foundation
import Synchronization

/// The MD5 (and SHA-256) of a file the caller holds open.
package struct OpenFileDigests: Sendable, Equatable {
    package var md5: [UInt8]
    package var sha256: [UInt8]?

    package init(md5: [UInt8], sha256: [UInt8]?) {
        self.md5 = md5
        self.sha256 = sha256
    }
}

/// Hashes files their callers hold open (a restore's temporary files, once written) on one
/// thread, up to 16 at once in SIMD lanes, as `HasherPool` does for a scan: one MD5 stream
/// costs a core 566 MB/s here, and a restore of 2.6 GB spent 4.6 CPU-seconds on it on 2
/// cores (docs/benchmarks.md). Lanes pay only when many are full, and files arrive one by
/// one as they finish downloading: while fewer than `gather` lanes are busy the thread
/// waits up to `patience` for another file before going on with what it has. Callers
/// submit and go on (`done` is called on this thread), or await `digests`; nothing here
/// blocks them.
package final class OpenFileLanes: Sendable {
    package typealias Result = Swift.Result<OpenFileDigests, FileHasher.Failure>

    private struct Job: Sendable {
        var fd: Int32
        var size: Int64
        var sha256: Bool
        var done: @Sendable (Result) -> Void
    }

    private struct State: ~Copyable {
        var jobs: [Job] = []
        var stopped = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let exited = DispatchSemaphore(value: 0)
    package let level: Int32
    package let gather: Int
    package let patience: Double

    /// `level`: CMultiMD5's, the best this CPU runs unless a test asks for another.
    package init(level: Int32? = nil, gather: Int = 8, patience: Double = 0.05) {
        self.level = level ?? pl_md5_lanes_best_level()
        self.gather = max(1, min(gather, LaneHasher<Void, OpenFilePass>.lanes))
        self.patience = patience
        let thread = Thread { [self] in
            photolala_name_this_thread("photolala-verify")
            self.loop()
            self.exited.signal()
        }
        thread.stackSize = 512 << 10
        thread.start()
    }

    /// Hashes `size` bytes of `fd` from its start (the caller keeps it open until `done`).
    /// A file shorter or longer than `size` is `.changed`.
    package func submit(fd: Int32, size: Int64, sha256: Bool, done: @escaping @Sendable (Result) -> Void) {
        let accepted = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.jobs.append(Job(fd: fd, size: size, sha256: sha256, done: done))
            return true
        }
        if accepted { wake.signal() } else { done(.failure(.unreadable("the restore is stopping"))) }
    }

    /// `submit`, awaited: the file's digests once the lanes have read it back (the caller
    /// keeps `fd` open until then). The task holds no thread while it waits.
    package func digests(fd: Int32, size: Int64, sha256: Bool) async -> Result {
        await withCheckedContinuation { done in
            submit(fd: fd, size: size, sha256: sha256) { done.resume(returning: $0) }
        }
    }

    /// Stops the thread once it has answered every file submitted before; later ones are refused.
    package func shutdown() {
        let first = state.withLock { s -> Bool in
            defer { s.stopped = true }
            return !s.stopped
        }
        guard first else { return }
        wake.signal()
        exited.wait()
    }

    private func take(upTo n: Int) -> (jobs: [Job], stopped: Bool) {
        state.withLock { s in
            let jobs = Array(s.jobs.prefix(n))
            s.jobs.removeFirst(jobs.count)
            return (jobs, s.stopped)
        }
    }

    private func loop() {
        let engine = LaneHasher<Job, OpenFilePass>(level: level)
        // Set when waiting for more files timed out: go on stepping with the lanes as they
        // are (new files still join between rounds) until they are full enough again.
        var draining = false
        while true {
            let (jobs, stopped) = take(upTo: engine.free)
            for job in jobs {
                engine.add(OpenFilePass(fd: job.fd, size: job.size, sha256: job.sha256), tag: job)
            }
            if engine.active == 0 {
                if stopped && state.withLock({ $0.jobs.isEmpty }) { return }
                draining = false
                wake.wait()
                continue
            }
            if engine.active >= gather { draining = false }
            if !draining && !stopped && engine.active < gather {
                // A file arriving restarts the count; `gather` arrivals fill the lanes, so this ends.
                if wake.wait(timeout: .now() + patience) == .success { continue }
                draining = true
            }
            for (job, result) in engine.step() { job.done(result) }
        }
    }
}

/// One open file read back with `pread` from its start, the SHA-256 taken on the way when
/// asked: never past `size` (a longer file is `.changed` at the end), nor short of it.
final class OpenFilePass: LaneSource {
    private let fd: Int32
    private let size: Int64
    private(set) var offset: Int64 = 0
    private var sha = SHA256()
    private let wantSHA: Bool

    init(fd: Int32, size: Int64, sha256: Bool) {
        self.fd = fd
        self.size = size
        wantSHA = sha256
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(FileHasher.Failure) -> Int {
        let want = Int(min(Int64(buffer.count), size - offset))
        guard want > 0 else { return 0 }
        var n: Int
        repeat {
            n = pread(fd, buffer.baseAddress, want, off_t(offset))
        } while n < 0 && errno == EINTR
        guard n >= 0 else { throw .unreadable("cannot read the file back: \(String(cString: strerror(errno)))") }
        guard n > 0 else { throw .changed }
        if wantSHA { sha.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
        offset += Int64(n)
        return n
    }

    func finish(md5: [UInt8]) throws(FileHasher.Failure) -> OpenFileDigests {
        var more: UInt8 = 0
        guard pread(fd, &more, 1, off_t(size)) == 0 else { throw .changed }
        return OpenFileDigests(md5: md5, sha256: wantSHA ? sha.finalize() : nil)
    }
}
