#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The kernel's `struct ucred` (pid_t, uid_t, gid_t); Glibc's module hides it behind _GNU_SOURCE.
struct KernelPeerCred: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// The control socket server: HTTP/1.1, one request per connection, over a Unix socket.
/// Everything about a client is bounded — header and body size, the time to send the
/// request, the number of connections — so a broken or hostile client is answered with
/// an error and dropped without touching anyone else.
public final class ControlServer: Sendable {
    public struct Limits: Sendable {
        public var maxBodyBytes = 64 * 1024
        public var maxHeaderBytes = 16 * 1024
        public var requestDeadline: TimeAmount = .seconds(3)
        /// An answer the client has not taken by then is dropped with its connection: a
        /// client that never reads must not hold a slot, and the answer's memory, for good.
        public var responseDeadline: TimeAmount = .seconds(10)
        public var maxConnections = 256
        /// Connections one unprivileged uid may hold at once. The socket is open to a whole
        /// group: one member's runaway (or hostile) program must not take every slot, or
        /// root's own `photolalactl` gets "too many connections" (the socket suite did).
        public var maxConnectionsPerUser = 16
        /// Of `maxConnections`, slots only root and the daemon's user may take.
        public var reservedForPrivileged = 32
        /// Bytes of answers written but not yet taken by their clients, summed over the
        /// unprivileged ones; past it a new answer is refused with 503. Bounds the memory
        /// that clients asking for big queue listings and never reading them can pin.
        public var maxPendingResponseBytes = 16 << 20
        public init() {}
    }

    public enum StartError: Error, CustomStringConvertible {
        case alreadyRunning(String)
        case cannotBind(String, String)
        public var description: String {
            switch self {
            case let .alreadyRunning(path):
                "another photolalad is already running on \(path) (stop it first: systemctl stop photolalad)"
            case let .cannotBind(path, why):
                "cannot listen on the control socket \(path): \(why)"
            }
        }
    }

    private let channel: Channel
    public let path: String

    private init(channel: Channel, path: String) {
        self.channel = channel
        self.path = path
    }

    /// Binds the socket: a live socket means another daemon (refuse), a stale file is replaced.
    public static func start(
        path: String, group groupName: String, policy: AccessPolicy, handler: any ControlHandler,
        limits: Limits = Limits(), logger: Logger,
        eventLoopGroup: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> ControlServer {
        let dir = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        if FileManager.default.fileExists(atPath: path) {
            if SocketProbe.isLive(path) { throw StartError.alreadyRunning(path) }
            logger.info("replacing a stale control socket", metadata: ["path": "\(path)"])
            unlink(path)
        }
        let connections = ConnectionCounter(limits: limits)
        let refusals = RefusalLog()
        let throttle = AcceptThrottle.State(cap: limits.maxConnections + limits.maxConnections / 2)
        let bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelInitializer { server in
                server.eventLoop.makeCompletedFuture {
                    try server.pipeline.syncOperations.addHandler(AcceptThrottle(state: throttle))
                }
            }
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    let sync = child.pipeline.syncOperations
                    try sync.addHandler(HeaderSizeGuard(limit: limits.maxHeaderBytes))
                    try sync.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
                    try sync.addHandler(RequestHandler(
                        policy: policy, handler: handler, limits: limits, connections: connections,
                        refusals: refusals, logger: logger))
                }
            }
        let channel: Channel
        do {
            // Umask-free creation: bind, then set the mode before anyone is told we are ready.
            channel = try await bootstrap.bind(unixDomainSocketPath: path).get()
        } catch {
            throw StartError.cannotBind(path, "\(error)")
        }
        if let gid = policy.readerGroup {
            chown(path, UInt32.max, gid)
            chmod(path, 0o660)
        } else {
            chmod(path, 0o600)
        }
        return ControlServer(channel: channel, path: path)
    }

    public func stop() async {
        try? await channel.close()
        unlink(path)
    }
}

