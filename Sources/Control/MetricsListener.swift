import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PhotolalaCore

/// `metrics.listen`: Prometheus scrapes `GET /metrics` over TCP. Only that path is
/// served (anything else is 404), with the control socket's bounds: a small request head,
/// no body, 3 s to send the request, a cap on connections (past it the listener stops
/// accepting and the kernel's backlog holds the rest), and an answer not taken within
/// 10 s is dropped. It runs on the daemon's event loops and only reads the snapshot, so
/// a flood of scrapes or a stalled scraper costs the daemon nothing but a descriptor.
public final class MetricsListener: Sendable {
    public struct Limits: Sendable {
        public var maxHeaderBytes = 8 * 1024
        public var requestDeadline: TimeAmount = .seconds(3)
        public var responseDeadline: TimeAmount = .seconds(10)
        public var maxConnections = 64
        public init() {}
    }

    public enum StartError: Error, CustomStringConvertible {
        case cannotBind(Settings.ListenAddress, String)
        public var description: String {
            switch self {
            case let .cannotBind(address, why):
                "cannot serve metrics on \(address) (metrics.listen): \(why); choose a free port or an address of this machine in [metrics] listen, or set it to \"off\""
            }
        }
    }

    private let channel: Channel
    public let address: Settings.ListenAddress
    /// The port bound (the one asked for, or the kernel's choice for port 0).
    public let port: Int

    private init(channel: Channel, address: Settings.ListenAddress) {
        self.channel = channel
        self.address = address
        self.port = channel.localAddress?.port ?? address.port
    }

    public static func start(
        address: Settings.ListenAddress, limits: Limits = Limits(), logger: Logger,
        render: @escaping @Sendable () async -> [UInt8],
        eventLoopGroup: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(StartError) -> MetricsListener {
        let open = MetricsConnections(cap: limits.maxConnections)
        let throttle = AcceptThrottle.State(cap: limits.maxConnections + limits.maxConnections / 2)
        let bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.backlog, value: 128)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
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
                    try sync.addHandler(MetricsRequestHandler(limits: limits, connections: open, render: render))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: address.host, port: address.port).get()
            return MetricsListener(channel: channel, address: address)
        } catch {
            throw .cannotBind(address, Self.describe(error))
        }
    }

    public func stop() async {
        try? await channel.close()
    }

    static func describe(_ error: any Error) -> String {
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        return "\(error)"
    }
}
