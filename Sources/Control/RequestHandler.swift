#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PhotolalaCore

/// One request per connection: gather it within the limits, authorize, answer, close.
package final class RequestHandler: ChannelInboundHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias OutboundOut = HTTPServerResponsePart

    private let policy: AccessPolicy
    private let handler: any ControlHandler
    private let limits: ControlServer.Limits
    private let connections: ConnectionCounter
    private let refusals: RefusalLog
    private let audit: (any AuditRecorder)?
    /// The loop's task phases (nil on a loop the server does not own: the deadline is then plain).
    private let ticks: LoopTicks?
    private let lanes: MemberLanes
    private let logger: Logger
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var answered = false
    /// Where this connection stands in the uid's counts (nil: not counted, refused at once).
    private var stage: ControlAdmission.Stage?
    private var privileged = false
    private var deadline: Scheduled<Void>?
    private var reservedBytes = 0
    private var peer: PeerCredentials?

    package init(policy: AccessPolicy, handler: any ControlHandler, limits: ControlServer.Limits, connections: ConnectionCounter,
         refusals: RefusalLog, audit: (any AuditRecorder)? = nil, ticks: LoopTicks? = nil, lanes: MemberLanes? = nil, logger: Logger) {
        self.policy = policy
        self.handler = handler
        self.limits = limits
        self.connections = connections
        self.refusals = refusals
        self.audit = audit
        self.ticks = ticks
        self.lanes = lanes ?? MemberLanes(lanes: limits.memberLanes)
        self.logger = logger
    }

    package func channelActive(context: ChannelHandlerContext) {
        // Who it is decides which slots it may take, so the kernel is asked first. On the
        // channel's own event loop the answer is immediate, before any read is delivered.
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        if let provider = context.channel as? SocketOptionProvider {
            let future: EventLoopFuture<KernelPeerCred> = provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
            future.whenComplete { result in
                let (me, context) = loopBound.value
                if case .success(let cred) = result { me.peer = PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid) }
                me.admit(context: context)
            }
        } else {
            admit(context: context)
        }
        context.fireChannelActive()
    }

    private func admit(context: ChannelHandlerContext) {
        guard let peer else {
            respond(context: context, .error(403, "forbidden", "peer credentials unavailable"))
            return
        }
        privileged = policy.isPrivileged(peer)
        if let refusal = connections.connect(uid: peer.uid, privileged: privileged) {
            respond(context: context, .error(503, "busy", refusal.message))
            return
        }
        stage = .startup
        arm(context: context, in: limits.requestDeadline, since: ticks?.current)
    }

    /// The request must be whole by then. A deadline that comes due before the loop has
    /// polled the sockets once since `tick` (the task phase that took the connection) is
    /// the daemon's own backlog, not a slow client: it is put off until the loop has looked.
    private func arm(context: ChannelHandlerContext, in delay: TimeAmount, since tick: UInt64?) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = loopBound.value
            if let tick, let ticks = handler.ticks, ticks.current == tick {
                handler.arm(context: context, in: .milliseconds(50), since: tick)
                return
            }
            handler.respond(context: context, .error(408, "timeout", "request not received in time"))
        }
    }

    package func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        if let stage, let peer { connections.closed(uid: peer.uid, privileged: privileged, stage: stage) }
        stage = nil
        if reservedBytes > 0 { connections.releaseResponse(reservedBytes); reservedBytes = 0 }
        context.fireChannelInactive()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            if let declared = h.headers.first(name: "content-length").flatMap(Int.init), declared > limits.maxBodyBytes {
                respond(context: context, .error(413, "request_too_large", "request body larger than \(limits.maxBodyBytes) bytes"))
            }
        case .body(var chunk):
            if body.count + chunk.readableBytes > limits.maxBodyBytes {
                respond(context: context, .error(413, "request_too_large", "request body larger than \(limits.maxBodyBytes) bytes"))
                return
            }
            body += chunk.readBytes(length: chunk.readableBytes) ?? []
        case .end:
            // One request per connection: nothing more is read.
            HTTPServer.stopReading(context)
            dispatch(context: context)
        }
    }

    package func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Parser errors (garbage, oversized lines) and resets end here: answer if we can, then drop.
        respond(context: context, .error(400, "bad_request", "malformed request"))
    }

    private func dispatch(context: ChannelHandlerContext) {
        guard let head else { return }
        let (path, query) = Self.split(head.uri)
        guard let route = ControlRoute(method: "\(head.method)", path: path) else {
            settle()
            let known = ControlRoute.allCases.contains { $0.path == path }
            respond(context: context, known
                ? .error(405, "method_not_allowed", "\(head.method) is not allowed on \(path)")
                : .error(404, "not_found", "no such call: \(path)"))
            return
        }
        guard let peer else {
            respond(context: context, .error(403, "forbidden", "peer credentials unavailable"))
            return
        }
        guard policy.allows(route.access, peer: peer) else {
            settle()
            let (log, suppressed) = refusals.shouldLog(uid: peer.uid)
            if log {
                var metadata: Logger.Metadata = ["call": "\(route.path)", "uid": "\(peer.uid)"]
                if suppressed > 0 { metadata["not_logged_before"] = "\(suppressed)" }
                logger.notice("refused a control request", metadata: metadata)
                // The trail takes what the journal takes: a caller refused in a loop is
                // counted, not written thousands of times (rotating away what matters).
                var details: AuditDetails = ["call": .string(route.rawValue)]
                if suppressed > 0 { details["notRecordedBefore"] = .int(Int64(suppressed)) }
                audit?.record(AuditEvent(.controlRefused, by: .caller(uid: peer.uid), .refused, details))
            }
            respond(context: context, .error(403, "forbidden", policy.refusal(route.access)))
            return
        }
        if let refusal = connections.request(uid: peer.uid, privileged: privileged) {
            stage = .idle
            respond(context: context, .error(503, "busy", refusal.message))
            return
        }
        stage = .request
        deadline?.cancel()
        answered = true
        let request = ControlRequest(route: route, query: query, body: body, peer: peer, privileged: privileged)
        let handler = self.handler
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let promise = context.eventLoop.makePromise(of: ControlResponse.self)
        // Root's and the daemon's user's calls ahead of the members' on the shared threads, so
        // a member's big listings never keep root's status waiting; a member's calls that
        // read much (listings, manifests) take the lanes in turn by uid (`MemberLanes`),
        // while what is answered from memory (status) does not wait for them.
        let (lanes, uid, privileged) = (self.lanes, peer.uid, self.privileged)
        let queued = !privileged && route.readsMuch
        let (channel, stallTimeout) = (context.channel, limits.streamStallTimeout)
        // The request's one task: it answers, and a streamed answer's producer goes on in
        // it (after `respond` has stopped reading, on the loop), paced by the socket.
        Task(priority: privileged ? .high : .low) {
            let response = queued ? await lanes.run(uid: uid) { await handler.handle(request) } : await handler.handle(request)
            promise.succeed(response)
            guard let stream = response.stream else { return }
            _ = try? await promise.futureResult.get()
            let writer = ControlStreamWriter(channel: channel, stallTimeout: stallTimeout)
            await stream.produce(writer)
            await writer.close()
        }
        promise.futureResult.whenSuccess { response in
            let (me, context) = loopBound.value
            me.answered = false
            me.respond(context: context, response)
        }
    }

    /// The request is whole but will not be answered by the handler: the connection stops
    /// counting as a startup of its uid.
    private func settle() {
        guard stage == .startup, let peer else { return }
        connections.settle(uid: peer.uid, privileged: privileged)
        stage = .idle
    }

    private func respond(context: ChannelHandlerContext, _ response: ControlResponse) {
        guard !answered else { return }
        answered = true
        deadline?.cancel()
        HTTPServer.stopReading(context)
        // A stream is produced by the request's task (`dispatch`) once this has run.
        if response.stream != nil { return }
        var response = response
        if !privileged && response.body.count > 64 * 1024 {
            if connections.tryReserveResponse(response.body.count) {
                reservedBytes = response.body.count
            } else {
                response = .error(503, "busy", "too many large answers waiting to be read; try again")
            }
        }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        HTTPServer.respond(context, status: response.status, contentType: response.contentType, body: response.body,
                           deadline: limits.responseDeadline) {
            let me = bound.value
            if me.reservedBytes > 0 { me.connections.releaseResponse(me.reservedBytes); me.reservedBytes = 0 }
        }
    }

    package static func split(_ uri: String) -> (String, [String: String]) {
        guard let q = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: q)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            let key = kv[0].removingPercentEncoding ?? kv[0]
            query[key] = kv.count > 1 ? (kv[1].removingPercentEncoding ?? kv[1]) : ""
        }
        return (String(uri[..<q]), query)
    }
}

/// The kernel's `struct ucred` (pid_t, uid_t, gid_t); Glibc's module hides it behind _GNU_SOURCE.
struct KernelPeerCred: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
