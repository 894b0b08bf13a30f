import Control
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// One request per connection, bounded like the control socket's: a small head (the
/// server's guard), few headers, no body to speak of, 5 s to send it all, 10 s to take
/// the answer; a server-sent event stream is the one answer that stays open, and is
/// dropped when its reader stops reading. Every answer carries the page's security headers.
final class WebRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let securityHeaders: [(String, String)] = [
        ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Content-Type-Options", "nosniff"),
    ]
    static var headerLines: [String] { securityHeaders.map { "\($0.0): \($0.1)" } }

    private let limits: WebServer.Limits
    private let connections: WebConnections
    private let holder: APIHolder
    private var head: HTTPRequestHead?
    private var bodyBytes = 0
    private var answered = false
    private var remote = "unknown"
    private var acquired = false
    private var streaming = false
    private var deadline: Scheduled<Void>?

    init(limits: WebServer.Limits, connections: WebConnections, holder: APIHolder) {
        self.limits = limits
        self.connections = connections
        self.holder = holder
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        remote = context.channel.remoteAddress?.ipAddress ?? "unknown"
        guard connections.tryAcquire(remote: remote) else {
            respond(context: context, .text(503, "Too many connections; try again in a moment."))
            return
        }
        acquired = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: limits.requestDeadline) {
            let (me, context) = bound.value
            me.respond(context: context, .text(408, "The request was not received in time."))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        if acquired { connections.release(remote: remote, stream: streaming); acquired = false }
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            if h.headers.count > limits.maxHeaderCount {
                respond(context: context, .text(431, "Too many request headers."))
                return
            }
            let declared = h.headers.first(name: "content-length").flatMap(Int.init) ?? 0
            if declared > limits.maxBodyBytes || h.headers.contains(name: "transfer-encoding") {
                respond(context: context, .text(413, "The page's requests carry no body."))
            }
        case .body(let chunk):
            bodyBytes += chunk.readableBytes
            if bodyBytes > limits.maxBodyBytes { respond(context: context, .text(413, "The page's requests carry no body.")) }
        case .end:
            HTTPServer.stopReading(context)
            dispatch(context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        respond(context: context, .text(400, "Malformed request."))
    }

    private func dispatch(context: ChannelHandlerContext) {
        guard let head else { return }
        guard let api = holder.api else {
            respond(context: context, .text(503, "Starting; try again in a moment."))
            return
        }
        deadline?.cancel()
        answered = true
        let (path, query) = RequestSplit.split(head.uri)
        let request = WebRequest(method: "\(head.method)", path: path, query: query, host: head.headers.first(name: "host"),
                                 cookie: head.headers[canonicalForm: "cookie"].joined(separator: "; "),
                                 csrf: head.headers.first(name: "x-csrf-token"), origin: head.headers.first(name: "origin"),
                                 remote: remote)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let loop = context.eventLoop
        let promise = loop.makePromise(of: WebAnswer.self)
        // Whether the event stream's head went out (false: refused, or not an event stream).
        let started = loop.makePromise(of: Bool.self)
        let channel = context.channel
        // The request's one task: it answers, and an event stream goes on in it, ended by
        // its connection's close (`stream`).
        let done = loop.makePromise(of: Void.self)
        let task = done.completeWithTask {
            let answer = await api.answer(request)
            promise.succeed(answer)
            guard case .events(let session) = answer, (try? await started.futureResult.get()) == true else { return }
            await Self.send(api: api, session: session, to: channel)
        }
        promise.futureResult.whenSuccess { answer in
            let (me, context) = bound.value
            switch answer {
            case .response(let response):
                started.succeed(false)
                me.answered = false
                me.respond(context: context, response, headOnly: head.method == .HEAD)
            case .events:
                started.succeed(me.stream(context: context, task: task))
            }
        }
    }

    private func respond(context: ChannelHandlerContext, _ response: WebResponse, headOnly: Bool = false) {
        guard !answered else { return }
        answered = true
        deadline?.cancel()
        HTTPServer.respond(context, status: response.status, contentType: response.contentType, body: response.body, headOnly: headOnly,
                           extraHeaders: Self.headers(response.headers), deadline: limits.responseDeadline)
    }

    static func headers(_ extra: [String: String]) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for (name, value) in securityHeaders { headers.add(name: name, value: value) }
        for (name, value) in extra.sorted(by: { $0.key < $1.key }) { headers.add(name: name, value: value) }
        return headers
    }

    // MARK: - Server-sent events

    /// Sends `event: status` whenever the shared feed has a new status (at most one a
    /// second), a comment every `keepAlive` so a vanished reader is noticed, and drops a
    /// reader that has not taken what was sent by the next keep-alive.
    private func stream(context: ChannelHandlerContext, task: Task<Void, Never>) -> Bool {
        guard connections.tryStream(remote: remote) else {
            answered = false
            respond(context: context, .text(503, "Too many pages are following the status from here; close one."))
            return false
        }
        streaming = true
        var headers = Self.headers(["Cache-Control": "no-store"])
        headers.add(name: "Content-Type", value: "text/event-stream; charset=utf-8")
        headers.add(name: "Connection", value: "close")
        let channel = context.channel
        _ = channel.setOption(ChannelOptions.writeBufferWaterMark, value: .init(low: 32 << 10, high: 256 << 10))
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                              promise: nil)
        let stalled = NIOLoopBoundBox(false, eventLoop: context.eventLoop)
        let keepAlive = context.eventLoop.scheduleRepeatedTask(initialDelay: limits.keepAlive, delay: limits.keepAlive) { _ in
            if !channel.isWritable {
                if stalled.value { channel.close(promise: nil) }
                stalled.value = true
                return
            }
            stalled.value = false
            var buffer = channel.allocator.buffer(capacity: 4)
            buffer.writeString(":\n\n")
            channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(buffer)), promise: nil)
        }
        channel.closeFuture.whenComplete { _ in
            task.cancel()
            keepAlive.cancel()
        }
        return true
    }

    /// The event stream's statuses, in the request's task until the connection closes.
    private static func send(api: WebAPI, session: String?, to channel: any Channel) async {
        let (_, updates) = await api.feed.subscribe()
        for await snapshot in updates {
            var body = snapshot.publicJSON
            if let session {
                // A revoked session's page gets the plain status from here on.
                guard await api.sessions.session(token: session) != nil else { break }
                body = snapshot.full
            }
            var buffer = channel.allocator.buffer(capacity: body.count + 24)
            buffer.writeString("event: status\ndata: ")
            buffer.writeBytes(body)
            buffer.writeString("\n\n")
            // A reader that does not keep up misses statuses, never piles them up.
            guard channel.isWritable else { continue }
            channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(buffer)), promise: nil)
        }
        channel.close(promise: nil)
    }
}

