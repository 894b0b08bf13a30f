import Foundation
import ServiceLifecycle

/// The one loop every stage runs: a step, then wait for any of the stage's wake sources
/// or the deadline the step returned, until the task is cancelled or the service group
/// shuts down gracefully (which cancels the step under way: every stage resumes from the
/// queue, so an upload, a listing or a publish cut off is done again at the next start).
///
/// Structured: the wake sources are relayed by child tasks of one task group, the
/// workers are children too, and nothing outlives `run`.
package struct StageLoop: Sendable {
    /// What a step answers: when to look again.
    package enum Next: Sendable, Equatable {
        /// At once (more work is waiting).
        case now
        /// After a wake, or at the date (nil: a wake only).
        case wait(until: Date?)

        /// After a wake only.
        package static let wake = Next.wait(until: nil)
    }

    /// Something that wakes the stage.
    package enum Source: Sendable {
        /// A queue signal (rows entered the state this stage takes), or any other feed.
        case signal(ChangeFeed)
        /// A stream of changes (the gate, the account); subscribe before `run`.
        case stream(AsyncStream<Void>)
    }

    private let clock: any DaemonClock
    private let sources: [Source]
    /// Where every source is folded in; the stage's own `wake()` too.
    private let signal = ChangeFeed()

    /// - Parameters:
    ///   - clock: what deadlines are waited on.
    ///   - wakes: what makes the stage look again before its deadline.
    package init(clock: any DaemonClock, wakes: [Source] = []) {
        self.clock = clock
        self.sources = wakes
    }

    /// Makes every worker look again now (a reload, a request from the control socket,
    /// work the stage gave itself). Never waits.
    package func wake() {
        signal.changed()
    }

    /// Runs `step` in `workers` concurrent loops until cancelled or shut down gracefully.
    /// A wake that arrives while a step runs is not lost: the step's wait returns at once.
    package func run(workers: Int = 1, _ step: @escaping @Sendable (_ worker: Int) async -> Next) async {
        let signal = self.signal
        let clock = self.clock
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                _ = try? await cancelWhenGracefulShutdown {
                    await withTaskGroup(of: Void.self) { loops in
                        for worker in 0..<max(1, workers) {
                            loops.addTask { await Self.loop(worker, signal: signal, clock: clock, step: step) }
                        }
                    }
                }
                return true
            }
            for source in sources {
                group.addTask {
                    let stream = switch source {
                    case .signal(let other): other.changes()
                    case .stream(let stream): stream
                    }
                    for await _ in stream { signal.changed() }
                    return false
                }
            }
            // The loops ended (a stop): the relays go too.
            while let loopsEnded = await group.next() {
                if loopsEnded { group.cancelAll() }
            }
        }
    }

    private static func loop(_ worker: Int, signal: ChangeFeed, clock: any DaemonClock,
                             step: @Sendable (Int) async -> Next) async {
        while !Task.isCancelled {
            let since = signal.generation
            let next = await step(worker)
            guard !Task.isCancelled else { return }
            switch next {
            case .now:
                await Task.yield()
            case .wait(let until):
                await wait(signal: signal, since: since, until: until, clock: clock)
            }
        }
    }

    /// Returns after a wake later than `since`, at `deadline`, or on cancellation.
    private static func wait(signal: ChangeFeed, since: Int, until deadline: Date?, clock: any DaemonClock) async {
        guard let deadline else {
            return await signal.wait(since: since)
        }
        guard deadline > clock.now() else { return await Task.yield() }
        await withTaskGroup(of: Void.self) { race in
            race.addTask { await signal.wait(since: since) }
            race.addTask { try? await clock.sleep(until: deadline) }
            await race.next()
            race.cancelAll()
        }
    }
}
