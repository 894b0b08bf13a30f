import NIOCore
import NIOPosix
import Synchronization

/// Counts an event loop's task phases (NIO calls `processedTick` after each one), so a
/// request's deadline can tell whether the loop has looked at the sockets since the
/// connection was taken.
///
/// Why it matters (docs/decisions.md, "No uid crowds out another"): NIO makes a taken
/// connection active in a task, and runs every task that is due — timers included —
/// before it polls the sockets again. While a flood keeps that task phase going, a
/// connection's request deadline can come due inside the very phase that made the
/// connection active: the request has been in its socket all along, and the loop never
/// looked. A deadline that fires with the count unchanged is put off until it has.
package final class LoopTicks: NIOEventLoopMetricsDelegate, Sendable {
    private let count = Atomic<UInt64>(0)

    package init() {}

    package func processedTick(info: NIOEventLoopTickInfo) {
        count.add(1, ordering: .relaxed)
    }

    /// Task phases ended so far.
    package var current: UInt64 { count.load(ordering: .relaxed) }
}
