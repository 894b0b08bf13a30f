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
        guard let wakeWrite else { return body() }
        return await Blocking.completion { done in
            jobs.pending.withLock { $0.append { done(body()) } }
            var byte: UInt8 = 1
            // EAGAIN means wake-ups are already pending; the worker drains every job per wake-up.
            _ = write(wakeWrite, &byte, 1)
        }
    }
}
