import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PhotolalaCore
import Bucket

/// The three kinds of channel (config.md `[notify]`).
package enum ChannelKind: String, Sendable, CaseIterable, Codable {
    case webhook, command, healthcheck
}

/// One attempt's outcome, in words for status, the log and `notify --test`: what the
/// receiver answered, or why there was no answer.
package struct Attempt: Sendable, Equatable {
    package var ok: Bool
    package var answer: String

    package init(ok: Bool, answer: String) {
        self.ok = ok
        self.answer = answer
    }
}

/// What the dead man's switch is told (the Healthchecks.io protocol): a plain ping while
/// backups are healthy, `/fail` with the message while action is needed, `/log` for a test.
package enum HealthSignal: Sendable, Equatable {
    case ok
    case fail(String)
    case log(String)

    var suffix: String {
        switch self {
        case .ok: ""
        case .fail: "/fail"
        case .log: "/log"
        }
    }

    var body: String {
        switch self {
        case .ok: ""
        case .fail(let m), .log(let m): m
        }
    }
}

/// POSTs to a notification URL with the daemon's trust (`tls.ca_file`), no redirects,
/// a deadline, and credentials in the URL (`https://user:pass@ntfy.example/topic`) sent
/// as Basic authorization rather than left in the request line. Its answers name the
/// host, never the URL: a Slack or Healthchecks URL is itself the secret.
package struct NotifyHTTP: Sendable {
    let http: HTTPClient
    let trust: TLSTrust
    var timeout: TimeAmount = .seconds(15)

    package init(http: HTTPClient, trust: TLSTrust) {
        self.http = http
        self.trust = trust
    }

    /// The HTTP client the notify service owns: connection failures are answered at once
    /// (the outbox retries with its own backoff) and redirects are not followed.
    package static func makeClient() -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout = .init(connect: .seconds(10), read: .seconds(15))
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    func post(_ url: String, headers: [WebhookMessage.Header], body: [UInt8]) async -> Attempt {
        guard var parts = URLComponents(string: url), let host = parts.host else {
            return Attempt(ok: false, answer: "not a URL")
        }
        let place = parts.port.map { "\(host):\($0)" } ?? host
        var request = HTTPClientRequest(url: url)
        if let user = parts.user {
            let pair = user + ":" + (parts.password ?? "")
            request.headers.add(name: "Authorization", value: "Basic " + Data(pair.utf8).base64EncodedString())
            parts.user = nil
            parts.password = nil
            request.url = parts.string ?? url
        }
        request.method = .POST
        if parts.scheme?.lowercased() == "https" { request.tlsConfiguration = trust.configuration }
        request.headers.add(name: "User-Agent", value: "photolalad/\(PhotolalaVersion.current)")
        for h in headers { request.headers.add(name: h.name, value: h.value) }
        request.headers.add(name: "Content-Length", value: "\(body.count)")
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await http.execute(request, timeout: timeout)
            // The answer's first bytes say why a receiver refused (ntfy and Slack explain in the body).
            let bytes = (try? await response.body.collect(upTo: 64 << 10)) ?? ByteBuffer()
            let code = Int(response.status.code)
            if (200..<300).contains(code) { return Attempt(ok: true, answer: "HTTP \(code) from \(place)") }
            let said = Self.firstLine(String(decoding: bytes.readableBytesView.prefix(300), as: UTF8.self))
            return Attempt(ok: false, answer: "HTTP \(code) from \(place)" + (said.isEmpty ? "" : ": \(said)"))
        } catch {
            if let why = await trust.explain(error, host: host, port: parts.port ?? (parts.scheme == "https" ? 443 : 80)) {
                return Attempt(ok: false, answer: why)
            }
            return Attempt(ok: false, answer: "\(place): \(Self.describe(error))")
        }
    }

    static func firstLine(_ text: String) -> String {
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return line.trimmingCharacters(in: .whitespaces)
    }

    static func describe(_ error: any Error) -> String {
        if let e = error as? HTTPClientError {
            if e == .deadlineExceeded || e == .readTimeout || e == .connectTimeout { return "no answer within 15 seconds" }
            return "\(e)"
        }
        if let e = error as? NIOConnectionError, let first = e.connectionErrors.first {
            return describe(first.error)
        }
        if let e = error as? IOError { return String(cString: strerror(e.errnoCode)).lowercased() }
        if let e = error as? ChannelError, case .connectTimeout = e { return "no answer within 10 seconds" }
        return "\(error)"
    }
}

/// `notify.webhook`: one POST per event in the configured format.
package struct WebhookSender: Sendable {
    let url: String
    let format: Settings.Notify.WebhookFormat
    let http: NotifyHTTP

    package func send(_ event: NotifyEvent) async -> Attempt {
        let message = WebhookMessage.make(event, format: format)
        return await http.post(url, headers: message.headers, body: message.body)
    }
}

/// `notify.healthcheck_url`: the URL, URL/fail or URL/log, with the message as the body.
package struct HealthcheckSender: Sendable {
    let url: String
    let http: NotifyHTTP

    package func send(_ signal: HealthSignal) async -> Attempt {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        // A query (`?rid=…`) stays after the suffix.
        var target = base + signal.suffix
        if let q = base.firstIndex(of: "?") {
            target = String(base[..<q]) + signal.suffix + String(base[q...])
        }
        return await http.post(target, headers: [.init(name: "Content-Type", value: "text/plain; charset=utf-8")],
                               body: Array(signal.body.utf8.prefix(10_000)))
    }
}
