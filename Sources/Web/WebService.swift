import Control
import Foundation
import Logging
import PhotolalaCore
import ServiceLifecycle

/// The status page's lifetime as a service of the daemon's group (web.md): serves
/// `[web] listen`, moves when a reload changes it, and stops with the daemon. An address
/// it cannot use never stops the backup: status `web.lastError` says why and it is tried
/// again every minute. The sessions outlive a listener (and a restart: `WebSessions`).
package actor WebService: Service {
    package struct Options: Sendable, Equatable {
        package var listen: Settings.ListenAddress?
        package var listenSet: Bool
        package var hosts: [String]
        package var tlsCert: String?
        package var tlsKey: String?
        package var allowPlainHTTP: Bool
        package var sessionTTL: Duration

        package init(_ settings: Settings) {
            let web = settings.web
            listen = web.listen
            listenSet = web.listenSet
            hosts = web.hosts
            tlsCert = web.tlsCert
            tlsKey = web.tlsKey
            allowPlainHTTP = web.allowPlainHTTP
            sessionTTL = web.sessionTTL
        }

        var tlsFiles: (cert: String, key: String)? {
            guard let tlsCert, let tlsKey else { return nil }
            return (tlsCert, tlsKey)
        }
    }

    package enum LinkRefusal: Error, CustomStringConvertible {
        case off
        case notServed(String)
        package var description: String {
            switch self {
            case .off: "the status page is off ([web] listen = \"off\"): set an address such as \"127.0.0.1:8770\" and reload"
            case .notServed(let why): "the status page is not served (\(why)); fix [web] listen and reload, then ask for a link again"
            }
        }
    }

    private var options: Options
    private var server: WebServer?
    private var served: Options?
    private var failure: String?
    package nonisolated let sessions: WebSessions
    package nonisolated let feed: WebFeed
    private let backend: any WebBackend
    private let audit: (any AuditRecorder)?
    private let logger: Logger
    private let limits: WebServer.Limits
    private let wake = ChangeFeed()
    private let retryInterval: Duration

    package init(options: Options, stateDir: String?, backend: any WebBackend, audit: (any AuditRecorder)?, logger: Logger,
                 limits: WebServer.Limits = WebServer.Limits(), retryInterval: Duration = .seconds(60)) {
        self.options = options
        self.backend = backend
        self.audit = audit
        self.logger = logger
        self.limits = limits
        self.retryInterval = retryInterval
        sessions = WebSessions(stateDir: stateDir, ttl: options.sessionTTL, logger: logger)
        feed = WebFeed(backend: backend)
    }

    /// New settings (reload): the listener moves at once when anything it serves with changed.
    package func apply(_ new: Options) async {
        guard new != options else { return }
        options = new
        await sessions.setTTL(new.sessionTTL)
        wake.changed()
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let since = self.wake.generation
                await self.listen()
                let retry: ContinuousClock.Instant? = await self.failure == nil ? nil : .now + self.retryInterval
                await self.wake.wait(since: since, until: retry)
            }
        }
        await server?.stop()
        server = nil
    }

    private func listen() async {
        if server != nil, served == options { return }
        if let old = server {
            await old.stop()
            server = nil
            served = nil
            logger.notice("status page on \(old.address) closed")
        }
        guard let address = options.listen else {
            failure = nil
            return
        }
        let options = self.options
        let (sessions, feed, backend, audit, logger) = (self.sessions, self.feed, self.backend, self.audit, self.logger)
        let localAddresses = WebServer.localAddresses()
        do {
            let bound = try await WebServer.start(address: address, tlsFiles: options.tlsFiles, limits: limits) { port in
                let check = HostCheck(listen: address, boundPort: port, tls: options.tlsFiles != nil, hosts: options.hosts,
                                      localAddresses: localAddresses)
                return WebAPI(options: .init(hostCheck: check, tls: options.tlsFiles != nil, sessionTTL: options.sessionTTL, port: port),
                              sessions: sessions, feed: feed, backend: backend, audit: audit, logger: logger)
            }
            server = bound
            served = options
            if failure != nil { logger.notice("the status page is served again on \(address)") }
            failure = nil
            logger.notice("serving the status page", metadata: ["url": "\(Self.url(address: address, port: bound.port, tls: bound.tls, hosts: options.hosts))"])
            if !address.isLoopback && !bound.tls {
                logger.warning("the status page is plain HTTP beyond loopback (allow_plain_http): its session cookie can be read on the network; set [web] tls_cert and tls_key")
            }
        } catch {
            if failure != error.description { logger.error("status page: \(error.description) (tried again every \(retryInterval))") }
            failure = error.description
        }
    }

    /// status `web`.
    package func status() async -> DaemonStatus.Web {
        let url = server.map { Self.url(address: $0.address, port: $0.port, tls: $0.tls, hosts: options.hosts) }
        return DaemonStatus.Web(listen: options.listen?.description, url: url, tls: server?.tls ?? (options.tlsFiles != nil),
                                plainHTTPBeyondLoopback: server.map { !$0.address.isLoopback && !$0.tls } ?? false,
                                lastError: failure, listenSet: options.listenSet, sessions: await sessions.liveSessions())
    }

    /// The port served now (tests listen on port 0).
    package var boundPort: Int? { server?.port }

    /// `photolalactl web --link`: a one-time link for `uid`.
    package func link(uid: UInt32) async throws(LinkRefusal) -> WebLinkView {
        guard options.listen != nil else { throw .off }
        guard let server else { throw .notServed(failure ?? "starting") }
        let page = Self.url(address: server.address, port: server.port, tls: server.tls, hosts: options.hosts)
        let (token, expires) = await sessions.issueLink(uid: uid)
        return WebLinkView(url: page + "session?token=" + token, expiresAt: Timestamp.string(expires), page: page)
    }

    package func revoke() async {
        await sessions.revokeAll()
    }

    /// The page's address: the listen address, or for one on every address the first of
    /// `[web] hosts` (else this machine's first address beyond loopback).
    static func url(address: Settings.ListenAddress, port: Int, tls: Bool, hosts: [String]) -> String {
        var host = address.host
        if host == "0.0.0.0" || host == "::" {
            if let first = hosts.first {
                let (name, namedPort) = HostCheck.split(first)
                if let namedPort { return "\(tls ? "https" : "http")://\(name.contains(":") ? "[\(name)]" : name):\(namedPort)/" }
                host = name
            } else {
                host = WebServer.localAddresses().first { !$0.hasPrefix("127.") && $0 != "::1" && !$0.hasPrefix("fe80") } ?? "127.0.0.1"
            }
        }
        let shown = host.contains(":") ? "[\(host)]" : host
        return "\(tls ? "https" : "http")://\(shown):\(port)/"
    }
}
