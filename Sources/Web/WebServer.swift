#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Control
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import PhotolalaCore
import Synchronization

/// The status page's listener: the daemon's one server shape (`HTTPServer`), with TLS in
/// front when `[web] tls_cert`/`tls_key` are set, on an event loop of its own whose thread
/// runs at a lower priority (nice 10). A flood of requests therefore waits for that one
/// thread while the control socket (the shared loops) and the stages (the cooperative
/// pool) go on; the work each request may cause is bounded by `WebFeed` (one status a
/// second for everyone).
package final class WebServer: Sendable {
    package struct Limits: Sendable {
        package var maxHeaderBytes = 8 * 1024
        package var maxHeaderCount = 48
        package var maxBodyBytes = 1024
        package var requestDeadline: TimeAmount = .seconds(5)
        package var responseDeadline: TimeAmount = .seconds(10)
        package var maxConnections = 64
        package var maxConnectionsPerRemote = 24
        package var maxStreams = 16
        package var maxStreamsPerRemote = 4
        package var keepAlive: TimeAmount = .seconds(30)
        package init() {}
    }

    package enum StartError: Error, CustomStringConvertible {
        case cannotBind(Settings.ListenAddress, String)
        case tls(String)
        package var description: String {
            switch self {
            case let .cannotBind(address, why): "cannot listen on \(address): \(why)"
            case let .tls(why): "cannot use [web] tls_cert and tls_key: \(why)"
            }
        }
    }

    private let server: HTTPServer
    package let address: Settings.ListenAddress
    package let tls: Bool
    package var port: Int { server.port ?? address.port }
    let connections: WebConnections

    private init(server: HTTPServer, address: Settings.ListenAddress, tls: Bool, connections: WebConnections) {
        self.server = server
        self.address = address
        self.tls = tls
        self.connections = connections
    }

    /// The page's own event loop, made once: its thread is lowered on its first turn.
    package static let eventLoops: MultiThreadedEventLoopGroup = {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        group.next().execute { _ = photolala_nice_this_thread(10) }
        return group
    }()

    package static func start(address: Settings.ListenAddress, tlsFiles: (cert: String, key: String)?, limits: Limits = Limits(),
                              api: @escaping @Sendable (_ port: Int) -> WebAPI) async throws(StartError) -> WebServer {
        var context: NIOSSLContext?
        if let tlsFiles {
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(tlsFiles.cert).map { NIOSSLCertificateSource.certificate($0) }
                let key = try NIOSSLPrivateKey(file: tlsFiles.key, format: .pem)
                context = try NIOSSLContext(configuration: .makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key)))
            } catch {
                throw .tls("\(error)")
            }
        }
        let connections = WebConnections(limits: limits)
        // The API needs the port bound (port 0 in tests) for the Host check: made once
        // the socket is bound, read by each connection.
        let made = APIHolder()
        do {
            var secure: (@Sendable (ChannelPipeline.SynchronousOperations) throws -> Void)?
            if let tlsContext = context {
                secure = { sync in try sync.addHandler(NIOSSLServerHandler(context: tlsContext)) }
            }
            let server = try await HTTPServer.start(
                on: .tcp(host: address.host, port: address.port),
                limits: .init(maxHeaderBytes: limits.maxHeaderBytes, acceptCap: limits.maxConnections + limits.maxConnections / 2,
                              backlog: 128, headerLines: WebRequestHandler.headerLines),
                eventLoopGroup: eventLoops, secure: secure
            ) {
                WebRequestHandler(limits: limits, connections: connections, holder: made)
            }
            made.set(api(server.port ?? address.port))
            return WebServer(server: server, address: address, tls: context != nil, connections: connections)
        } catch {
            throw .cannotBind(address, Self.describe(error))
        }
    }

    package func stop() async {
        await server.stop()
    }

    static func describe(_ error: any Error) -> String {
        if let io = error as? IOError {
            switch io.errnoCode {
            case EADDRINUSE: return "the port is in use by another program (another photolalad instance needs its own [web] listen)"
            case EADDRNOTAVAIL: return "the address is not one of this machine's"
            case EACCES: return "permission denied (ports below 1024 need privileges)"
            default: return String(cString: strerror(io.errnoCode))
            }
        }
        return "\(error)"
    }

    /// This machine's addresses, for a listener on every address (`0.0.0.0`, `::`).
    package static func localAddresses() -> [String] {
        ((try? System.enumerateDevices()) ?? []).compactMap { $0.address?.ipAddress }
    }
}

/// The API a connection answers with, set once after the bind.
final class APIHolder: Sendable {
    private let value = Mutex<WebAPI?>(nil)
    var api: WebAPI? { value.withLock { $0 } }
    func set(_ api: WebAPI) { value.withLock { $0 = api } }
}
