#if canImport(Glibc)
import Glibc
#endif
import CPreviews
import PhotolalaCore

/// The daemon's handle on one running preview worker: the process and the daemon's end of
/// their socket pair. Blocking calls; `PreviewWorkerSlot` runs them off the cooperative pool
/// and uses one at a time.
final class WorkerProcess: @unchecked Sendable {
    let pid: pid_t
    private let socket: Int32
    private let cpuSecondsPerPhoto: Int32
    private var frames = WorkerMessage.FrameReader()
    private var exited = false

    enum Failure: Error, Equatable {
        /// The worker died or was killed (the reason in words); that photo gets no preview.
        case died(String)
        /// No answer in time: the worker was killed.
        case timedOut
        /// It answered something that is not a reply: treated like a crash.
        case garbled(String)
    }

    /// Starts `executable` as a worker and waits for it to say it is sandboxed and ready.
    static func start(executable: String, limits: PreviewLimits, timeout: Duration) throws(Failure) -> WorkerProcess {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw .died("cannot make a socket pair: \(String(cString: strerror(errno)))")
        }
        let arguments = ["photolalad", PreviewWorker.subcommand] + limits.arguments
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = photolala_spawn(executable, &argv, pair[1], &pid)
        close(pair[1])
        guard rc == 0 else {
            close(pair[0])
            throw .died("cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        let process = WorkerProcess(pid: pid, socket: pair[0], cpuSecondsPerPhoto: limits.cpuSecondsPerPhoto)
        let hello = try process.receive(timeout: timeout)
        if let why = hello.failure {
            process.stop()
            throw .died(why)
        }
        return process
    }

    private init(pid: pid_t, socket: Int32, cpuSecondsPerPhoto: Int32) {
        self.pid = pid
        self.socket = socket
        self.cpuSecondsPerPhoto = cpuSecondsPerPhoto
    }

    deinit { stop() }

    /// Hands the worker `fd` (the daemon keeps its own copy) and waits for its reply.
    func exchange(_ request: WorkerMessage.Request, fd: Int32, timeout: Duration) throws(Failure) -> WorkerMessage.Reply {
        // Should the limit not take (it always does for our own child), the wall-clock
        // timeout still ends a photo that spins.
        _ = photolala_cpu_budget(pid, cpuSecondsPerPhoto)
        let frame = WorkerMessage.frame(WorkerMessage.encode(request))
        var sent = 0
        while sent < frame.count {
            let n = frame.withUnsafeBytes { raw in
                photolala_send_with_fd(socket, raw.baseAddress! + sent, raw.count - sent, sent == 0 ? fd : -1)
            }
            guard n > 0 else { throw reap() }
            sent += n
        }
        return try receive(timeout: timeout)
    }

    private func receive(timeout: Duration) throws(Failure) -> WorkerMessage.Reply {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            do {
                if let body = try frames.next() { return try WorkerMessage.decodeReply(body) }
            } catch {
                stop()
                throw .garbled("\(error)")
            }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else {
                stop()
                throw .timedOut
            }
            var p = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ms = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = retryingInterrupts { poll(&p, 1, ms) }
            if ready <= 0 { continue }
            let n = retryingInterrupts { buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) } }
            guard n > 0 else { throw reap() }
            frames.append(buffer[0..<n])
        }
    }

    /// The worker closed its end: wait for it and say how it ended.
    private func reap() -> Failure {
        var status: Int32 = 0
        var rc: pid_t = 0
        // It is exiting; give it a moment before killing it.
        for _ in 0..<200 {
            rc = waitpid(pid, &status, WNOHANG)
            if rc != 0 { break }
            usleep(10_000)
        }
        if rc == 0 {
            kill(pid, SIGKILL)
            rc = waitpid(pid, &status, 0)
        }
        exited = true
        close(socket)
        return .died(Self.describe(status: status))
    }

    /// Kills the worker from another thread than the one waiting for its reply: that one
    /// then sees the end of the stream and reaps it.
    func interrupt() {
        if !exited { kill(pid, SIGKILL) }
    }

    /// Kills the worker (if still running) and reaps it.
    func stop() {
        guard !exited else { return }
        exited = true
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = retryingInterrupts { waitpid(pid, &status, 0) }
        close(socket)
    }

    static func describe(status: Int32) -> String {
        let signal = status & 0x7F
        if signal == 0 { return "the decoder exited with status \((status >> 8) & 0xFF)" }
        switch signal {
        case SIGXCPU: return "the decoder used up its CPU time"
        case SIGSEGV, SIGBUS: return "the decoder crashed (\(signal == SIGSEGV ? "SIGSEGV" : "SIGBUS"))"
        case SIGSYS: return "the decoder was stopped by its sandbox"
        case SIGKILL: return "the decoder was killed"
        case SIGABRT, SIGTRAP, SIGILL: return "the decoder crashed (signal \(signal)), perhaps out of memory"
        default: return "the decoder crashed (signal \(signal))"
        }
    }
}
