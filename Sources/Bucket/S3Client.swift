import AsyncHTTPClient
import Foundation
import Logging

/// The S3 operations photolalad needs (PUT, HEAD, multipart, ListParts, abort), signed
/// with SigV4 and streamed from files in fixed-size chunks, so memory stays flat
/// whatever the file size.
///
/// A value type: copies share one `HTTPClient` (and its connection pool). Credentials
/// come with every call because the credentials service owns refreshing them; the clock
/// offset is a plain property the uploader updates after a `clockSkew` error.
///
/// Every failure is an `S3Error` whose `kind` says what to do next.
package struct S3Client: Sendable {
    package static let maximumSinglePutSize: Int64 = 5 << 30
    package static let maximumPartCount = 10_000

    package var configuration: Configuration
    /// Seconds added to the local clock when signing (S3's time minus ours); set it from
    /// `S3Error.clockOffset(localNow:)` after a `clockSkew` error.
    package var clockOffset: TimeInterval
    package let httpClient: HTTPClient
    package var logger: Logger
    let signer: SigV4Signer
    let target: Target

    /// Uses `httpClient`, which the caller keeps and shuts down.
    package init(configuration: Configuration, httpClient: HTTPClient, clockOffset: TimeInterval = 0,
                logger: Logger = Logger(label: "photolalad.s3")) throws(S3Error) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.clockOffset = clockOffset
        self.logger = logger
        signer = SigV4Signer(region: configuration.region, service: "s3")
        target = try Target(configuration)
    }

    /// Creates its own `HTTPClient` (see `makeHTTPClient`); call `shutdown()` when done.
    package init(configuration: Configuration, clockOffset: TimeInterval = 0,
                logger: Logger = Logger(label: "photolalad.s3")) throws(S3Error) {
        try self.init(configuration: configuration, httpClient: Self.makeHTTPClient(), clockOffset: clockOffset,
                      logger: logger)
    }

    /// An HTTP/1.1 client fit for S3: 10 s to connect, 60 s of silence tolerated while
    /// waiting for an answer or while the peer stops reading, redirects not followed (a
    /// streamed body cannot be replayed, and S3 only redirects on a wrong region).
    /// Connections are kept alive and reused for 60 s. A connection that cannot be made
    /// (refused, TLS refused) fails its requests at once instead of being retried by the
    /// pool until their deadline: the uploader's own backoff retries, and status says why.
    /// TLS trust comes with each request (`Configuration.trust`).
    package static func makeHTTPClient(connectTimeout: TimeInterval = 10, idleTimeout: TimeInterval = 60,
                                      maximumConnectionsPerHost: Int = 8, connectProxy: ConnectProxy? = nil) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Int64(connectTimeout * 1000)),
                           read: .milliseconds(Int64(idleTimeout * 1000)),
                           write: .milliseconds(Int64(idleTimeout * 1000))),
            connectionPool: .init(idleTimeout: .seconds(60),
                                  concurrentHTTP1ConnectionsPerHostSoftLimit: maximumConnectionsPerHost),
            decompression: .disabled)
        configuration.httpVersion = .http1Only
        configuration.connectionPool.retryConnectionEstablishment = false
        if let connectProxy { configuration.proxy = .server(host: connectProxy.host, port: connectProxy.port) }
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// Shuts the underlying `HTTPClient` down; only for a client made by `init(configuration:)`.
    package func shutdown() async throws {
        try await httpClient.shutdown()
    }

    /// True when bodies go over plain HTTP and must therefore be signed with their real SHA-256.
    package var signsPayload: Bool { !target.usesTLS }

    /// The deadline for a request carrying `bodyBytes`: the minimum plus the time the body
    /// takes at the minimum throughput.
    package func requestTimeout(bodyBytes: Int64) -> TimeInterval {
        configuration.minimumRequestTimeout + Double(max(0, bodyBytes)) / configuration.minimumThroughput
    }
}
