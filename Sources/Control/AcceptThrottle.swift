import NIOCore
import Synchronization

/// Stops accepting while too many connections are open (accepted, not yet closed). A
/// connection refused with 503 still costs a descriptor until that answer is written, and
/// a flood of them (the socket suite opened thousands a second) outran the closing: over
/// 500 descriptors, where systemd's default soft limit is 1024 for the whole daemon —
/// the hasher, the database and S3 would be the next to be refused one. Paused, the flood
/// waits in the kernel's backlog instead, costing the daemon nothing.
final class AcceptThrottle: ChannelInboundHandler {
    typealias InboundIn = Channel
    typealias InboundOut = Channel

    final class State: Sendable {
        private struct Counts {
            var open = 0
            var paused = false
        }
        private let counts = Mutex(Counts())
        let cap: Int
        init(cap: Int) { self.cap = cap }

        /// Counts one more; true when accepting must pause now.
        func opened() -> Bool {
            counts.withLock { c in
                c.open += 1
                guard c.open >= cap, !c.paused else { return false }
                c.paused = true
                return true
            }
        }

        /// Counts one less; true when accepting may resume now.
        func closed() -> Bool {
            counts.withLock { c in
                c.open -= 1
                guard c.paused, c.open <= cap * 3 / 4 else { return false }
                c.paused = false
                return true
            }
        }

        var paused: Bool { counts.withLock { $0.paused } }
    }

    /// Applied on the server's own event loop from the state as it is then: pauses and
    /// resumes decided on different threads cannot land out of order and leave the
    /// socket not accepting for good.
    static func apply(_ state: State, to server: Channel) {
        server.eventLoop.execute {
            server.setOption(ChannelOptions.autoRead, value: !state.paused).whenFailure { _ in }
        }
    }

    let state: State
    init(state: State) { self.state = state }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = unwrapInboundIn(data)
        let server = context.channel
        let state = self.state
        child.closeFuture.whenComplete { _ in
            if state.closed() { Self.apply(state, to: server) }
        }
        if state.opened() { Self.apply(state, to: server) }
        context.fireChannelRead(data)
    }
}