/// Counts live connections, in total and per uid, so that a flood can exhaust neither the
/// daemon's descriptors nor the slots of other users; and the bytes of answers not yet
/// taken by unprivileged clients.
final class ConnectionCounter: Sendable {
    private struct State {
        var total = 0
        var byUser: [UInt32: Int] = [:]
        var pendingBytes = 0
    }
    private let state = Mutex(State())
    let limits: ControlServer.Limits

    init(limits: ControlServer.Limits) {
        self.limits = limits
    }

    /// Root and the daemon's user may use every slot; anyone else the slots not reserved
    /// for them, and at most `maxConnectionsPerUser` of those.
    func tryAcquire(uid: UInt32, privileged: Bool) -> Bool {
        state.withLock { s in
            if privileged {
                guard s.total < limits.maxConnections else { return false }
            } else {
                guard s.total < limits.maxConnections - limits.reservedForPrivileged,
                      s.byUser[uid, default: 0] < limits.maxConnectionsPerUser else { return false }
                s.byUser[uid, default: 0] += 1
            }
            s.total += 1
            return true
        }
    }

    func release(uid: UInt32, privileged: Bool) {
        state.withLock { s in
            s.total -= 1
            if !privileged {
                let left = s.byUser[uid, default: 1] - 1
                s.byUser[uid] = left > 0 ? left : nil
            }
        }
    }

    func tryReserveResponse(_ bytes: Int) -> Bool {
        state.withLock { s in
            guard s.pendingBytes + bytes <= limits.maxPendingResponseBytes || s.pendingBytes == 0 else { return false }
            s.pendingBytes += bytes
            return true
        }
    }

    func releaseResponse(_ bytes: Int) { state.withLock { $0.pendingBytes -= bytes } }
}

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

/// Refused requests are worth a log line, but a client retrying in a loop must not flood
/// the journal (and rotate away what matters): a few lines per uid a minute, then a count.
final class RefusalLog: Sendable {
    private struct Window {
        var start: NIODeadline
        var logged = 0
        var suppressed = 0
    }
    private let state = Mutex<[UInt32: Window]>([:])
    static let linesPerMinute = 5

    /// Whether to log this refusal, and how many were left out before it.
    func shouldLog(uid: UInt32, now: NIODeadline = .now()) -> (log: Bool, suppressed: Int) {
        state.withLock { windows in
            var w = windows[uid] ?? Window(start: now)
            if now - w.start > .minutes(1) {
                let left = w.suppressed
                w = Window(start: now, logged: 1)
                windows[uid] = w
                if windows.count > 1024 { windows = windows.filter { now - $0.value.start <= .minutes(1) } }
                return (true, left)
            }
            if w.logged < Self.linesPerMinute {
                w.logged += 1
                windows[uid] = w
                return (true, 0)
            }
            w.suppressed += 1
            windows[uid] = w
            return (false, 0)
        }
    }
}

/// Refuses a request whose head grows past the limit before the HTTP parser buffers it.
final class HeaderSizeGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let limit: Int
    private var seen = 0
    private var headEnded = false
    private var tail: [UInt8] = []

    init(limit: Int) { self.limit = limit }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if !headEnded {
            let bytes = buffer.readableBytesView
            // Look for the blank line that ends the head, across reads.
            let window = tail + bytes
            if window.count >= 4 {
                for i in 0...(window.count - 4) where window[i] == 13 && window[i + 1] == 10 && window[i + 2] == 13 && window[i + 3] == 10 {
                    headEnded = true
                    break
                }
            }
            tail = Array(window.suffix(3))
            seen += bytes.count
            if !headEnded && seen > limit {
                let body = Array("{\"error\":\"request_too_large\",\"message\":\"request header too large\",\"ok\":false}".utf8)
                var out = context.channel.allocator.buffer(capacity: 200)
                out.writeString("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n")
                out.writeBytes(body)
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(NIOAny(out)).whenComplete { _ in bound.value.close(promise: nil) }
                seen = Int.min / 2  // swallow everything else
                return
            }
            if seen < 0 { return }
        }
        context.fireChannelRead(data)
    }
}

