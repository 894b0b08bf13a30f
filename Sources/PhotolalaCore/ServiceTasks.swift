/// The work a service's synchronous code starts (a backend call a machine's action asks
/// for, a poll, a wake-up to hand on), run as children of the service's `run()` instead
/// of unstructured tasks: none outlives the service, and its stop cancels them all. Work
/// spawned before `run()` starts waits for it.
package struct ServiceTasks: Sendable {
    package typealias Job = @Sendable () async -> Void

    private let jobs: AsyncStream<Job>
    private let queue: AsyncStream<Job>.Continuation

    package init() {
        (jobs, queue) = AsyncStream.makeStream(of: Job.self)
    }

    /// Runs `job` as a child of `run()`: at once while it runs, queued before.
    package func spawn(_ job: @escaping Job) {
        queue.yield(job)
    }

    /// Runs every job spawned, each as a child task, until the calling task is cancelled,
    /// which cancels the jobs under way too. One caller only: the service's `run()`.
    package func run() async {
        await withDiscardingTaskGroup { group in
            for await job in jobs { group.addTask(operation: job) }
        }
    }
}
