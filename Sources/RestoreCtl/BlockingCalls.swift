import NIOPosix

/// The command's blocking calls, on threads of their own: the control socket
/// (`ControlClient` waits in read(2) for the daemon's bytes), writing a file, its
/// `fdatasync` and rename, the folders walked with `openat2`. The tasks of a restore await
/// them, so none holds a thread of the cooperative pool (two on a 2-core NAS) while the
/// kernel or the daemon makes it wait, and ten downloads go on at once as ten did on the
/// threads they replace. One pool a run, as many threads as it has calls in flight at
/// most (its workers, and two for the reports and the archive's questions), started with
/// the run and stopped at its end: NIO's `NIOThreadPool`, whose threads are made for
/// blocking work.
struct BlockingCalls: Sendable {
    private let pool: NIOThreadPool

    private init(pool: NIOThreadPool) {
        self.pool = pool
    }

    /// Runs `body` with a pool of `threads` threads, stopped once it returns.
    static func with<T: Sendable, E: Error>(threads: Int, _ body: (BlockingCalls) async throws(E) -> T) async throws(E) -> T {
        let pool = NIOThreadPool(numberOfThreads: max(1, threads))
        pool.start()
        let result: Result<T, E>
        do throws(E) {
            result = .success(try await body(BlockingCalls(pool: pool)))
        } catch {
            result = .failure(error)
        }
        try? await pool.shutdownGracefully()
        return try result.get()
    }

    /// `work` on a thread of the pool; nil when it did not run (the task was cancelled
    /// before a thread took it).
    func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T? {
        try? await pool.runIfActive(work)
    }

    /// `work` on a thread of the pool, its failure thrown here.
    func call<T: Sendable>(_ work: @escaping @Sendable () throws(RestoreRun.Stop) -> T) async throws(RestoreRun.Stop) -> T {
        guard let result = await run({ Result { () throws(RestoreRun.Stop) in try work() } }) else {
            throw .plan("the command was stopped before it finished; run it again")
        }
        return try result.get()
    }
}
