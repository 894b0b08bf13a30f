import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// An HTTPS server on 127.0.0.1 presenting one certificate and answering every request
/// with 200 "ok": the other end of a real handshake.
final class TLSTestServer: Sendable {
    let channel: any Channel
    var port: Int { channel.localAddress?.port ?? 0 }

    private init(channel: any Channel) {
        self.channel = channel
    }

    static func start(_ identity: ServerIdentity) async throws -> TLSTestServer {
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(identity.certificate)], privateKey: .privateKey(identity.key))
        let context = try NIOSSLContext(configuration: configuration)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(OKResponder())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TLSTestServer(channel: channel)
    }

    func stop() async throws {
        try await channel.close()
    }
}

private final class OKResponder: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var head = HTTPResponseHead(version: .http1_1, status: .ok)
        head.headers.add(name: "Content-Length", value: "2")
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "ok")))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    // A client that refused our certificate closes mid-handshake: nothing to report.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