/// Connections the page's server holds: in all, from one address, and event streams.
/// Past a cap the answer is 503 at once (and past the server's accept cap the kernel's
/// backlog holds the rest), so one browser or one flood cannot take every slot.
final class WebConnections: Sendable {
    private struct Counts {
        var total = 0
        var byRemote: [String: Int] = [:]
        var streams = 0
        var streamsByRemote: [String: Int] = [:]
    }
    private let counts = Mutex(Counts())
    let limits: WebServer.Limits

    init(limits: WebServer.Limits) { self.limits = limits }

    func tryAcquire(remote: String) -> Bool {
        counts.withLock { c in
            guard c.total < limits.maxConnections, c.byRemote[remote, default: 0] < limits.maxConnectionsPerRemote else { return false }
            c.total += 1
            c.byRemote[remote, default: 0] += 1
            return true
        }
    }

    func tryStream(remote: String) -> Bool {
        counts.withLock { c in
            guard c.streams < limits.maxStreams, c.streamsByRemote[remote, default: 0] < limits.maxStreamsPerRemote else { return false }
            c.streams += 1
            c.streamsByRemote[remote, default: 0] += 1
            return true
        }
    }

    func release(remote: String, stream: Bool) {
        counts.withLock { c in
            c.total -= 1
            let left = c.byRemote[remote, default: 1] - 1
            c.byRemote[remote] = left > 0 ? left : nil
            if stream {
                c.streams -= 1
                let s = c.streamsByRemote[remote, default: 1] - 1
                c.streamsByRemote[remote] = s > 0 ? s : nil
            }
        }
    }

    var open: Int { counts.withLock { $0.total } }
}

/// `path?query` → the path and the decoded query.
enum RequestSplit {
    static func split(_ uri: String) -> (String, [String: String]) {
        guard let q = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: q)...].split(separator: "&").prefix(16) {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            let key = kv[0].removingPercentEncoding ?? kv[0]
            query[key] = kv.count > 1 ? (kv[1].removingPercentEncoding ?? kv[1]) : ""
        }
        return (String(uri[..<q]), query)
    }
}
