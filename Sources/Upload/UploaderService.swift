import AsyncHTTPClient
import Backend
import Bucket
import Credentials
import Foundation
import Digests
import Logging
import PhotolalaCore
import Queue
import ServiceLifecycle

/// The upload stage: takes objects whose files are hashed (`queued`) and moves them to
/// `uploaded`. `upload.concurrency` workers claim objects from the queue (one transaction
/// each, so no object is taken twice) and send each with `ObjectUploader`, signed with
/// credentials the account service keeps fresh. Transient failures go back to the queue
/// with `UploadPolicy`'s backoff; only a rejection S3 will repeat makes a file `failed`.
/// Woken by the queue's `readyToUpload` signal and by the gate (pause, sign-in).
package actor UploaderService: Service {
    package struct Options: Sendable, Equatable {
        package var concurrency: Int
        package var multipartThreshold: Int64
        package var partSize: Int64
        package var storageClass: String
        package var bandwidthLimit: Int64?
        /// `watch.follow_symlinks`: a queued path may be a link, read through it as hashed.
        package var followSymlinks: Bool
        /// What an https endpoint's certificate is verified against: the system's store
        /// plus `tls.ca_file`, read now (so a reload re-reads it).
        package var trust: TLSTrust

        /// The one mapping from settings, at start and on reload.
        package init(_ settings: Settings) {
            let s = settings.upload
            concurrency = s.concurrency
            multipartThreshold = s.multipartThreshold
            partSize = s.partSize
            storageClass = s.storageClass
            bandwidthLimit = s.bandwidthLimit
            followSymlinks = settings.watch.followSymlinks
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    let database: QueueDatabase
    let account: AccountService
    let gate: any StageGate
    let logger: Logger
    var options: Options
    let policy: UploadPolicy
    let bandwidth: TokenBucket
    package nonisolated let meter = RateMeter()
    let http: HTTPClient
    let signal = WakeSignal()
    var clockOffset: TimeInterval = 0
    var inFlight: [Int: Task<UploadOutcome, Never>] = [:]
    /// S3 failing as a whole: every worker waits (see `OutageBackoff`).
    var outage: OutageBackoff
    /// SHA-256s the hasher took for signed payloads (plain-HTTP endpoints): see `PayloadDigests`.
    let payloadDigests: PayloadDigests
    /// Whether objects are already there: the inventory, a HEAD, or wait for the first listing.
    let presence: PresenceCheck
    /// The user uploads are for, and when the workers first wanted to upload for them.
    var waitingForListing: (userId: String, since: Date)?
    /// The last mode, so a change is logged once.
    var presenceMode: PresenceCheck.Mode?

    package init(database: QueueDatabase, account: AccountService, gate: any StageGate, options: Options, logger: Logger,
                policy: UploadPolicy = UploadPolicy(), payloadDigests: PayloadDigests = PayloadDigests(),
                presence: PresenceCheck = PresenceCheck()) {
        self.database = database
        self.account = account
        self.gate = gate
        self.options = options
        self.logger = logger
        self.policy = policy
        self.payloadDigests = payloadDigests
        self.presence = presence
        outage = policy.outage
        bandwidth = TokenBucket(bytesPerSecond: options.bandwidthLimit)
        let proxy = ConnectProxy.debugOverride
        if let proxy {
            logger.warning("debug build: every S3 connection goes through the proxy \(proxy.host):\(proxy.port) (\(ConnectProxy.debugVariable))")
        }
        http = S3Client.makeHTTPClient(maximumConnectionsPerHost: max(8, options.concurrency * 2), connectProxy: proxy)
    }

    package func apply(_ new: Options) async {
        let grew = new.concurrency != options.concurrency
        options = new
        await bandwidth.setRate(new.bandwidthLimit)
        if grew { logger.notice("upload.concurrency takes effect at the next restart") }
    }

    /// Stop every upload under way now (credentials dropped, shutdown).
    func cancelInFlight() {
        for (_, task) in inFlight { task.cancel() }
    }

    package func run() async throws {
        // Uploads a crash interrupted go back to the queue (their multipart state stays).
        try database.resetInterruptedUploads()
        let gateChanges = gate.changes()
        let drops = account.credentialDrops.changes()
        let ready = database.signals.readyToUpload
        let listed = database.signals.inventoryChanged
        // The gate, new work and the inventory's listings fold into the workers' one "look
        // again"; dropped credentials stop what is on the wire (logout, Apple ID revoked, a
        // backend pause).
        let relays = [
            Task { [signal] in
                for await _ in gateChanges { await signal.notify() }
            },
            Task {
                for await _ in drops.dropFirst() { self.cancelInFlight() }
            },
            Task { [signal] in
                await ready.onEveryNotify { await signal.notify() }
            },
            // The first listing after a sign-in ended (or failed): waiting workers go on.
            Task { [signal] in
                await listed.onEveryNotify { await signal.notify() }
            },
        ]
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<options.concurrency {
                    group.addTask { await self.work(worker) }
                }
            }
        } onGracefulShutdown: { [signal] in
            // Stop what is on the wire now: a big video's upload lasts minutes, far past the
            // stop budget, and the workers waited for it until ServiceLifecycle gave up with
            // a fatal error ("Cancellation took longer than allowed") — the daemon crashed
            // on `systemctl stop`. A multipart upload resumes from its recorded parts.
            Task {
                await self.cancelInFlight()
                await signal.notify()
            }
        }
        for relay in relays { relay.cancel() }
        try? await http.shutdown()
    }

    private func work(_ worker: Int) async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let since = await signal.current
            if await gate.blockReason() != nil {
                await signal.wait(since: since, until: nil as Date?)
                continue
            }
            let mode = await currentPresenceMode()
            if case .wait(let until) = mode {
                await signal.wait(since: since, until: until)
                continue
            }
            let admission = outage.admit(now: Date())
            if case .wait(let until) = admission {
                await signal.wait(since: since, until: until)
                continue
            }
            let probe = admission == .probe
            let job: UploadJob?
            do {
                job = try database.claimObject()
            } catch {
                outage.inconclusive(probe: probe)
                logger.error("cannot read the queue: \(error)")
                await signal.wait(since: since, until: Date().addingTimeInterval(5))
                continue
            }
            guard let job else {
                outage.inconclusive(probe: probe)
                let due = try? database.nextDueTime()
                await signal.wait(since: since, until: due)
                continue
            }
            let epoch = outage.epoch
            let task = Task { await self.upload(job, mode: mode) }
            inFlight[worker] = task
            // The upload is an unstructured task (so it can be cancelled by itself): a
            // cancelled worker must pass its cancellation on rather than wait it out.
            let outcome = await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
            inFlight[worker] = nil
            noteForOutage(outcome, startedIn: epoch, probe: probe)
            await record(outcome, for: job)
        }
    }

    /// Feeds an attempt's outcome to the shared backoff: S3 answering ends an outage, a
    /// transient S3 failure starts or prolongs one.
    private func noteForOutage(_ outcome: UploadOutcome, startedIn epoch: Int, probe: Bool) {
        switch outcome {
        case .uploaded, .alreadyPresent:
            if outage.isActive {
                logger.notice("S3 answers again after \(outage.failures) failed attempts: uploads resume")
            }
            outage.succeeded()
        case let .retry(why, _, _, true):
            let before = outage.failures
            outage.failed(why, startedIn: epoch, now: Date(), random: .random(in: 0..<1))
            if before == 0, outage.isActive { DaemonCounter.s3Outages.increment() }
            if outage.failures != before, let until = outage.until {
                logger.warning("S3 is failing: every upload waits before trying again", metadata: [
                    "failures": "\(outage.failures)", "next": "\(Int(max(0, until.timeIntervalSinceNow).rounded()))s", "why": "\(why)"])
            }
        default:
            outage.inconclusive(probe: probe)
        }
    }

    // MARK: one object

    /// How presence is found out now (`PresenceCheck`): the listing of the signed-in
    /// user's photos, as the inventory stage left it in the queue.
    private func currentPresenceMode() async -> PresenceCheck.Mode {
        guard let userId = await account.userId else { return .head }
        if waitingForListing?.userId != userId { waitingForListing = (userId, Date()) }
        let listing = try? database.inventoryListing(prefix: "photos/\(userId)/")
        let mode = presence.mode(listing: listing, waitingSince: waitingForListing?.since ?? Date(), now: Date())
        if mode != presenceMode {
            switch mode {
            case .inventory: logger.info("uploads ask the inventory whether each object is already in the bucket")
            case .head: logger.notice("no listing of the bucket to trust (\(listing?.lastError ?? "none yet")): uploads ask S3 about each object with a HEAD")
            case .wait: if presenceMode == nil || presenceMode == .inventory { logger.info("uploads wait for the first listing of the bucket") }
            }
            presenceMode = mode
        }
        return mode
    }

    private func upload(_ job: UploadJob, mode: PresenceCheck.Mode) async -> UploadOutcome {
        var credentialRetries = 0
        var skewRetries = 0
        while true {
            if Task.isCancelled { return .cancelled }
            let grant: STSGrant
            do {
                grant = try await account.credentials()
            } catch {
                return .cancelled
            }
            guard let userId = await account.userId else { return .cancelled }
            let result: Result<UploadOutcome, S3Error>
            do throws(S3Error) {
                result = try await uploader(for: job, grant: grant, userId: userId)
                    .upload(job, mode: mode, freshCredentials: credentialRetries > 0)
            } catch {
                result = .failure(error)
            }
            guard case .failure(let error) = result else { return (try? result.get()) ?? .cancelled }
            let action = policy.action(for: error, credentialRetries: credentialRetries, skewRetries: skewRetries)
            Self.count(error, action)
            switch action {
            case .refreshCredentials:
                credentialRetries += 1
                await account.rejectedByS3(grant)
            case .correctClock:
                skewRetries += 1
                if let offset = error.clockOffset() {
                    clockOffset = offset
                    logger.warning("the clock differs from S3's by \(Int(offset))s; signing with S3's time")
                }
            case .cancelled:
                return .cancelled
            case let .retry(why, countAttempt, after, outage):
                return .retry(why, countAttempt: countAttempt, after: after, outage: outage)
            case .sourceChanged:
                return .sourceChanged(gone: false)
            case .recheckSource(let why):
                return SourceCheck(followSymlinks: options.followSymlinks).recheck(job, unreadable: why)
            case .restartMultipart:
                try? database.recordMultipart(md5: job.md5, uploadId: nil, partSize: nil)
                return .retry("the multipart upload expired at S3; starting it again", countAttempt: false, after: 0)
            case .alreadyPresent:
                return .alreadyPresent
            case .failed(let why):
                return .failed(why)
            }
        }
    }

    /// The design's "credential expiration misses" (S3 refused credentials that had
    /// expired) and every attempt tried again, by the kind of error.
    static func count(_ error: S3Error, _ action: UploadPolicy.Action) {
        if error.kind == .credentialsExpired { DaemonCounter.credentialExpirationMisses.increment() }
        switch action {
        case .refreshCredentials, .correctClock, .retry, .restartMultipart: DaemonCounter.uploadRetries.increment(error.kind.rawValue)
        case .cancelled, .sourceChanged, .recheckSource, .alreadyPresent, .failed: break
        }
    }

    /// An uploader for one attempt: the client is made per grant (the bucket, region and
    /// endpoint come with the credentials) over the pool's shared connections.
    private func uploader(for job: UploadJob, grant: STSGrant, userId: String) throws(S3Error) -> ObjectUploader {
        let prefix = "photos/\(userId)/"
        let client = try S3Client(configuration: grant.s3Configuration(keyPrefix: prefix, trust: options.trust),
                                  httpClient: http, clockOffset: clockOffset, logger: logger)
        let credentials = grant.s3Credentials
        if payloadDigests.wanted != client.signsPayload { payloadDigests.setWanted(client.signsPayload) }
        return ObjectUploader(client: client, credentials: credentials, key: prefix + job.md5 + ".dat", options: options,
                              policy: policy, database: database, bandwidth: bandwidth, meter: meter,
                              payloadDigests: payloadDigests, presence: presence, logger: logger)
    }
}
