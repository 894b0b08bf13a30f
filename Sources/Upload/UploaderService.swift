/// Upload: the uploader pool: claims objects from the queue and sends them to the bucket
/// with fresh credentials, within the bandwidth limit.
import Bucket
import Foundation
import Digests
import Logging
import PhotolalaCore
import Queue
import ServiceLifecycle

/// The upload stage: takes objects whose files are hashed (`queued`) and moves them to
/// `uploaded`. `upload.concurrency` workers claim objects from the queue (one transaction
/// each, so no object is taken twice) and send each with `ObjectUploader` through the
/// stage's `BucketSession`. Transient failures go back to the queue with `UploadPolicy`'s
/// backoff; only a rejection S3 will repeat makes a file `failed`. Woken by the queue's
/// `readyToUpload` and `inventoryChanged` signals, by the gate (pause, sign-in) and by the
/// bandwidth timetable: it follows the `BandwidthFeed`'s rate slot by slot (uploads in
/// flight included), and a timetable's `0` slot holds new uploads until it ends.
package actor UploaderService: Service, Stage {
    package struct Options: Sendable, Equatable {
        package var concurrency: Int
        package var multipartThreshold: Int64
        package var partSize: Int64
        package var storageClass: String
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
            followSymlinks = settings.watch.followSymlinks
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    /// The queue, clock, log, status feed and audit trail (`Stage` reads them through it).
    package nonisolated let context: StageContext
    private let bucket: BucketSession
    private let gate: any StageGate
    private var options: Options
    private let policy: UploadPolicy
    private let bandwidth: TokenBucket
    /// `upload.bandwidth_limit` in force now (its timetable's slot, or the single rate).
    private let rates: BandwidthFeed
    private let meter = RateMeter()
    /// SHA-256s the hasher took for signed payloads (plain-HTTP endpoints): see `PayloadDigests`.
    private let payloadDigests: PayloadDigests
    /// Whether objects are already there: the inventory, a HEAD, or wait for the first listing.
    private let presence: PresenceCheck
    /// S3 failing as a whole: every worker waits (see `OutageBackoff`).
    private var outage: OutageBackoff
    /// The user uploads are for, and when the workers first wanted to upload for them.
    private var waitingForListing: (userId: String, since: Date)?
    /// The last mode, so a change is logged once.
    private var presenceMode: PresenceCheck.Mode?
    /// The running loop, to wake the other workers when an outcome changes what they wait for.
    private var loop: StageLoop?

    /// - Parameters:
    ///   - bucket: the stage's session (its own pool of `max(8, 2 × concurrency)` connections).
    ///   - gate: whether uploads may run (the user's pause, the account).
    ///   - rates: the rate the daemon's bandwidth schedule publishes (none: no limit).
    package init(context: StageContext, bucket: BucketSession, gate: any StageGate, options: Options, policy: UploadPolicy = UploadPolicy(),
                 payloadDigests: PayloadDigests = PayloadDigests(), presence: PresenceCheck = PresenceCheck(),
                 rates: BandwidthFeed = BandwidthFeed()) {
        self.context = context
        self.bucket = bucket
        self.gate = gate
        self.options = options
        self.policy = policy
        self.payloadDigests = payloadDigests
        self.presence = presence
        outage = policy.outage
        self.rates = rates
        bandwidth = TokenBucket(bytesPerSecond: Self.tokenRate(rates.current))
    }

    /// What the token bucket spends at: a timetable's `0` holds new uploads in `step` and
    /// stops those in flight (`uploadUnlessDropped`), so the bucket itself is left unlimited.
    private static func tokenRate(_ current: BandwidthFeed.Current) -> Int64? {
        current.isPaused ? nil : current.rate.bytesPerSecond
    }

    /// A timetable's `0` slot: no new upload begins until it ends.
    private static func holds(_ current: BandwidthFeed.Current) -> Bool {
        current.scheduled && current.isPaused
    }

    package func apply(_ new: Options) async {
        let grew = new.concurrency != options.concurrency
        options = new
        await bucket.apply(trust: new.trust)
        if grew { logger.notice("upload.concurrency takes effect at the next restart") }
    }

    package func run() async throws {
        // Uploads a crash interrupted go back to the queue (their multipart state stays).
        try await database.resetInterruptedUploads(now: clock.now())
        // The gate, new work and the inventory's listings (the first one after a sign-in
        // ending, or failing, lets waiting workers go on) make the workers look again.
        let loop = StageLoop(clock: clock, wakes: [.stream(gate.changes()), .signal(database.signals.readyToUpload),
                                                   .signal(database.signals.inventoryChanged)])
        self.loop = loop
        let updates = rates.updates()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.follow(updates, loop: loop) }
            // A stop cancels what is on the wire at once: a big video's upload lasts minutes,
            // far past the stop budget. A multipart upload resumes from its recorded parts.
            await loop.run(workers: options.concurrency) { _ in await self.step() }
            group.cancelAll()
        }
        await bucket.shutdown()
    }

    /// Each new rate at once, for the uploads in flight too; a slot that ends a `0` wakes
    /// the workers.
    private func follow(_ updates: AsyncStream<BandwidthFeed.Current>, loop: StageLoop) async {
        for await current in updates {
            await bandwidth.setRate(Self.tokenRate(current))
            loop.wake()
        }
    }

    /// One object, or the reason to wait.
    private func step() async -> StageLoop.Next {
        if await gate.blockReason() != nil || Self.holds(rates.current) { return .wake }
        let mode = await currentPresenceMode()
        if case .wait(let until) = mode { return .wait(until: until) }
        let now = clock.now()
        let admission = outage.admit(now: now)
        if case .wait(let until) = admission { return .wait(until: until) }
        let probe = admission == .probe
        let job: UploadJob?
        do {
            job = try await database.claimObject(now: now)
        } catch {
            outage.inconclusive(probe: probe)
            logger.error("cannot read the queue: \(error)")
            return .wait(until: now.addingTimeInterval(5))
        }
        guard let job else {
            outage.inconclusive(probe: probe)
            // Nothing to send: the bodies' buffers kept for the next upload go (4 MB).
            ChunkBuffers.shared.drop()
            return .wait(until: try? await database.nextDueTime(now: now))
        }
        let epoch = outage.epoch
        let outcome = await uploadUnlessDropped(job, mode: mode)
        noteForOutage(outcome, startedIn: epoch, probe: probe)
        await record(outcome, for: job)
        return .now
    }

    /// The upload, stopped as soon as the credentials in hand are dropped (logout, Apple
    /// ID revoked, a backend pause): what is on the wire must not go on with them.
    private func uploadUnlessDropped(_ job: UploadJob, mode: PresenceCheck.Mode) async -> UploadOutcome {
        let drops = bucket.credentialDrops.changes()
        let slots = rates.updates()
        return await withTaskGroup(of: UploadOutcome?.self) { group in
            group.addTask { await self.upload(job, mode: mode) }
            group.addTask {
                // The first element is the subscription's own; the next one is a drop.
                for await _ in drops.dropFirst() { return nil }
                return nil
            }
            group.addTask {
                // A timetable's `0` slot stops what is on the wire too (config.md: in force
                // within a second, in-flight uploads included): the object goes back to the
                // queue, a multipart upload keeping its recorded parts.
                for await current in slots where Self.holds(current) { return nil }
                return nil
            }
            var outcome = UploadOutcome.cancelled
            while let next = await group.next() {
                if let next { outcome = next }
                group.cancelAll()
            }
            return outcome
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
            let now = clock.now()
            outage.failed(why, startedIn: epoch, now: now, random: .random(in: 0..<1))
            if before == 0, outage.isActive { DaemonCounter.s3Outages.increment() }
            if outage.failures != before, let until = outage.until {
                logger.warning("S3 is failing: every upload waits before trying again", metadata: [
                    "failures": "\(outage.failures)", "next": "\(Int(max(0, until.timeIntervalSince(now)).rounded()))s", "why": "\(why)"])
            }
        default:
            outage.inconclusive(probe: probe)
        }
    }

    // MARK: one object

    /// How presence is found out now (`PresenceCheck`): the listing of the signed-in
    /// user's photos, as the inventory stage left it in the queue.
    private func currentPresenceMode() async -> PresenceCheck.Mode {
        guard let userId = await bucket.userId else { return .head }
        let now = clock.now()
        if waitingForListing?.userId != userId { waitingForListing = (userId, now) }
        let listing = try? await database.inventoryListing(prefix: "photos/\(userId)/")
        let mode = presence.mode(listing: listing, waitingSince: waitingForListing?.since ?? now, now: now)
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
        guard let userId = await bucket.userId else { return .cancelled }
        let uploader = ObjectUploader(bucket: bucket, keyPrefix: "photos/\(userId)/", md5: job.md5, options: options,
                                      policy: policy, database: database, bandwidth: bandwidth, meter: meter,
                                      payloadDigests: payloadDigests, presence: presence, logger: logger)
        do throws(S3Error) {
            return try await uploader.upload(job, mode: mode)
        } catch {
            // The session already refreshed the credentials and corrected the clock once
            // for the request that failed: what comes back is for the object's own retry.
            let action = policy.action(for: error)
            Self.count(error, action)
            switch action {
            case .cancelled:
                return .cancelled
            case let .retry(why, countAttempt, after, outage):
                return .retry(why, countAttempt: countAttempt, after: after, outage: outage)
            case .sourceChanged:
                return .sourceChanged(gone: false)
            case .recheckSource(let why):
                return SourceCheck(followSymlinks: options.followSymlinks).recheck(job, unreadable: why)
            case .restartMultipart:
                try? await database.recordMultipart(md5: job.md5, uploadId: nil, partSize: nil)
                return .retry("the multipart upload expired at S3; starting it again", countAttempt: false, after: 0)
            case .alreadyPresent:
                return .alreadyPresent
            case .failed(let why):
                return .failed(why)
            }
        }
    }

    /// Every attempt tried again, by the kind of error, and the design's "credential
    /// expiration misses" (S3 refused credentials that had expired).
    private static func count(_ error: S3Error, _ action: UploadPolicy.Action) {
        if error.kind == .credentialsExpired { DaemonCounter.credentialExpirationMisses.increment() }
        switch action {
        case .retry, .restartMultipart: DaemonCounter.uploadRetries.increment(error.kind.rawValue)
        case .cancelled, .sourceChanged, .recheckSource, .alreadyPresent, .failed: break
        }
    }

    // MARK: recording

    /// Records an outcome, retrying while the database refuses (a full disk): until it
    /// is recorded the object stays claimed by this worker, so it is neither lost nor
    /// sent twice; a stop in the meantime leaves it `uploading`, which the next start resets.
    private func record(_ outcome: UploadOutcome, for job: UploadJob) async {
        var schedule = policy.recording
        while true {
            do {
                try await recordOnce(outcome, for: job)
                break
            } catch {
                if schedule.failures == 0 {
                    logger.error("cannot record an upload result (retrying until the database can be written): \(error)", metadata: ["path": "\(job.path)"])
                }
                if Task.isCancelled { break }
                do { try await clock.sleep(seconds: schedule.fail(random: 0)) } catch { break }
            }
        }
        // An outcome can end an outage or free an object the others wait for.
        loop?.wake()
    }

    private func recordOnce(_ outcome: UploadOutcome, for job: UploadJob) async throws {
        let now = clock.now()
        switch outcome {
        case let .uploaded(sent, etag, key):
            let files = try await database.recordUpload(md5: job.md5, key: key, size: job.size, etag: etag,
                                                  storageClass: options.storageClass, now: now)
            DaemonCounter.uploadedObjects.increment()
            DaemonCounter.uploadedBytes.increment(by: job.size)
            DaemonCounter.uploadedFiles.increment(by: Int64(files))
            logger.info("uploaded", metadata: ["path": "\(job.path)", "bytes": "\(sent)", "md5": "\(job.md5)"])
        case .alreadyPresent:
            let files = try await database.markUploaded(md5: job.md5, now: now)
            DaemonCounter.deduplicatedObjects.increment()
            DaemonCounter.uploadedFiles.increment(by: Int64(files))
            logger.info("already backed up", metadata: ["path": "\(job.path)", "md5": "\(job.md5)"])
        case let .retry(why, count, after, _):
            let attempts = job.attempts + (count ? 1 : 0)
            let delay = after ?? policy.objectDelay(attempts: attempts, random: .random(in: 0..<1))
            try await database.releaseObject(md5: job.md5, retryAt: now.addingTimeInterval(delay), error: why, countAttempt: count, now: now)
            logger.warning("upload will be retried", metadata: ["path": "\(job.path)", "in": "\(Int(delay.rounded()))s", "why": "\(why)"])
        case .failed(let why):
            try await database.failObject(md5: job.md5, reason: why, now: now)
            DaemonCounter.failedObjects.increment()
            logger.error("upload failed", metadata: ["path": "\(job.path)", "why": "\(why)"])
        case .sourceChanged(let gone):
            // The queue puts a changed file back to be hashed and wakes ingest itself.
            try await database.sourceChanged(job: job, gone: gone, now: now)
            logger.info(gone ? "file vanished before upload" : "file changed before upload; it will be read again",
                        metadata: ["path": "\(job.path)"])
        case .cancelled:
            try await database.releaseObject(md5: job.md5, retryAt: nil, error: nil, countAttempt: false, now: now)
        }
    }

    // MARK: status

    /// The upload stage's part of the status: S3's health, the rate and the time left, and
    /// how it learns whether an object is already there.
    package func contribute(to s: inout DaemonStatus) {
        s.s3 = outage.isActive
            ? DaemonStatus.S3Health(state: .backoff, failures: outage.failures, since: outage.since.map(Timestamp.string),
                                    nextAttemptAt: outage.until.map(Timestamp.string), lastError: outage.lastError)
            : DaemonStatus.S3Health(state: .ok)
        switch presenceMode {
        case .inventory?, nil: s.inventory.uploadsCheck = .inventory
        case .head?: s.inventory.uploadsCheck = .head
        case .wait?: s.inventory.uploadsCheck = .waiting
        }
        let rate = meter.rate()
        s.queue.uploadRate = rate
        if rate > 0, s.queue.pendingBytes > 0 {
            s.queue.etaSeconds = Double(s.queue.pendingBytes) / rate
        }
    }
}
