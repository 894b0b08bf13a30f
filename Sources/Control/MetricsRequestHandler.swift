import NIOCore
import NIOHTTP1
import Synchronization

/// One scrape per connection: `GET /metrics` (or `HEAD`) with no body, answered with the
/// exposition and closed. Everything else is refused with a one-line text answer.
final class MetricsRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let path = "/metrics"
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private let limits: MetricsListener.Limits
    private let connections: MetricsConnections
    private let render: @Sendable () async -> [UInt8]
    private var head: HTTPRequestHead?
    private var acquired = false
    private var answered = false
    private var deadline: Scheduled<Void>?

    init(limits: MetricsListener.Limits, connections: MetricsConnections, render: @escaping @Sendable () async -> [UInt8]) {
        self.limits = limits
        self.connections = connections
        self.render = render
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        guard connections.tryAcquire() else {
            respond(context: context, 503, "too many connections; try again")
            return
        }
        acquired = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: limits.requestDeadline) {
            let (me, context) = bound.value
            me.respond(context: context, 408, "request not received in time")
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        if acquired { connections.release(); acquired = false }
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            let declared = h.headers.first(name: "content-length").flatMap(Int.init) ?? 0
            if declared > 0 || h.headers.contains(name: "transfer-encoding") {
                respond(context: context, 413, "a scrape has no body")
            }
        case .body:
            respond(context: context, 413, "a scrape has no body")
        case .end:
            // One request per connection: nothing more is read.
            HTTPServer.stopReading(context)
            dispatch(context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        respond(context: context, 400, "malformed request")
    }

    private func dispatch(context: ChannelHandlerContext) {
        guard let head else { return }
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard path == Self.path else {
            respond(context: context, 404, "only \(Self.path) is served here")
            return
        }
        guard head.method == .GET || head.method == .HEAD else {
            respond(context: context, 405, "\(head.method) is not allowed on \(Self.path)")
            return
        }
        deadline?.cancel()
        answered = true
        let render = self.render
        let headOnly = head.method == .HEAD
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let promise = context.eventLoop.makePromise(of: [UInt8].self)
        promise.completeWithTask { await render() }
        promise.futureResult.whenSuccess { body in
            let (me, context) = bound.value
            me.answered = false
            me.write(context: context, 200, contentType: Self.contentType, body: body, headOnly: headOnly)
        }
    }

    private func respond(context: ChannelHandlerContext, _ status: Int, _ message: String) {
        write(context: context, status, contentType: "text/plain; charset=utf-8", body: Array((message + "\n").utf8), headOnly: false)
    }

    private func write(context: ChannelHandlerContext, _ status: Int, contentType: String, body: [UInt8], headOnly: Bool) {
        guard !answered else { return }
        answered = true
        deadline?.cancel()
        HTTPServer.respond(context, status: status, contentType: contentType, body: body, headOnly: headOnly,
                           deadline: limits.responseDeadline)
    }
}

/// Connections the metrics listener is answering: past the cap a new one is answered
/// 503 at once, before anything is rendered for it.
package final class MetricsConnections: Sendable {
    private let open = Mutex(0)
    let cap: Int

    init(cap: Int) { self.cap = cap }

    func tryAcquire() -> Bool {
        open.withLock { n in
            guard n < cap else { return false }
            n += 1
            return true
        }
    }

    func release() { open.withLock { $0 -= 1 } }

    /// Connections held now (tests wait on it instead of guessing a delay).
    package var count: Int { open.withLock { $0 } }
}
