import Foundation
import Logging
import PhotolalaCore

/// The one way a stage reaches the bucket. It owns the transport (the HTTP client, made at
/// the first request and shut down with the stage), asks the `GrantSource` for credentials
/// before each request, keeps the clock skew S3 reported, and performs `BucketRetryRule`:
/// refused credentials are refreshed once, a skewed clock corrected once, transient
/// failures retried within the caller's `BucketBudget`; everything else comes back to
/// the caller as the `S3Error` it was.
///
/// One session per stage: each keeps its own connection pool (a long upload never takes
/// the connection the catalog's pointer needs) and stops with its stage; the grant they
/// sign with is shared through the grant source, so a refresh serves them all.
package actor BucketSession {
    /// Told about each failure the session acts on (a stage's counters); not about the
    /// ones it hands back.
    package typealias RetryObserver = @Sendable (S3Error, BucketRetryRule.Decision) -> Void

    private let grants: any GrantSource
    private let transport: any BucketTransport
    private let clock: any DaemonClock
    private let logger: Logger
    private let rule = BucketRetryRule()
    private var trust: TLSTrust
    /// Seconds added to the local clock when signing (S3's time minus ours).
    private var clockOffset: TimeInterval = 0

    /// A session over `transport` (an `S3Transport` in the daemon, an `InMemoryBucket` in tests).
    package init(grants: any GrantSource, transport: any BucketTransport, trust: TLSTrust = .system,
                 clock: any DaemonClock = SystemClock(), logger: Logger) {
        self.grants = grants
        self.transport = transport
        self.trust = trust
        self.clock = clock
        self.logger = logger
    }

    /// A session to S3 over HTTP with a pool of `connections` per host.
    package init(grants: any GrantSource, connections: Int, connectProxy: ConnectProxy? = nil, trust: TLSTrust,
                 clock: any DaemonClock = SystemClock(), logger: Logger) {
        self.init(grants: grants,
                  transport: S3Transport(maximumConnectionsPerHost: connections, connectProxy: connectProxy, logger: logger),
                  trust: trust, clock: clock, logger: logger)
    }

    /// The signed-in user, as the grant source says; nil when signed out.
    package var userId: String? {
        get async { await grants.userId }
    }

    /// This NAS's device id, once made.
    package var deviceId: String? {
        get async { await grants.deviceId }
    }

    /// The time as S3 keeps it: the local clock corrected by the skew S3 reported (what a
    /// sealed time is written in, so it can be held against an object's `LastModified`).
    package var s3Now: Date { clock.now().addingTimeInterval(clockOffset) }

    /// Changes when the credentials in hand were dropped: stop what is under way.
    package nonisolated var credentialDrops: ChangeFeed { grants.credentialDrops }

    /// `tls.ca_file` re-read on reload: requests from now on check certificates against it.
    package func apply(trust: TLSTrust) {
        self.trust = trust
    }

    /// Runs `operation` against the bucket under `keyPrefix` (any other key is refused)
    /// with the current grant, under the one rule and within `budget`.
    ///
    /// `operation` may run more than once: a streamed read starts its digest over each time.
    /// Throws the last `S3Error`; `.unavailable` when there is no grant (signed out, paused,
    /// stopping); `.cancelled` when the task is cancelled.
    package func perform<T: Sendable>(under keyPrefix: String, budget: BucketBudget = .handBack,
                                      observer: RetryObserver? = nil,
                                      _ operation: @Sendable (any Bucket) async throws(S3Error) -> T) async throws(S3Error) -> T {
        var attempt = BucketRetryRule.Attempt()
        while true {
            if Task.isCancelled { throw S3Error.cancelled() }
            let grant: BucketGrant
            do {
                grant = try await grants.grant()
            } catch {
                throw S3Error.unavailable(error)
            }
            let bucket = try transport.bucket(grant: grant, keyPrefix: keyPrefix, clockOffset: clockOffset, trust: trust)
            let error: S3Error
            do {
                return try await operation(bucket)
            } catch let failure {
                error = failure
            }
            let decision = rule.decide(error, after: attempt, budget: budget, now: clock.now(), random: .random(in: 0..<1))
            if decision != .handBack { observer?(error, decision) }
            switch decision {
            case .handBack:
                throw error
            case .refreshGrant:
                attempt.refreshed = true
                logger.notice("S3 refused the storage credentials; asking for new ones",
                              metadata: ["operation": "\(error.operation ?? "-")", "code": "\(error.code)"])
                await grants.rejected(grant)
            case .correctClock(let offset):
                attempt.corrected = true
                if let offset {
                    clockOffset = offset
                    logger.warning("the clock differs from S3's by \(Int(offset))s; signing with S3's time")
                }
            case .retry(let after):
                attempt.transientRetries += 1
                logger.info("S3 request failed; trying again", metadata: [
                    "why": "\(error)", "try": "\(attempt.transientRetries + 1)"])
                let interrupted: Bool
                do {
                    try await clock.sleep(seconds: after)
                    interrupted = false
                } catch {
                    interrupted = true
                }
                if interrupted { throw S3Error.cancelled(operation: error.operation, key: error.key) }
            }
        }
    }

    /// Closes the transport (its connections); the stage calls it when its `run` ends.
    package func shutdown() async {
        await transport.shutdown()
    }
}

extension S3Error {
    /// The task was cancelled (a stop, credentials dropped).
    package static func cancelled(operation: String? = nil, key: String? = nil) -> S3Error {
        S3Error(kind: .cancelled, code: "Cancelled", message: "cancelled", operation: operation, key: key)
    }

    /// No grant to sign with.
    package static func unavailable(_ why: GrantUnavailable) -> S3Error {
        let message = switch why {
        case .signedOut: "not signed in"
        case .paused(let reason): "paused: \(reason.rawValue)"
        case .cancelled: "stopping"
        }
        return S3Error(kind: .unavailable, code: "NoCredentials", message: message)
    }
}
