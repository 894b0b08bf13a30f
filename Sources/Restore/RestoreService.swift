/// Restore: bringing files back from the bucket. The daemon's side (devices, the manifest,
/// objects read back with its credentials and relayed to `photolalactl`) and the command's
/// (the plan, the files written with the rights of whoever runs it).
import AsyncHTTPClient
import Account
import Bucket
import Control
import Foundation
import Logging
import PhotolalaCore
import ServiceLifecycle
import Upload

/// The network side of `photolalactl restore`: lists the account's devices, reads a
/// device's manifest, asks objects back from archive classes and relays objects to the
/// command, read with ranged, parallel GETs under the uploads' retry rule and bandwidth
/// limit. The command never sees a credential: it gets bytes.
package actor RestoreService: Service {
    package struct Options: Sendable, Equatable {
        /// `upload.bandwidth_limit`, applied to what restores read as well.
        package var bandwidthLimit: Int64?
        /// Objects larger than this are read as ranges of `rangeSize`, `parallelRanges` at a time.
        package var rangeThreshold: Int64 = 16 << 20
        package var rangeSize: Int64 = 8 << 20
        package var parallelRanges = 3
        /// Ranges held in memory at once, over every restore (bounds the daemon's memory).
        package var bufferBudget: Int64 = 24 << 20
        /// HEADs in flight when asking where objects stand.
        package var headConcurrency = 16
        /// Days a copy brought back from an archive class stays readable.
        package var thawDays = 7
        /// The system CA store plus `tls.ca_file`, as for every other connection.
        package var trust: TLSTrust

        package init(_ settings: Settings) {
            bandwidthLimit = settings.upload.bandwidthLimit
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    let account: AccountService
    let logger: Logger
    var options: Options
    let policy = UploadPolicy()
    let http: HTTPClient
    let bandwidth: TokenBucket
    let budget: ByteBudget
    package nonisolated let meter = RateMeter()
    var sessions = RestoreSessions()
    var clockOffset: TimeInterval = 0

    package init(account: AccountService, options: Options, logger: Logger) {
        self.account = account
        self.options = options
        self.logger = logger
        bandwidth = TokenBucket(bytesPerSecond: options.bandwidthLimit)
        budget = ByteBudget(capacity: options.bufferBudget)
        http = S3Client.makeHTTPClient(maximumConnectionsPerHost: 32)
    }

    package func apply(_ new: Options) async {
        options = new
        await bandwidth.setRate(new.bandwidthLimit)
    }

    package func run() async throws {
        try? await gracefulShutdown()
        try? await http.shutdown()
    }

    /// Why the bucket cannot be reached now, in words for the command; nil when it can.
    enum Access {
        case ready(grant: STSGrant, userId: String)
        case unavailable(ControlResponse)
    }

    func access() async -> Access {
        guard let userId = await account.userId else {
            return .unavailable(.error(409, "not_signed_in", "this NAS is not signed in: run `photolalactl login` first (with the Apple ID the devices were backed up with)"))
        }
        do {
            return .ready(grant: try await account.credentials(), userId: userId)
        } catch {
            let why: String
            switch error {
            case .signedOut: why = "this NAS is not signed in: run `photolalactl login`"
            case .paused(let reason): why = "the bucket cannot be reached now: \(reason.explanation)"
            case .cancelled: why = "photolalad is stopping"
            }
            return .unavailable(.error(503, "unavailable", why))
        }
    }

    func client(_ grant: STSGrant, prefix: String) throws(S3Error) -> (S3Client, S3Credentials) {
        let client = try S3Client(configuration: grant.s3Configuration(keyPrefix: prefix, trust: options.trust),
                                  httpClient: http, clockOffset: clockOffset, logger: logger)
        return (client, grant.s3Credentials)
    }

    /// The uploader's rule for a failed request: refresh refused credentials once, correct
    /// the clock once, retry transient failures with its backoff; anything else is final.
    /// Returns whether to try again.
    func shouldRetry(_ error: S3Error, grant: STSGrant, attempt: inout Int, refreshed: inout Bool) async -> Bool {
        switch policy.action(for: error, credentialRetries: refreshed ? 1 : 0, skewRetries: 0) {
        case .refreshCredentials:
            refreshed = true
            await account.rejectedByS3(grant)
            return true
        case .correctClock:
            if let offset = error.clockOffset() { clockOffset = offset }
            return true
        case .retry:
            attempt += 1
            guard attempt <= 4 else { return false }
            let wait = policy.objectDelay(attempts: attempt, random: .random(in: 0..<1)) / 4
            try? await Task.sleep(for: .milliseconds(Int64(max(0.2, wait) * 1000)))
            return !Task.isCancelled
        default:
            return false
        }
    }

    // MARK: sessions, for status

    package func report(_ r: RestoreReport) -> String {
        sessions.update(r, now: Date())
    }

    package func contribute(to s: inout DaemonStatus) {
        s.restore = sessions.current(now: Date(), rate: meter.rate())
    }
}
