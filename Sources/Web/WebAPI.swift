import Control
import Foundation
import Logging
import PhotolalaCore

/// One request to the page, as the connection handler gathered it.
package struct WebRequest: Sendable {
    package var method: String
    package var path: String
    package var query: [String: String]
    package var host: String?
    package var cookie: String?
    package var csrf: String?
    package var origin: String?
    /// The browser's address as the daemon sees it (`192.168.1.30`), for the audit trail.
    package var remote: String

    package init(method: String, path: String, query: [String: String] = [:], host: String?, cookie: String? = nil, csrf: String? = nil,
                 origin: String? = nil, remote: String) {
        self.method = method
        self.path = path
        self.query = query
        self.host = host
        self.cookie = cookie
        self.csrf = csrf
        self.origin = origin
        self.remote = remote
    }
}

package enum WebAnswer: Sendable {
    case response(WebResponse)
    /// `GET /api/events`: statuses as server-sent events, with names when `session`.
    case events(session: String?)
}

package struct WebResponse: Sendable, Equatable {
    package var status: Int
    package var contentType: String
    package var body: [UInt8]
    package var headers: [String: String]

    package init(status: Int, contentType: String, body: [UInt8], headers: [String: String] = [:]) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }

    static func json<T: Encodable>(_ value: T, status: Int = 200) -> WebResponse {
        WebResponse(status: status, contentType: "application/json", body: (try? ControlJSON.encode(value)) ?? Array("{}".utf8),
                    headers: ["Cache-Control": "no-store"])
    }

    static func error(_ status: Int, _ code: String, _ message: String) -> WebResponse {
        json(ControlReply(ok: false, error: code, message: message), status: status)
    }

    package static func text(_ status: Int, _ message: String) -> WebResponse {
        WebResponse(status: status, contentType: "text/plain; charset=utf-8", body: Array((message + "\n").utf8))
    }
}

