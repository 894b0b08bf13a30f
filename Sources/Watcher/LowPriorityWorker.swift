#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import PhotolalaCore

/// One long-lived thread at nice 10 that runs scan steps in arrival order. Idle, it blocks
/// in read(2) and costs nothing.
final class LowPriorityWorker: Sendable {
    static let shared = LowPriorityWorker()

    private final class Jobs: Sendable {
        let pending = Mutex<[@Sendable () -> Void]>([])
        func next() -> (@Sendable () -> Void)? { pending.withLock { $0.isEmpty ? nil : $0.removeFirst() } }
    }

    private let jobs = Jobs()
    /// Write end of the wake-up socket; nil when the thread could not be started (out of
    /// descriptors or threads), in which case steps run on the caller: slower, never a crash.
    private let wakeWrite: Int32?

    private init() {
        var fds: [Int32] = [-1, -1]
        // The Glibc module exposes neither eventfd nor pipe2; socketpair sets CLOEXEC atomically.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            wakeWrite = nil
            return
        }
        let (readFd, writeFd) = (fds[0], fds[1])
        _ = fcntl(writeFd, F_SETFL, fcntl(writeFd, F_GETFL) | O_NONBLOCK)
        let jobs = self.jobs
        do {
            try OSThread.detach(name: "photolala-scan", niceness: 10) {
                var buffer = [UInt8](repeating: 0, count: 64)
                while true {
                    if retryingInterrupts({ read(readFd, &buffer, buffer.count) }) <= 0 { return }
                    while let job = jobs.next() { job() }
                }
            }
            wakeWrite = writeFd
        } catch {
            close(readFd)
            close(writeFd)
            wakeWrite = nil
        }
    }

    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await start(body).value
    }

    /// Hands `body` to the thread now; its result waits in the answer until awaited (the
    /// scan's read-ahead: the next batch is listed while the current one is recorded).
    func start<T: Sendable>(_ body: @escaping @Sendable () -> T) -> WorkerResult<T> {
        let result = WorkerResult<T>()
        guard let wakeWrite else {
            result.finish(body())
            return result
        }
        jobs.pending.withLock { $0.append { result.finish(body()) } }
        var byte: UInt8 = 1
        // EAGAIN means wake-ups are already pending; the worker drains every job per wake-up.
        _ = write(wakeWrite, &byte, 1)
        return result
    }
}

/// What a job handed to the scan thread answers: set once by the thread, awaited once by
/// the consumer (through `Blocking.completion`, the one way to await another thread).
final class WorkerResult<T: Sendable>: Sendable {
    private enum State {
        case running
        case finished(T)
        case awaited(@Sendable (T) -> Void)
        case taken
    }
    private let state = Mutex(State.running)

    init() {}

    func finish(_ value: T) {
        let waiter = state.withLock { s -> (@Sendable (T) -> Void)? in
            if case .awaited(let done) = s {
                s = .taken
                return done
            }
            s = .finished(value)
            return nil
        }
        waiter?(value)
    }

    /// The job's result, once it has run. Awaited by one consumer, once.
    var value: T {
        get async {
            await Blocking.completion { done in
                let ready = state.withLock { s -> T? in
                    if case .finished(let value) = s {
                        s = .taken
                        return value
                    }
                    s = .awaited(done)
                    return nil
                }
                if let ready { done(ready) }
            }
        }
    }
}
