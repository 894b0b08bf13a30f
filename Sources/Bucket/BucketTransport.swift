import AsyncHTTPClient
import Foundation
import Logging
import Synchronization

/// What a `BucketSession` opens a `Bucket` with, for one attempt: S3 over HTTP in the
/// daemon (`S3Transport`), `BucketTesting.InMemoryBucket` in tests.
package protocol BucketTransport: Sendable {
    /// The bucket of `grant`, signed with its credentials and with the local clock plus
    /// `clockOffset`, refusing any key outside `keyPrefix`.
    func bucket(grant: BucketGrant, keyPrefix: String, clockOffset: TimeInterval,
                trust: TLSTrust) throws(S3Error) -> any Bucket
    /// Releases what `bucket` made (connections); called once, when the session ends.
    func shutdown() async
}

/// S3 over HTTP: one `HTTPClient` (and its connection pool) per session, made at the
/// first request — never in `init`, so building a stage costs nothing — and shut down
/// with the session.
package final class S3Transport: BucketTransport {
    private let maximumConnectionsPerHost: Int
    private let connectProxy: ConnectProxy?
    private let logger: Logger
    /// The pool once made; `closed` once the session ended (no new pool after that).
    private let state = Mutex<(client: HTTPClient?, closed: Bool)>((nil, false))

    /// - Parameters:
    ///   - maximumConnectionsPerHost: the pool's size (the uploader's concurrency and more).
    ///   - connectProxy: a debug build's `PHOTOLALAD_DEBUG_S3_PROXY`, for the uploads only.
    package init(maximumConnectionsPerHost: Int, connectProxy: ConnectProxy? = nil, logger: Logger) {
        self.maximumConnectionsPerHost = maximumConnectionsPerHost
        self.connectProxy = connectProxy
        self.logger = logger
    }

    package func bucket(grant: BucketGrant, keyPrefix: String, clockOffset: TimeInterval,
                        trust: TLSTrust) throws(S3Error) -> any Bucket {
        let http = try httpClient()
        let s3 = try S3Client(configuration: grant.configuration(keyPrefix: keyPrefix, trust: trust), httpClient: http,
                              clockOffset: clockOffset, logger: logger)
        return S3Bucket(client: s3, credentials: grant.credentials)
    }

    package func shutdown() async {
        let http = state.withLock { state in
            defer { state = (nil, true) }
            return state.client
        }
        try? await http?.shutdown()
    }

    private func httpClient() throws(S3Error) -> HTTPClient {
        let http: HTTPClient? = state.withLock { state in
            if state.closed { return nil }
            if let client = state.client { return client }
            let made = S3Client.makeHTTPClient(maximumConnectionsPerHost: maximumConnectionsPerHost,
                                               connectProxy: connectProxy)
            state.client = made
            return made
        }
        guard let http else { throw S3Error(kind: .cancelled, code: "Cancelled", message: "the stage is stopping") }
        return http
    }
}