/// The page's routes (web.md "Routes"): who may ask what, and the answer. Free of NIO, so
/// the rules are tested by calling `answer`.
package struct WebAPI: Sendable {
    /// What a session may do, and the control call each is.
    package enum Action: String, Sendable, CaseIterable {
        case pause, resume, retry, rescan, login, logout
        case mirrorPass = "mirror/pass"

        /// Nil when this daemon has no such call (the mirror before it is built in).
        var route: ControlRoute? {
            switch self {
            case .pause: .pause
            case .resume: .resume
            case .retry: .retry
            case .rescan: .rescan
            case .login: .loginDeviceStart
            case .logout: .logout
            case .mirrorPass: ControlRoute(method: "POST", path: "/v1/mirror/pass")
            }
        }
    }

    package struct Options: Sendable {
        package var hostCheck: HostCheck
        package var tls: Bool
        package var sessionTTL: Duration
        /// Cookies are not kept apart by port: two daemons on one NAS need two names.
        package var cookieName: String

        package init(hostCheck: HostCheck, tls: Bool, sessionTTL: Duration, port: Int) {
            self.hostCheck = hostCheck
            self.tls = tls
            self.sessionTTL = sessionTTL
            self.cookieName = "photolala_session_\(port)"
        }
    }

    let options: Options
    let sessions: WebSessions
    let feed: WebFeed
    let backend: any WebBackend
    let audit: (any AuditRecorder)?
    let logger: Logger

    package init(options: Options, sessions: WebSessions, feed: WebFeed, backend: any WebBackend, audit: (any AuditRecorder)?, logger: Logger) {
        self.options = options
        self.sessions = sessions
        self.feed = feed
        self.backend = backend
        self.audit = audit
        self.logger = logger
    }

    package func answer(_ request: WebRequest) async -> WebAnswer {
        guard options.hostCheck.allows(request.host) else {
            return .response(.text(421, "This address is not one photolalad serves its page on (Host \(request.host.map { "\"\(String($0.prefix(64)))\"" } ?? "missing")): open the address `photolalactl status` shows, or add the name to [web] hosts."))
        }
        let token = Self.cookie(options.cookieName, in: request.cookie)
        switch (request.method, request.path) {
        case ("GET", "/"), ("GET", "/index.html"):
            return .response(WebResponse(status: 200, contentType: "text/html; charset=utf-8", body: WebAssets.page,
                                         headers: ["Cache-Control": "no-cache"]))
        case ("GET", "/app.js"):
            return .response(WebResponse(status: 200, contentType: "text/javascript; charset=utf-8", body: WebAssets.script,
                                         headers: ["Cache-Control": "no-cache"]))
        case ("GET", "/app.css"):
            return .response(WebResponse(status: 200, contentType: "text/css; charset=utf-8", body: WebAssets.style,
                                         headers: ["Cache-Control": "no-cache"]))
        case ("GET", "/favicon.svg"), ("GET", "/favicon.ico"):
            return .response(WebResponse(status: 200, contentType: "image/svg+xml", body: WebAssets.icon,
                                         headers: ["Cache-Control": "max-age=86400"]))
        case ("GET", "/api/status"):
            let snapshot = await feed.snapshot()
            let named = await sessions.session(token: token) != nil
            return .response(WebResponse(status: 200, contentType: "application/json", body: named ? snapshot.full : snapshot.publicJSON,
                                         headers: ["Cache-Control": "no-store"]))
        case ("GET", "/api/history"):
            return .response(.json(await feed.history()))
        case ("GET", "/api/folders"):
            let named = await sessions.session(token: token) != nil
            return .response(.json(Self.folderView(await feed.folderReport(named: named), named: named)))
        case ("GET", "/api/session"):
            guard let token, let session = await sessions.session(token: token) else { return .response(.json(SessionView(session: false))) }
            return .response(.json(SessionView(session: true, csrfToken: WebToken.csrf(forSession: token),
                                               expiresAt: Timestamp.string(session.expiresAt))))
        case ("GET", "/api/events"):
            let named = await sessions.session(token: token) != nil
            return .events(session: named ? token : nil)
        case ("GET", "/session"):
            return .response(await openSession(request))
        case ("GET", "/api/login"):
            guard let token, let session = await sessions.session(token: token) else {
                return .response(.error(403, "no_session", "Signing in needs a session: run `sudo photolalactl web --link` and open the link it prints."))
            }
            return .response(await login(.loginDevicePoll, session: session))
        default:
            break
        }
        if request.path.hasPrefix("/api/"), let action = Action(rawValue: String(request.path.dropFirst(5))) {
            guard request.method == "POST" else { return .response(.error(405, "method_not_allowed", "\(request.path) takes POST")) }
            return .response(await change(action, request, token: token))
        }
        if ["/", "/index.html", "/app.js", "/app.css", "/api/status", "/api/history", "/api/folders", "/api/session", "/api/events",
            "/session", "/api/login"].contains(request.path) {
            return .response(.error(405, "method_not_allowed", "\(request.method) is not allowed on \(request.path)"))
        }
        return .response(.error(404, "not_found", "no such page: \(String(request.path.prefix(100)))"))
    }

    package struct SessionView: Codable, Sendable, Equatable {
        package var session: Bool
        package var csrfToken: String?
        package var expiresAt: String?
    }

    /// `GET /session?token=…`: the one-time link. A used or expired link says how to get
    /// another; the token is never logged.
    func openSession(_ request: WebRequest) async -> WebResponse {
        guard let link = request.query["token"],
              let (token, session) = await sessions.redeem(linkToken: link, remote: request.remote) else {
            return WebResponse(status: 403, contentType: "text/html; charset=utf-8", body: WebAssets.linkRefused,
                               headers: ["Cache-Control": "no-store"])
        }
        logger.notice("a session of the status page was opened", metadata: ["remote": "\(request.remote)", "uid": "\(session.uid)"])
        let seconds = Int(options.sessionTTL.components.seconds)
        let cookie = "\(options.cookieName)=\(token); Path=/; Max-Age=\(seconds); HttpOnly; SameSite=Strict" + (options.tls ? "; Secure" : "")
        return WebResponse(status: 303, contentType: "text/plain; charset=utf-8", body: Array("Signed in to the page.\n".utf8),
                           headers: ["Location": "/", "Set-Cookie": cookie, "Cache-Control": "no-store"])
    }

    /// A change: a live session, its CSRF token, and (when the browser says where it
    /// comes from) this page's own origin. Recorded as `web.change` whatever came of it.
    func change(_ action: Action, _ request: WebRequest, token: String?) async -> WebResponse {
        guard let token, let session = await sessions.session(token: token) else {
            // Not recorded: without a session it is no one's change, and a flood of them must
            // not fill the trail.
            return .error(403, "no_session", "Changes need a session: run `sudo photolalactl web --link` on the NAS and open the link it prints.")
        }
        guard let csrf = request.csrf, WebToken.same(csrf, WebToken.csrf(forSession: token)) else {
            record(action, request, uid: session.uid, .refused, why: "missing or wrong CSRF token")
            return .error(403, "csrf", "The request did not carry this page's CSRF token (X-CSRF-Token): reload the page and try again.")
        }
        if let origin = request.origin, !originMatches(origin, host: request.host) {
            record(action, request, uid: session.uid, .refused, why: "foreign origin")
            return .error(403, "origin", "The request came from another site's page: refused.")
        }
        guard let route = action.route else {
            record(action, request, uid: session.uid, .refused, why: "no mirror in this daemon")
            return .error(404, "not_available", "This photolalad has no NAS copy of the account (mirror) to start a pass of.")
        }
        if action == .login {
            let response = await login(route, session: session)
            record(action, request, uid: session.uid, response.status < 300 ? .ok : .failed, why: nil)
            return response
        }
        let answer = await backend.perform(route, body: [], as: Self.peer(session))
        record(action, request, uid: session.uid, answer.status < 300 ? .ok : .failed, why: nil)
        return WebResponse(status: answer.status, contentType: answer.contentType, body: answer.body, headers: ["Cache-Control": "no-store"])
    }

    /// The pairing flow's address and code, and the address as a QR code (web.md `/api/login`).
    func login(_ route: ControlRoute, session: SessionBook.Session) async -> WebResponse {
        let answer = await backend.perform(route, body: [], as: Self.peer(session))
        guard answer.status == 200, let progress = try? ControlJSON.decode(LoginProgress.self, from: answer.body) else {
            return WebResponse(status: answer.status, contentType: answer.contentType, body: answer.body, headers: ["Cache-Control": "no-store"])
        }
        let address = progress.verificationUriComplete ?? progress.verificationUri
        let qr = address.flatMap { QRCode($0) }?.svg(label: "QR code of the sign-in address")
        return .json(LoginView(progress: progress, qrSVG: qr))
    }

    package struct LoginView: Codable, Sendable, Equatable {
        package var progress: LoginProgress
        package var qrSVG: String?

        package init(progress: LoginProgress, qrSVG: String?) {
            self.progress = progress
            self.qrSVG = qrSVG
        }

        package func encode(to encoder: any Encoder) throws {
            try progress.encode(to: encoder)
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(qrSVG, forKey: .qrSVG)
        }

        package init(from decoder: any Decoder) throws {
            progress = try LoginProgress(from: decoder)
            qrSVG = try decoder.container(keyedBy: Keys.self).decodeIfPresent(String.self, forKey: .qrSVG)
        }

        enum Keys: String, CodingKey { case qrSVG }
    }

    func originMatches(_ origin: String, host: String?) -> Bool {
        guard let host else { return false }
        return origin.lowercased() == "\(options.tls ? "https" : "http")://\(host.lowercased())"
    }

    /// The caller a change runs as: the uid that made the link (root or the daemon's user).
    static func peer(_ session: SessionBook.Session) -> PeerCredentials {
        PeerCredentials(pid: 0, uid: session.uid, gid: 0)
    }

    private func record(_ action: Action, _ request: WebRequest, uid: UInt32, _ outcome: AuditOutcome, why: String?) {
        var details: AuditDetails = ["action": .string(action.rawValue), "remote": .string(request.remote)]
        if let why { details["why"] = .string(why) }
        audit?.record(AuditEvent(.webChange, by: .caller(uid: uid), outcome, details))
    }

    /// The folder view: with a session the folders' paths and the failed files; without,
    /// "Folder 1…" and the failures counted by why, scrubbed of paths.
    static func folderView(_ report: WebFeed.FolderReport, named: Bool) -> WebFeed.FolderReport {
        guard !named else { return report }
        var out = report
        out.folders = report.folders.enumerated().map { i, f in
            var f = f
            f.folder = "Folder \(i + 1)"
            return f
        }
        out.failures = report.failures.map { FailureRow(path: nil, why: PublicView.scrub($0.why), count: $0.count) }
        return out
    }

    /// The value of cookie `name` in a `Cookie` header.
    static func cookie(_ name: String, in header: String?) -> String? {
        guard let header else { return nil }
        for part in header.split(separator: ";") {
            let kv = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if kv.count == 2, kv[0] == name { return String(kv[1]) }
        }
        return nil
    }
}
