#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The daemon's one HTTP/1.1 server shape, serving the control socket and the metrics
/// port: one request per connection, everything about a client bounded. The request head
/// may not grow past a limit (refused 431 before the parser buffers it), accepting pauses
/// while too many connections are open (the rest wait in the kernel's backlog), and an
/// answer a client does not take is dropped with its connection. What differs between
/// the two (who may connect, the routes, the error bodies) is the handler each connection
/// gets; `respond` writes every answer the same way.
package final class HTTPServer: Sendable {
    package enum Address: Sendable, Equatable, CustomStringConvertible {
        case unix(path: String)
        case tcp(host: String, port: Int)

        package var description: String {
            switch self {
            case .unix(let path): path
            case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            }
        }
    }

    /// What every connection shares, whoever serves it.
    package struct Limits: Sendable {
        package var maxHeaderBytes: Int
        /// Connections open at once before accepting pauses (a flood waits in the backlog).
        package var acceptCap: Int
        package var backlog: Int
        /// `Name: value` lines every answer carries, the ones written before any handler
        /// (a head too large) included: the status page's security headers (web.md).
        package var headerLines: [String] = []
        /// Connections accepted each time the listening socket is read (NIO's default: 4).
        package var acceptBatch: UInt = 4

        package init(maxHeaderBytes: Int, acceptCap: Int, backlog: Int, headerLines: [String] = [], acceptBatch: Int = 4) {
            self.maxHeaderBytes = maxHeaderBytes
            self.acceptCap = acceptCap
            self.backlog = backlog
            self.headerLines = headerLines
            self.acceptBatch = UInt(max(1, acceptBatch))
        }
    }

    private let channel: Channel
    package let address: Address
    /// The port bound (the one asked for, or the kernel's choice for port 0), as bound:
    /// it stays readable after `stop()`. Nil on a socket file.
    package let port: Int?

    private init(channel: Channel, address: Address) {
        self.channel = channel
        self.address = address
        if case .tcp(_, let asked) = address { port = channel.localAddress?.port ?? asked } else { port = nil }
    }

    /// Binds `address`; each accepted connection gets the head guard, the HTTP codec and
    /// the handler `connection` makes for it (on its event loop).
    /// `secure` adds what comes before the HTTP codec on each connection (the status page's
    /// TLS handler), so the head guard and the parser see the plaintext.
    package static func start(
        on address: Address, limits: Limits, eventLoopGroup: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        secure: (@Sendable (ChannelPipeline.SynchronousOperations) throws -> Void)? = nil,
        connection: @escaping @Sendable () -> any ChannelInboundHandler
    ) async throws -> HTTPServer {
        let throttle = AcceptThrottle.State(cap: limits.acceptCap)
        var bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.backlog, value: Int32(limits.backlog))
            .serverChannelOption(.maxMessagesPerRead, value: limits.acceptBatch)
        if case .tcp = address {
            bootstrap = bootstrap.serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        }
        bootstrap = bootstrap
            .serverChannelInitializer { server in
                server.eventLoop.makeCompletedFuture {
                    try server.pipeline.syncOperations.addHandler(AcceptThrottle(state: throttle))
                }
            }
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    let sync = child.pipeline.syncOperations
                    try secure?(sync)
                    try sync.addHandler(HeaderSizeGuard(limit: limits.maxHeaderBytes, headerLines: limits.headerLines))
                    try sync.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
                    try sync.addHandler(connection())
                }
            }
        let channel = switch address {
        case .unix(let path): try await bootstrap.bind(unixDomainSocketPath: path).get()
        case .tcp(let host, let port): try await bootstrap.bind(host: host, port: port).get()
        }
        return HTTPServer(channel: channel, address: address)
    }

    package func stop() async {
        try? await channel.close()
    }

    /// Stops reading the connection: one request per connection, so a client that goes on
    /// sending (an endless second request, gigabytes of it) only fills its own socket
    /// buffer instead of keeping an event loop busy reading and discarding.
    package static func stopReading(_ context: ChannelHandlerContext) {
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
    }

    /// Writes one answer and closes the connection once the client has taken it, or after
    /// `deadline` if it does not: a client that never reads must not hold a slot, and the
    /// answer's memory, for good. `taken` runs on the event loop when the write completes.
    package static func respond(_ context: ChannelHandlerContext, status: Int, contentType: String, body: [UInt8], headOnly: Bool = false,
                                extraHeaders: HTTPHeaders = HTTPHeaders(),
                                deadline: TimeAmount, taken: @escaping @Sendable () -> Void = {}) {
        stopReading(context)
        var headers = extraHeaders
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: "\(body.count)")
        headers.add(name: "Connection", value: "close")
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers)
        context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
        if !headOnly {
            var buffer = context.channel.allocator.buffer(capacity: body.count)
            buffer.writeBytes(body)
            context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(buffer))), promise: nil)
        }
        let channel = context.channel
        let drop = context.eventLoop.scheduleTask(in: deadline) { channel.close(promise: nil) }
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil))).whenComplete { _ in
            drop.cancel()
            taken()
            channel.close(promise: nil)
        }
    }
}

/// Stops accepting while too many connections are open (accepted, not yet closed). A
/// connection refused with 503 still costs a descriptor until that answer is written, and
/// a flood of them (the socket suite opened thousands a second) outran the closing: over
/// 500 descriptors, where systemd's default soft limit is 1024 for the whole daemon —
/// the hasher, the database and S3 would be the next to be refused one. Paused, the flood
/// waits in the kernel's backlog instead, costing the daemon nothing.
package final class AcceptThrottle: ChannelInboundHandler {
    package typealias InboundIn = Channel
    package typealias InboundOut = Channel

    package final class State: Sendable {
        private struct Counts {
            var open = 0
            var paused = false
        }
        private let counts = Mutex(Counts())
        let cap: Int
        package init(cap: Int) { self.cap = cap }

        /// Counts one more; true when accepting must pause now.
        package func opened() -> Bool {
            counts.withLock { c in
                c.open += 1
                guard c.open >= cap, !c.paused else { return false }
                c.paused = true
                return true
            }
        }

        /// Counts one less; true when accepting may resume now.
        package func closed() -> Bool {
            counts.withLock { c in
                c.open -= 1
                guard c.paused, c.open <= cap * 3 / 4 else { return false }
                c.paused = false
                return true
            }
        }

        package var paused: Bool { counts.withLock { $0.paused } }
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

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
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

/// Refuses a request whose head grows past the limit before the HTTP parser buffers it.
final class HeaderSizeGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let limit: Int
    private let headerLines: [String]
    private var seen = 0
    private var headEnded = false
    private var tail: [UInt8] = []

    init(limit: Int, headerLines: [String] = []) {
        self.limit = limit
        self.headerLines = headerLines
    }

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
                let extra = headerLines.map { $0 + "\r\n" }.joined()
                out.writeString("HTTP/1.1 431 Request Header Fields Too Large\r\n\(extra)Content-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n")
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
