#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import NIOCore
import PhotolalaCore
import Testing
import Control

/// The TCP metrics listener: only `/metrics`, the control socket's bounds, and a port it
/// cannot use never stopping anything.
// Serialized: a test that checks a released port is closed must not see another of these
// listeners bound to it by the kernel's reuse of ephemeral ports.
@Suite(.serialized) struct MetricsListenerTests {
    static let body = Array("# HELP photolala_up x\n# TYPE photolala_up gauge\nphotolala_up 1.0\n".utf8)

    static func start(_ limits: MetricsListener.Limits = MetricsListener.Limits()) async throws -> MetricsListener {
        try await MetricsListener.start(address: .init(host: "127.0.0.1", port: 0), limits: limits, logger: Logger(label: "test")) { body }
    }

    /// Sends raw bytes over loopback and reads until the server closes (or `timeout`), on
    /// a thread of its own: the read blocks. Every exchange here ends with the server's
    /// close; the timeout only bounds a hang, with room for a loaded run (5 s was not).
    static func exchange(port: Int, _ request: [UInt8], timeout: Int = 30) async -> String {
        await withCheckedContinuation { done in
            Thread.detachNewThread {
                done.resume(returning: blockingExchange(port: port, request, timeout: timeout))
            }
        }
    }

    static func blockingExchange(port: Int, _ request: [UInt8], timeout: Int) -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var tv = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return "connect failed" }
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func get(_ path: String, method: String = "GET", extra: String = "") -> [UInt8] {
        Array("\(method) \(path) HTTP/1.1\r\nHost: nas\r\n\(extra)\r\n".utf8)
    }

    @Test func servesMetricsAtMetrics() async throws {
        let listener = try await Self.start()
        let answer = await Self.exchange(port: listener.port, Self.get("/metrics"))
        #expect(answer.hasPrefix("HTTP/1.1 200 OK"))
        #expect(answer.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"))
        #expect(answer.hasSuffix("photolala_up 1.0\n"))
        let withQuery = await Self.exchange(port: listener.port, Self.get("/metrics?name[]=photolala_up"))
        #expect(withQuery.hasPrefix("HTTP/1.1 200 OK"))
        let head = await Self.exchange(port: listener.port, Self.get("/metrics", method: "HEAD"))
        #expect(head.hasPrefix("HTTP/1.1 200 OK") && !head.contains("photolala_up"))
        await listener.stop()
    }

    @Test("anything but GET /metrics is refused", arguments: [
        ("GET /v1/status", "404"), ("GET /", "404"), ("GET /metrics/../v1/status", "404"), ("POST /metrics", "405"),
        ("DELETE /metrics", "405"),
    ])
    func refusesEverythingElse(request: String, status: String) async throws {
        let listener = try await Self.start()
        let parts = request.split(separator: " ").map(String.init)
        let answer = await Self.exchange(port: listener.port, Self.get(parts[1], method: parts[0]))
        #expect(answer.hasPrefix("HTTP/1.1 \(status)"), "\(answer)")
        #expect(!answer.contains("photolala_up"))
        await listener.stop()
    }

    @Test func refusesOversizedAndSlowRequests() async throws {
        var limits = MetricsListener.Limits()
        limits.requestDeadline = .milliseconds(300)
        let listener = try await Self.start(limits)
        let bodied = await Self.exchange(port: listener.port, Self.get("/metrics", extra: "Content-Length: 5\r\n") + Array("hello".utf8))
        #expect(bodied.hasPrefix("HTTP/1.1 413"))
        let huge = await Self.exchange(port: listener.port, Self.get("/metrics", extra: "X-Fill: \(String(repeating: "a", count: 20_000))\r\n"))
        #expect(huge.hasPrefix("HTTP/1.1 431"))
        let garbage = await Self.exchange(port: listener.port, Array("\u{01}\u{02} nonsense\r\n\r\n".utf8))
        #expect(garbage.hasPrefix("HTTP/1.1 400"))
        let started = ContinuousClock.now
        let slow = await Self.exchange(port: listener.port, Array("GET /metr".utf8))
        #expect(slow.hasPrefix("HTTP/1.1 408"))
        // Refused at its deadline, not left hanging; the bound leaves room for a loaded machine.
        #expect(ContinuousClock.now - started < .seconds(30))
        // Still serving after all that.
        #expect(await Self.exchange(port: listener.port, Self.get("/metrics")).hasPrefix("HTTP/1.1 200"))
        await listener.stop()
    }

    @Test func pastTheCapANewConnectionIsTurnedAway() async throws {
        var limits = MetricsListener.Limits()
        limits.maxConnections = 2
        // Long enough that a loaded machine cannot free a slot before the third client comes.
        limits.requestDeadline = .seconds(8)
        let listener = try await Self.start(limits)
        // Two clients that connect and say nothing hold both slots until their deadline.
        let idle = (0..<2).map { _ in Task { await Self.exchange(port: listener.port, [], timeout: 20) } }
        try await waitUntil { listener.connections.count == 2 }
        let turnedAway = await Self.exchange(port: listener.port, Self.get("/metrics"))
        #expect(turnedAway.hasPrefix("HTTP/1.1 503"))
        for t in idle { #expect(await t.value.hasPrefix("HTTP/1.1 408")) }
        #expect(await Self.exchange(port: listener.port, Self.get("/metrics")).hasPrefix("HTTP/1.1 200"))
        await listener.stop()
    }

    @Test("a port in use is a problem, retried; a reload moves the listener or turns it off")
    func portInUseAndReload() async throws {
        let taken = try await Self.start()
        let service = MetricsListenerService(address: .init(host: "127.0.0.1", port: taken.port), retryInterval: .milliseconds(200),
                                             logger: Logger(label: "test")) { Self.body }
        let running = Task { try await service.run() }
        try await waitUntil { await service.problem != nil }
        #expect(await service.problem?.contains("metrics.listen") == true)
        #expect(await service.problem?.contains("\(taken.port)") == true)
        await taken.stop()
        try await waitUntil {
            let (problem, port) = (await service.problem, await service.boundPort)
            return problem == nil && port == taken.port
        }
        #expect(await Self.exchange(port: taken.port, Self.get("/metrics")).hasPrefix("HTTP/1.1 200"))

        await service.apply(.init(host: "127.0.0.1", port: 0))
        try await waitUntil {
            let port = await service.boundPort
            return port != nil && port != taken.port
        }
        let moved = try #require(await service.boundPort)
        #expect(await Self.exchange(port: moved, Self.get("/metrics")).hasPrefix("HTTP/1.1 200"))
        // The old listener's close completes on its event loop, a moment after the move.
        try await waitUntil { await Self.exchange(port: taken.port, Self.get("/metrics")) == "connect failed" }

        await service.apply(nil)
        try await waitUntil { await service.boundPort == nil }
        try await waitUntil { await Self.exchange(port: moved, Self.get("/metrics")) == "connect failed" }
        running.cancel()
        try? await running.value
    }

    func waitUntil(_ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while await !condition() {
            guard ContinuousClock.now < deadline else { Issue.record("timed out"); return }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
