import ServiceLifecycle

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
