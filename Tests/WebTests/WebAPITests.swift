import Control
import Foundation
import Logging
import PhotolalaCore
import Queue
import Synchronization
import Testing
import Web

/// The page's rules (web.md "Routes", "Sessions", "Every response"), called without a
/// socket: the control handler behind it is a recorder (the e2e suite drives the real one).
@Suite struct WebAPITests {
    final class Backend: WebBackend {
        let database: QueueDatabase
        let calls = Mutex<[ControlRoute]>([])
        init(database: QueueDatabase) { self.database = database }
        var statusGeneration: Int { 0 }
        func status() async -> DaemonStatus {
            var s = DaemonStatus(state: .running)
            s.watch.paths = ["/srv/photos/Alice"]
            return s
        }
        func watchedFolders() async -> [String] { ["/srv/photos/Alice"] }
        func perform(_ route: ControlRoute, body: [UInt8], as peer: PeerCredentials) async -> ControlResponse {
            calls.withLock { $0.append(route) }
            return .json(ControlReply(ok: true, message: "done as \(peer.uid)"))
        }
    }

    final class Trail: AuditRecorder {
        let events = Mutex<[AuditEvent]>([])
        func record(_ event: AuditEvent) { events.withLock { $0.append(event) } }
    }

    let backend: Backend
    let trail = Trail()
    let api: WebAPI
    let sessions: WebSessions
    let host = "127.0.0.1:8770"

    init() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("web-api-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        backend = Backend(database: try QueueDatabase.open(path: dir + "/queue.db"))
        sessions = WebSessions(stateDir: nil, ttl: .seconds(3600), logger: Logger(label: "test"))
        let check = HostCheck(listen: .init(host: "127.0.0.1", port: 8770), boundPort: 8770, tls: false, hosts: [], localAddresses: [])
        api = WebAPI(options: .init(hostCheck: check, tls: false, sessionTTL: .seconds(3600), port: 8770), sessions: sessions,
                     feed: WebFeed(backend: backend), backend: backend, audit: trail, logger: Logger(label: "test"))
    }

    func response(_ request: WebRequest) async -> WebResponse {
        guard case .response(let r) = await api.answer(request) else { Issue.record("expected a response"); return .text(0, "") }
        return r
    }

    /// Opens a session the way a browser does: the link, then the cookie it set.
    func openSession() async throws -> String {
        let (link, _) = await sessions.issueLink(uid: 0)
        let r = await response(WebRequest(method: "GET", path: "/session", query: ["token": link], host: host, remote: "192.0.2.9"))
        #expect(r.status == 303 && r.headers["Location"] == "/")
        let cookie = try #require(r.headers["Set-Cookie"])
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && !cookie.contains("Secure"))
        return try #require(cookie.split(separator: ";").first.map(String.init))
    }

    @Test func aForeignHostGets421() async {
        let r = await response(WebRequest(method: "GET", path: "/api/status", host: "evil.example:8770", remote: "127.0.0.1"))
        #expect(r.status == 421)
    }

    @Test func pauseNeedsASessionAndItsCSRFToken() async throws {
        let refused = await response(WebRequest(method: "POST", path: "/api/pause", host: host, remote: "192.0.2.9"))
        #expect(refused.status == 403)
        let cookie = try await openSession()
        let noCSRF = await response(WebRequest(method: "POST", path: "/api/pause", host: host, cookie: cookie, remote: "192.0.2.9"))
        #expect(noCSRF.status == 403)
        let wrongOrigin = await response(WebRequest(method: "POST", path: "/api/pause", host: host, cookie: cookie,
                                                    csrf: WebToken.csrf(forSession: String(cookie.split(separator: "=")[1])),
                                                    origin: "http://evil.example", remote: "192.0.2.9"))
        #expect(wrongOrigin.status == 403)
        #expect(backend.calls.withLock { $0 }.isEmpty)
        let token = String(cookie.split(separator: "=")[1])
        let ok = await response(WebRequest(method: "POST", path: "/api/pause", host: host, cookie: cookie, csrf: WebToken.csrf(forSession: token),
                                           origin: "http://\(host)", remote: "192.0.2.9"))
        #expect(ok.status == 200)
        #expect(backend.calls.withLock { $0 } == [.pause])
        let records = trail.events.withLock { $0 }.filter { $0.kind == .webChange }
        #expect(records.map(\.outcome) == [.refused, .refused, .ok])
        #expect(records.last?.details["action"] == .string("pause") && records.last?.details["remote"] == .string("192.0.2.9"))
        #expect(records.last?.actor == .caller(uid: 0))
        // The trail holds no token.
        #expect(!"\(records)".contains(token))
    }

    @Test func readRoutesShowNamesOnlyWithASession() async throws {
        let anonymous = await response(WebRequest(method: "GET", path: "/api/status", host: host, remote: "192.0.2.9"))
        #expect(!String(decoding: anonymous.body, as: UTF8.self).contains("Alice"))
        let folders = await response(WebRequest(method: "GET", path: "/api/folders", host: host, remote: "192.0.2.9"))
        #expect(String(decoding: folders.body, as: UTF8.self).contains("Folder 1"))
        let cookie = try await openSession()
        let named = await response(WebRequest(method: "GET", path: "/api/status", host: host, cookie: cookie, remote: "192.0.2.9"))
        #expect(String(decoding: named.body, as: UTF8.self).contains("/srv/photos/Alice"))
    }

    @Test func aLinkWorksOnceAndRevokeEndsTheSession() async throws {
        let (link, _) = await sessions.issueLink(uid: 0)
        let first = await response(WebRequest(method: "GET", path: "/session", query: ["token": link], host: host, remote: "a"))
        #expect(first.status == 303)
        let second = await response(WebRequest(method: "GET", path: "/session", query: ["token": link], host: host, remote: "b"))
        #expect(second.status == 403 && second.headers["Set-Cookie"] == nil)
        let cookie = try #require(first.headers["Set-Cookie"]?.split(separator: ";").first.map(String.init))
        await sessions.revokeAll()
        let after = await response(WebRequest(method: "GET", path: "/api/session", host: host, cookie: cookie, remote: "a"))
        #expect(String(decoding: after.body, as: UTF8.self) == "{\"session\":false}")
    }

    @Test func theMirrorPassIsRefusedWhileThisDaemonHasNoMirror() async throws {
        let cookie = try await openSession()
        let token = String(cookie.split(separator: "=")[1])
        let r = await response(WebRequest(method: "POST", path: "/api/mirror/pass", host: host, cookie: cookie,
                                          csrf: WebToken.csrf(forSession: token), remote: "a"))
        #expect(r.status == (ControlRoute(method: "POST", path: "/v1/mirror/pass") == nil ? 404 : 200))
    }

    @Test func unknownPathsAndMethodsAreRefused() async {
        #expect(await response(WebRequest(method: "GET", path: "/etc/passwd", host: host, remote: "a")).status == 404)
        #expect(await response(WebRequest(method: "POST", path: "/api/status", host: host, remote: "a")).status == 405)
        #expect(await response(WebRequest(method: "GET", path: "/api/pause", host: host, remote: "a")).status == 405)
    }
}
