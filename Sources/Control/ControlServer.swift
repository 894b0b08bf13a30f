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
        public var maxConnections = 256
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
        let connections = ConnectionCounter(limit: limits.maxConnections)
        let bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    let sync = child.pipeline.syncOperations
                    try sync.addHandler(HeaderSizeGuard(limit: limits.maxHeaderBytes))
                    try sync.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
                    try sync.addHandler(RequestHandler(
                        policy: policy, handler: handler, limits: limits, connections: connections, logger: logger))
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

/// Counts live connections so a flood cannot exhaust the daemon's descriptors.
final class ConnectionCounter: Sendable {
    private let state = Mutex(0)
    let limit: Int
    init(limit: Int) {
        self.limit = limit
    }
    func tryAcquire() -> Bool {
        state.withLock { n in
            guard n < limit else { return false }
            n += 1
            return true
        }
    }
    func release() { state.withLock { $0 -= 1 } }
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
    private let logger: Logger
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var answered = false
    private var acquired = false
    private var deadline: Scheduled<Void>?
    private var peer: PeerCredentials?

    init(policy: AccessPolicy, handler: any ControlHandler, limits: ControlServer.Limits, connections: ConnectionCounter, logger: Logger) {
        self.policy = policy
        self.handler = handler
        self.limits = limits
        self.connections = connections
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        guard connections.tryAcquire() else {
            respond(context: context, .error(503, "busy", "too many connections; try again"))
            return
        }
        acquired = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: limits.requestDeadline) {
            let (handler, context) = loopBound.value
            handler.respond(context: context, .error(408, "timeout", "request not received in time"))
        }
        if let provider = context.channel as? SocketOptionProvider {
            let future: EventLoopFuture<KernelPeerCred> = provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
            future.whenSuccess { cred in
                loopBound.value.0.peer = PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid)
            }
        }
        context.fireChannelActive()
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
            dispatch(context: context)
        }
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
            logger.notice("refused a control request", metadata: ["call": "\(route.path)", "uid": "\(peer.uid)"])
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
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: "\(response.body.count)")
        headers.add(name: "Connection", value: "close")
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: response.body.count)
        buffer.writeBytes(response.body)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
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
