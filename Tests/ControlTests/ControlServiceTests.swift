#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import ServiceLifecycleTestKit
import Testing
import Control

/// The control socket as a service: bound before the group runs (READY=1 promises a
/// listening socket), answering while it runs, gone once it stops.
@Suite struct ControlServiceTests {
    struct Echo: ControlHandler {
        func handle(_ request: ControlRequest) async -> ControlResponse {
            .json(ControlReply(ok: true, message: "answered \(request.route.path)"))
        }
    }

    func bind() async throws -> (ControlServer, String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID().uuidString.prefix(8))").path
        let path = dir + "/s.sock"
        let policy = AccessPolicy(daemonUID: getuid(), readerGroup: nil, readerGroupName: "photolala")
        let server = try await ControlServer.start(path: path, group: "photolala", policy: policy, handler: Echo(),
                                                   logger: Logger(label: "test"))
        return (server, path)
    }

    /// The client blocks in read(2): on a thread of its own, not one the server's handler
    /// needs (the cooperative pool and Dispatch's global queues are as wide as the cores,
    /// and tests run in parallel).
    func ask(_ path: String) async throws(ControlClient.Failure) -> ControlReply {
        let result: Result<ControlReply, ControlClient.Failure> = await withCheckedContinuation { done in
            Thread.detachNewThread {
                var client = ControlClient(socketPath: path)
                // Generous: a loaded machine running every suite at once must not fail this.
                client.timeout = 30
                do throws(ControlClient.Failure) {
                    done.resume(returning: .success(try client.call(.pause, as: ControlReply.self)))
                } catch {
                    done.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    @Test func answersOnceBoundBeforeTheServiceRuns() async throws {
        let (server, path) = try await bind()
        defer { unlink(path) }
        // Connectable and answering before any service group exists: what READY=1 promises.
        #expect(try await ask(path).message == "answered /v1/pause")
        await server.stop()
    }

    @Test func gracefulShutdownClosesAndRemovesTheSocket() async throws {
        let (server, path) = try await bind()
        try await testGracefulShutdown { trigger in
            let running = Task { try await ControlService(server: server).run() }
            // Still answering while the service runs.
            #expect(try await ask(path).ok)
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        await #expect(throws: ControlClient.Failure.self) { try await ask(path) }
    }

    @Test func cancellationAlsoRemovesTheSocket() async throws {
        let (server, path) = try await bind()
        let running = Task { try await ControlService(server: server).run() }
        #expect(try await ask(path).ok)
        running.cancel()
        try await running.value
        #expect(!FileManager.default.fileExists(atPath: path))
        do {
            _ = try await ask(path)
            Issue.record("a stopped server answered")
        } catch {
            guard case .notRunning = error else { Issue.record("expected notRunning, got \(error)"); return }
        }
    }

    @Test func aLiveSocketRefusesASecondServer() async throws {
        let (server, path) = try await bind()
        let policy = AccessPolicy(daemonUID: getuid(), readerGroup: nil, readerGroupName: "photolala")
        await #expect(throws: ControlServer.StartError.self) {
            _ = try await ControlServer.start(path: path, group: "photolala", policy: policy, handler: Echo(), logger: Logger(label: "test"))
        }
        // The first one still answers: the refused start did not take its socket away.
        #expect(try await ask(path).ok)
        await server.stop()
    }
}
