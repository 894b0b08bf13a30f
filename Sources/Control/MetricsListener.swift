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
package final class MetricsListener: Sendable {
    package struct Limits: Sendable {
        package var maxHeaderBytes = 8 * 1024
        package var requestDeadline: TimeAmount = .seconds(3)
        package var responseDeadline: TimeAmount = .seconds(10)
        package var maxConnections = 64
        package init() {}
    }

    package enum StartError: Error, CustomStringConvertible {
        case cannotBind(Settings.ListenAddress, String)
        package var description: String {
            switch self {
            case let .cannotBind(address, why):
                "cannot serve metrics on \(address) (metrics.listen): \(why); choose a free port or an address of this machine in [metrics] listen, or set it to \"off\""
            }
        }
    }

    private let server: HTTPServer
    package let connections: MetricsConnections
    package let address: Settings.ListenAddress
    /// The port bound (the one asked for, or the kernel's choice for port 0).
    package var port: Int { server.port ?? address.port }

    private init(server: HTTPServer, connections: MetricsConnections, address: Settings.ListenAddress) {
        self.server = server
        self.connections = connections
        self.address = address
    }

    package static func start(
        address: Settings.ListenAddress, limits: Limits = Limits(), logger: Logger,
        render: @escaping @Sendable () async -> [UInt8],
        eventLoopGroup: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(StartError) -> MetricsListener {
        let open = MetricsConnections(cap: limits.maxConnections)
        do {
            let server = try await HTTPServer.start(
                on: .tcp(host: address.host, port: address.port),
                limits: .init(maxHeaderBytes: limits.maxHeaderBytes, acceptCap: limits.maxConnections + limits.maxConnections / 2, backlog: 128),
                eventLoopGroup: eventLoopGroup
            ) {
                MetricsRequestHandler(limits: limits, connections: open, render: render)
            }
            return MetricsListener(server: server, connections: open, address: address)
        } catch {
            throw .cannotBind(address, Self.describe(error))
        }
    }

    package func stop() async {
        await server.stop()
    }

    static func describe(_ error: any Error) -> String {
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        return "\(error)"
    }
}