/// One request per connection: gather it within the limits, authorize, answer, close.
final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let policy: AccessPolicy
    private let handler: any ControlHandler
    private let limits: ControlServer.Limits
    private let connections: ConnectionCounter
    private let refusals: RefusalLog
    private let logger: Logger
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var answered = false
    private var acquired = false
    private var privileged = false
    private var deadline: Scheduled<Void>?
    private var responseDeadline: Scheduled<Void>?
    private var reservedBytes = 0
    private var peer: PeerCredentials?

    init(policy: AccessPolicy, handler: any ControlHandler, limits: ControlServer.Limits, connections: ConnectionCounter,
         refusals: RefusalLog, logger: Logger) {
        self.policy = policy
        self.handler = handler
        self.limits = limits
        self.connections = connections
        self.refusals = refusals
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
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
        guard connections.tryAcquire(uid: peer.uid, privileged: privileged) else {
            respond(context: context, .error(503, "busy", "too many connections; try again"))
            return
        }
        acquired = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: limits.requestDeadline) {
            let (handler, context) = loopBound.value
            handler.respond(context: context, .error(408, "timeout", "request not received in time"))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        responseDeadline?.cancel()
        if acquired, let peer { connections.release(uid: peer.uid, privileged: privileged); acquired = false }
        if reservedBytes > 0 { connections.releaseResponse(reservedBytes); reservedBytes = 0 }
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
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
            // One request per connection: nothing more is read. A client that goes on
            // sending (an endless second request, gigabytes of it) only fills its own
            // socket buffer instead of keeping an event loop busy reading and discarding.
            stopReading(context)
            dispatch(context: context)
        }
    }

    private func stopReading(_ context: ChannelHandlerContext) {
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Parser errors (garbage, oversized lines) and resets end here: answer if we can, then drop.
        respond(context: context, .error(400, "bad_request", "malformed request"))
    }

    private func dispatch(context: ChannelHandlerContext) {
        guard let head else { return }
        let (path, query) = Self.split(head.uri)
        guard let route = ControlRoute(method: "\(head.method)", path: path) else {
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
            let (log, suppressed) = refusals.shouldLog(uid: peer.uid)
            if log {
                var metadata: Logger.Metadata = ["call": "\(route.path)", "uid": "\(peer.uid)"]
                if suppressed > 0 { metadata["not_logged_before"] = "\(suppressed)" }
                logger.notice("refused a control request", metadata: metadata)
            }
            respond(context: context, .error(403, "forbidden", policy.refusal(route.access)))
            return
        }
        deadline?.cancel()
        answered = true
        let request = ControlRequest(route: route, query: query, body: body, peer: peer)
        let handler = self.handler
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let promise = context.eventLoop.makePromise(of: ControlResponse.self)
        promise.completeWithTask { await handler.handle(request) }
        promise.futureResult.whenSuccess { response in
            let (me, context) = loopBound.value
            me.answered = false
            me.respond(context: context, response)
        }
    }

    private func respond(context: ChannelHandlerContext, _ response: ControlResponse) {
        guard !answered else { return }
        answered = true
        deadline?.cancel()
        stopReading(context)
        var response = response
        if !privileged && response.body.count > 64 * 1024 {
            if connections.tryReserveResponse(response.body.count) {
                reservedBytes = response.body.count
            } else {
                response = .error(503, "busy", "too many large answers waiting to be read; try again")
            }
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: "\(response.body.count)")
        headers.add(name: "Connection", value: "close")
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: response.body.count)
        buffer.writeBytes(response.body)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        responseDeadline = context.eventLoop.scheduleTask(in: limits.responseDeadline) {
            bound.value.1.close(promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            let (me, context) = bound.value
            me.responseDeadline?.cancel()
            if me.reservedBytes > 0 { me.connections.releaseResponse(me.reservedBytes); me.reservedBytes = 0 }
            context.close(promise: nil)
        }
    }

    static func split(_ uri: String) -> (String, [String: String]) {
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
