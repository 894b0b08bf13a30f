import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Fetches the certificate a server presents, without verifying it, only to say why
/// verifying it failed. Nothing is sent over the connection but the handshake.
enum CertificateProbe {
    static func peerCertificate(host: String, port: Int, timeout: TimeAmount = .seconds(5)) async -> PeerCertificate? {
        do {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .none
            let context = try NIOSSLContext(configuration: configuration)
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            let leaf = loop.makePromise(of: NIOSSLCertificate.self)
            // SNI carries names only; the host is what the failed request asked for.
            let serverName = Self.isIPAddress(host) ? nil : host
            let channel = try await ClientBootstrap(group: loop)
                .connectTimeout(timeout)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: serverName))
                        try channel.pipeline.syncOperations.addHandler(LeafCatcher(leaf: leaf))
                    }
                }
                .connect(host: host, port: port).get()
            let deadline = loop.scheduleTask(in: timeout) { leaf.fail(ChannelError.connectTimeout(timeout)) }
            defer {
                deadline.cancel()
                channel.close(promise: nil)
            }
            return try PeerCertificate(der: try await leaf.futureResult.get().toDERBytes())
        } catch {
            return nil
        }
    }

    static func isIPAddress(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return (try? SocketAddress(ipAddress: bare, port: 0)) != nil
    }
}

/// Hands the peer's leaf certificate out once the handshake completes.
private final class LeafCatcher: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let leaf: EventLoopPromise<NIOSSLCertificate>

    init(leaf: EventLoopPromise<NIOSSLCertificate>) {
        self.leaf = leaf
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSUserEvent {
            if let handler = try? context.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self),
               let certificate = handler.peerCertificate {
                leaf.succeed(certificate)
            } else {
                leaf.fail(NIOSSLError.noCertificateToValidate)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        leaf.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        leaf.fail(ChannelError.eof)
        context.fireChannelInactive()
    }
}
