#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PhotolalaCore
import ServiceLifecycle

/// The control socket server: HTTP/1.1, one request per connection, over a Unix socket.
/// Everything about a client is bounded — header and body size, the time to send the
/// request, the number of connections — so a broken or hostile client is answered with
/// an error and dropped without touching anyone else.
package final class ControlServer: Sendable {
    package struct Limits: Sendable {
        package var maxBodyBytes = 64 * 1024
        package var maxHeaderBytes = 16 * 1024
        package var requestDeadline: TimeAmount = .seconds(3)
        /// An answer the client has not taken by then is dropped with its connection: a
        /// client that never reads must not hold a slot, and the answer's memory, for good.
        package var responseDeadline: TimeAmount = .seconds(10)
        package var maxConnections = 256
        /// Connections one unprivileged uid may hold at once. The socket is open to a whole
        /// group: one member's runaway (or hostile) program must not take every slot, or
        /// root's own `photolalactl` gets "too many connections" (the socket suite did).
        package var maxConnectionsPerUser = 16
        /// Of `maxConnections`, slots only root and the daemon's user may take.
        package var reservedForPrivileged = 32
        /// Connections of one unprivileged uid still sending their request (sshd's
        /// `MaxStartups`, per uid): `photolalactl` sends its request as it connects, so a
        /// person's commands hold one each for a moment; a slowloris holds them for the
        /// `requestDeadline`, and only this many.
        package var maxStartupsPerUser = 8
        /// Requests of one unprivileged uid being answered at once: each costs the daemon
        /// work (a status, a listing, a manifest), and `photolalactl` asks one at a time.
        package var maxRequestsPerUser = 4
        /// Requests of every unprivileged uid together being answered at once.
        package var maxRequests = 32
        /// Of those that read much (`ControlRoute.readsMuch`), how many run at once; the
        /// others wait their uid's turn (`MemberLanes`). One: the other core stays free for
        /// root's, the daemon's user's and the members' status. Theirs never wait here.
        package var memberLanes = 1
        /// Connections taken from the backlog each time the loop looks (NIO's default is 4):
        /// a flood fills the kernel's backlog, and root's connection waits behind it there.
        package var acceptBatch = 32
        /// Bytes of answers written but not yet taken by their clients, summed over the
        /// unprivileged ones; past it a new answer is refused with 503. Bounds the memory
        /// that clients asking for big queue listings and never reading them can pin.
        package var maxPendingResponseBytes = 16 << 20
        /// A streamed answer (an object being restored) whose client takes nothing for this
        /// long is dropped with its connection; it holds no more than one buffer meanwhile.
        package var streamStallTimeout: TimeAmount = .seconds(60)
        package init() {}

        /// The per-uid counts these limits ask for (`ControlAdmission`).
        package var admission: ControlAdmission.Limits {
            .init(maxConnections: maxConnections, reservedForPrivileged: reservedForPrivileged,
                  maxConnectionsPerUser: maxConnectionsPerUser, maxStartupsPerUser: maxStartupsPerUser,
                  maxRequestsPerUser: maxRequestsPerUser, maxRequests: maxRequests)
        }
    }

    package enum StartError: Error, CustomStringConvertible {
        case alreadyRunning(String)
        case cannotBind(String, String)
        package var description: String {
            switch self {
            case let .alreadyRunning(path):
                "another photolalad is already running on \(path) (stop it first: systemctl stop photolalad)"
            case let .cannotBind(path, why):
                "cannot listen on the control socket \(path): \(why)"
            }
        }
    }

    private let server: HTTPServer
    package let path: String
    /// The server's own event loop, shut down with it (nil: the caller's group).
    private let ownLoop: MultiThreadedEventLoopGroup?

    private init(server: HTTPServer, path: String, ownLoop: MultiThreadedEventLoopGroup?) {
        self.server = server
        self.path = path
        self.ownLoop = ownLoop
    }

    /// Binds the socket: a live socket means another daemon (refuse), a stale file is replaced.
    package static func start(
        path: String, group groupName: String, policy: AccessPolicy, handler: any ControlHandler,
        limits: Limits = Limits(), audit: (any AuditRecorder)? = nil, logger: Logger,
        eventLoopGroup: EventLoopGroup? = nil
    ) async throws -> ControlServer {
        // One event loop of its own, unless given one (see `HTTPServer.start`): accepting,
        // reading and every deadline of the socket then happen on one thread in NIO's
        // order, I/O before timers, so a request already in its socket is read before its
        // deadline can fire, however many connections a flood brings (docs/decisions.md,
        // "No uid crowds out another").
        let own = eventLoopGroup == nil ? Self.ownLoop() : nil
        let ownLoop = own?.group
        let loops: EventLoopGroup = eventLoopGroup ?? own!.group
        let dir = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        if FileManager.default.fileExists(atPath: path) {
            if SocketProbe.isLive(path) { throw StartError.alreadyRunning(path) }
            logger.info("replacing a stale control socket", metadata: ["path": "\(path)"])
            unlink(path)
        }
        let connections = ConnectionCounter(limits: limits)
        let refusals = RefusalLog()
        let lanes = MemberLanes(lanes: limits.memberLanes)
        let server: HTTPServer
        do {
            // Umask-free creation: bind, then set the mode before anyone is told we are ready.
            server = try await HTTPServer.start(
                on: .unix(path: path),
                limits: .init(maxHeaderBytes: limits.maxHeaderBytes, acceptCap: limits.maxConnections + limits.maxConnections / 2, backlog: 256,
                              acceptBatch: limits.acceptBatch),
                eventLoopGroup: loops
            ) {
                RequestHandler(policy: policy, handler: handler, limits: limits, connections: connections, refusals: refusals,
                               audit: audit, ticks: own?.ticks, lanes: lanes, logger: logger)
            }
        } catch {
            try? await ownLoop?.shutdownGracefully()
            throw StartError.cannotBind(path, "\(error)")
        }
        if let gid = policy.readerGroup {
            // Needs the chown system call (the units allow @chown for it); a socket left with
            // another group would let that group's members open it, so it stays 0600.
            if chown(path, UInt32.max, gid) == 0 {
                chmod(path, 0o660)
            } else {
                let why = String(cString: strerror(errno))
                chmod(path, 0o600)
                logger.warning("the control socket could not be given the group '\(groupName)' (\(why)): it is mode 0600, so only root and the daemon's user can use photolalactl (the daemon's user must be a member of the group; under systemd, SystemCallFilter= must allow @chown)")
            }
        } else {
            chmod(path, 0o600)
        }
        return ControlServer(server: server, path: path, ownLoop: ownLoop)
    }

    /// The server's own loop: one thread, its task phases counted for the request deadline.
    package static func ownLoop() -> (group: MultiThreadedEventLoopGroup, ticks: LoopTicks) {
        let ticks = LoopTicks()
        return (MultiThreadedEventLoopGroup(numberOfThreads: 1, metricsDelegate: ticks), ticks)
    }

    package func stop() async {
        await server.stop()
        unlink(path)
        try? await ownLoop?.shutdownGracefully()
    }
}

/// What the daemon plugs into the control server: one async answer per request.
/// Authorization is done before this is called.
package protocol ControlHandler: Sendable {
    func handle(_ request: ControlRequest) async -> ControlResponse
}

/// The control socket's lifetime as a service of the daemon's group.
///
/// Binding is not part of it: `ControlServer.start` binds before READY=1 and before the
/// group runs, because clients and tests take a connectable socket for "up" and READY=1
/// promises a listening socket. This service takes the bound server and answers on it
/// until graceful shutdown (or cancellation), then closes it and removes the socket file.
/// Listed first in the group, it is shut down last: status keeps answering "stopping"
/// while the stages wind down.
package struct ControlService: Service {
    let server: ControlServer

    package init(server: ControlServer) {
        self.server = server
    }

    package func run() async throws {
        // Graceful shutdown returns, cancellation throws: either way the socket goes.
        try? await gracefulShutdown()
        await server.stop()
    }
}
