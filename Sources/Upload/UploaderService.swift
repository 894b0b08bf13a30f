import AsyncHTTPClient
import Backend
import Credentials
import Digests
import Foundation
import Hashing
import Logging
import PhotolalaCore
import Queue
import S3
import ServiceLifecycle
import Synchronization

/// The uploader pool: `upload.concurrency` workers claim objects from the queue (one
/// transaction each, so no object is taken twice), check whether S3 already has them, and
/// send them — one PUT up to the threshold, a resumable multipart upload above — signed
/// with credentials the account service keeps fresh. Transient failures go back to the
/// queue with exponential backoff and full jitter; only a rejection S3 will repeat makes
/// a file `failed`.
public actor UploaderService: Service {
    public struct Options: Sendable {
        public var concurrency: Int
        public var multipartThreshold: Int64
        public var partSize: Int64
        public var storageClass: String
        public var bandwidthLimit: Int64?
        /// `watch.follow_symlinks`: a queued path may be a link, read through it as hashed.
        public var followSymlinks: Bool
        public init(_ s: Settings.Upload, followSymlinks: Bool = false) {
            concurrency = s.concurrency
            multipartThreshold = s.multipartThreshold
            partSize = s.partSize
            storageClass = s.storageClass
            bandwidthLimit = s.bandwidthLimit
            self.followSymlinks = followSymlinks
        }
    }

    enum Outcome: Sendable {
        case uploaded(sent: Int64)
        case alreadyPresent
        /// `outage`: S3 failed to answer properly (5xx, throttling, a reset, a time-out),
        /// which makes every worker back off, not just this object.
        case retry(String, countAttempt: Bool, after: TimeInterval?, outage: Bool = false)
        case failed(String)
        case sourceChanged(gone: Bool)
        case cancelled
    }

    let database: QueueDatabase
    let account: AccountService
    let gate: any UploadGate
    let logger: Logger
    var options: Options
    let bucket: TokenBucket
    public nonisolated let meter = RateMeter()
    let http: HTTPClient
    let signal = WakeSignal()
    var clockOffset: TimeInterval = 0
    var inFlight: [Int: Task<Outcome, Never>] = [:]
    var uploadingBytes: [Int: Int64] = [:]
    /// S3 failing as a whole: every worker waits (see `OutageBackoff`).
    var outage = OutageBackoff()
    /// Tells ingest that a file must be hashed again (it changed under the uploader).
    var rehash: @Sendable (String) async -> Void = { _ in }
    private nonisolated let requestCounter = Atomic<Int>(0)

    /// SHA-256s the hasher took for signed payloads (plain-HTTP endpoints): see `PayloadDigests`.
    let payloadDigests: PayloadDigests

    public init(database: QueueDatabase, account: AccountService, gate: any UploadGate, options: Options, logger: Logger,
                payloadDigests: PayloadDigests = PayloadDigests()) {
        self.database = database
        self.payloadDigests = payloadDigests
        self.account = account
        self.gate = gate
        self.options = options
        self.logger = logger
        bucket = TokenBucket(bytesPerSecond: options.bandwidthLimit)
        http = S3Client.makeHTTPClient(maximumConnectionsPerHost: max(8, options.concurrency * 2))
    }

    public func setRehash(_ f: @escaping @Sendable (String) async -> Void) {
        rehash = f
    }

    public func apply(_ new: Options) async {
        let grew = new.concurrency != options.concurrency
        options = new
        await bucket.setRate(new.bandwidthLimit)
        if grew { logger.notice("upload.concurrency takes effect at the next restart") }
    }

    /// New work may be waiting (a hash was recorded, a retry was asked for).
    public nonisolated func poke() {
        Task { await signal.notify() }
    }

    /// Stop every upload under way now (credentials dropped, Apple ID revoked, logout).
    public func cancelInFlight() {
        for (_, task) in inFlight { task.cancel() }
    }

    public var activeUploads: Int { inFlight.count }

    public func run() async throws {
        try database.resetInterruptedUploads()
        let gateChanges = await gate.changes()
        let watcher = Task { [signal] in
            for await _ in gateChanges { await signal.notify() }
        }
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
        watcher.cancel()
        try? await http.shutdown()
    }

    private func work(_ worker: Int) async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let since = await signal.current
            if await gate.blockReason() != nil {
                await signal.wait(since: since, until: nil as Date?)
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
            let task = Task { await self.upload(job) }
            inFlight[worker] = task
            uploadingBytes[worker] = job.size
            // The upload is an unstructured task (so it can be cancelled by itself): a
            // cancelled worker must pass its cancellation on rather than wait it out.
            let outcome = await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
            inFlight[worker] = nil
            uploadingBytes[worker] = nil
            noteForOutage(outcome, startedIn: epoch, probe: probe)
            await record(outcome, for: job)
        }
    }

    /// Feeds an attempt's outcome to the shared backoff: S3 answering ends an outage, a
    /// transient S3 failure starts or prolongs one.
    private func noteForOutage(_ outcome: Outcome, startedIn epoch: Int, probe: Bool) {
        switch outcome {
        case .uploaded, .alreadyPresent:
            if outage.isActive {
                logger.notice("S3 answers again after \(outage.failures) failed attempts: uploads resume")
            }
            outage.succeeded()
        case let .retry(why, _, _, true):
            let before = outage.failures
            outage.failed(why, startedIn: epoch, now: Date(), random: .random(in: 0..<1))
            if outage.failures != before, let until = outage.until {
                logger.warning("S3 is failing: every upload waits before trying again", metadata: [
                    "failures": "\(outage.failures)", "next": "\(Int(max(0, until.timeIntervalSinceNow).rounded()))s", "why": "\(why)"])
            }
        default:
            outage.inconclusive(probe: probe)
        }
    }

    /// Records an outcome, retrying while the database refuses (a full disk): until it
    /// is recorded the object stays claimed by this worker, so it is neither lost nor
    /// sent twice; a stop in the meantime leaves it `uploading`, which the next start resets.
    private func record(_ outcome: Outcome, for job: UploadJob) async {
        var delay = 1.0
        while true {
            do {
                try recordOnce(outcome, for: job)
                break
            } catch {
                if delay == 1 { logger.error("cannot record an upload result (retrying until the database can be written): \(error)", metadata: ["path": "\(job.path)"]) }
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                try? await Task.sleep(for: .seconds(delay))
                delay = min(delay * 2, 30)
            }
        }
        Task { await signal.notify() }
    }

    private func recordOnce(_ outcome: Outcome, for job: UploadJob) throws {
        do {
            switch outcome {
            case .uploaded(let sent):
                try database.markUploaded(md5: job.md5)
                logger.info("uploaded", metadata: ["path": "\(job.path)", "bytes": "\(sent)", "md5": "\(job.md5)"])
            case .alreadyPresent:
                try database.markUploaded(md5: job.md5)
                logger.info("already backed up", metadata: ["path": "\(job.path)", "md5": "\(job.md5)"])
            case let .retry(why, count, after, _):
                let attempts = job.attempts + (count ? 1 : 0)
                let delay = after ?? Self.backoff(attempts: attempts)
                try database.releaseObject(md5: job.md5, retryAt: Date().addingTimeInterval(delay), error: why, countAttempt: count)
                logger.warning("upload will be retried", metadata: ["path": "\(job.path)", "in": "\(Int(delay.rounded()))s", "why": "\(why)"])
            case .failed(let why):
                try database.failObject(md5: job.md5, reason: why)
                logger.error("upload failed", metadata: ["path": "\(job.path)", "why": "\(why)"])
            case .sourceChanged(let gone):
                try database.sourceChanged(job: job, gone: gone)
                logger.info(gone ? "file vanished before upload" : "file changed before upload; it will be read again",
                            metadata: ["path": "\(job.path)"])
                if !gone {
                    let path = job.path
                    let rehash = self.rehash
                    Task { await rehash(path) }
                }
            case .cancelled:
                try database.releaseObject(md5: job.md5, retryAt: nil, error: nil, countAttempt: false)
            }
        }
    }

    /// Exponential with full jitter (AWS's advice), floor 1 s, cap 5 minutes.
    static func backoff(attempts: Int) -> TimeInterval {
        let cap = min(300, 2 * pow(2, Double(min(attempts, 20))))
        return max(1, Double.random(in: 0...cap))
    }

    // MARK: one object

    private func upload(_ job: UploadJob) async -> Outcome {
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
            let outcome = await attempt(job, grant: grant, userId: userId, headBadRequestIsUnknown: credentialRetries > 0)
            switch outcome {
            case .failure(let error):
                switch error.kind {
                case .credentialsExpired where credentialRetries == 0:
                    credentialRetries += 1
                    await account.rejectedByS3(grant)
                    continue
                case .clockSkew where skewRetries == 0:
                    skewRetries += 1
                    if let offset = error.clockOffset() {
                        clockOffset = offset
                        logger.warning("the clock differs from S3's by \(Int(offset))s; signing with S3's time")
                    }
                    continue
                case .cancelled:
                    return .cancelled
                case .transient:
                    // A local database error is not S3's: it does not hold back the other workers.
                    return .retry(error.description, countAttempt: true, after: nil, outage: error.code != "LocalDatabase")
                case .credentialsExpired, .clockSkew:
                    // Refused again with fresh credentials (or a corrected clock): S3 will
                    // refuse the next object too. Without the shared backoff each worker would
                    // fetch new credentials for every object — the suite measured 25 sts-token
                    // calls and 100 S3 requests a second while S3 refused every key.
                    return .retry(error.description, countAttempt: true, after: nil, outage: true)
                case .contentMismatch:
                    return .sourceChanged(gone: false)
                case .localFile:
                    return recheck(job, unreadable: error.description)
                case .notFound where error.code == "NoSuchUpload":
                    try? database.recordMultipart(md5: job.md5, uploadId: nil, partSize: nil)
                    return .retry("the multipart upload expired at S3; starting it again", countAttempt: false, after: 0)
                case .forbidden, .notFound, .permanent:
                    return .failed(error.description)
                }
            case .success(let result):
                return result
            }
        }
    }

    /// - Parameter headBadRequestIsUnknown: a HEAD answer has no body, so S3's
    ///   `ExpiredToken` / `InvalidToken` (400) arrive there as a bare 400. The first one is
    ///   taken for stale credentials (new ones are fetched and the upload tried again); if
    ///   fresh credentials get a bare 400 too, existence is unknown and the upload goes on,
    ///   so the PUT's answer (which has a body with the real code) decides. A HEAD never
    ///   makes a file `failed` by itself: it is only there to save sending bytes.
    private func attempt(_ job: UploadJob, grant: STSGrant, userId: String,
                         headBadRequestIsUnknown: Bool) async -> Result<Outcome, S3Error> {
        let prefix = "photos/\(userId)/"
        let key = prefix + job.md5 + ".dat"
        var configuration = S3Client.Configuration(bucket: grant.bucket, region: grant.region, endpoint: grant.endpoint, requiredKeyPrefix: prefix)
        configuration.chunkSize = 256 << 10
        let client: S3Client
        do {
            client = try S3Client(configuration: configuration, httpClient: http, clockOffset: clockOffset, logger: logger)
        } catch {
            return .failure(error)
        }
        let credentials = S3Credentials(accessKeyId: grant.accessKeyId, secretAccessKey: grant.secretAccessKey,
                                        sessionToken: grant.sessionToken, expiration: grant.expiration)
        if payloadDigests.wanted != client.signsPayload { payloadDigests.setWanted(client.signsPayload) }
        do {
            if let info = try await retrying({ () async throws(S3Error) in try await client.headObject(key: key, credentials: credentials) }),
               info.size == job.size {
                return .success(.alreadyPresent)
            }
        } catch where error.kind == .forbidden {
            // The role may deny HeadObject: existence is unknown, upload.
        } catch where error.kind == .permanent && error.status == 400 && !headBadRequestIsUnknown {
            var stale = error
            stale.kind = .credentialsExpired
            return .failure(stale)
        } catch where error.kind == .permanent {
            // Existence unknown: the upload's own answer says what is wrong, if anything.
        } catch {
            return .failure(error)
        }
        let plan = PartPlan(fileSize: job.size, multipartThreshold: options.multipartThreshold, configuredPartSize: options.partSize)
        let media = MediaType.forPath(job.path)
        let storageClass = options.storageClass == "STANDARD" ? nil : options.storageClass
        do {
            if plan.partSize == nil && job.uploadId == nil {
                return .success(try await single(job, client: client, key: key, media: media, storageClass: storageClass, credentials: credentials))
            }
            return .success(try await multipart(job, plan: plan, client: client, key: key, media: media,
                                                storageClass: storageClass, credentials: credentials))
        } catch {
            return .failure(error)
        }
    }

    private func single(_ job: UploadJob, client: S3Client, key: String, media: MediaType, storageClass: String?,
                        credentials: S3Credentials) async throws(S3Error) -> Outcome {
        let signs = client.signsPayload
        let follow = options.followSymlinks
        // Taken in the hashing pass for exactly this identity: no second read to sign.
        let known = signs ? payloadDigests.take(md5: job.md5, identity: job.identity) : nil
        let check: (RangeReader.PartDigest?, Bool)
        do {
            check = try await BlockingIO.run { () throws(RangeReader.Failure) -> (RangeReader.PartDigest?, Bool) in
                let reader = try RangeReader(path: job.path, expected: job.identity, followSymlinks: follow)
                // Content-MD5 is the MD5 the file was hashed with, so S3 rejects a body that
                // changed since. Over plain HTTP the body's SHA-256 is signed: from the
                // hashing pass when it was taken there, otherwise read once now; the file's
                // identity (device, inode, size, mtime in ns) must be the hashed one before
                // and after.
                guard signs else { return (nil, reader.finish(path: job.path).unchanged) }
                if let known {
                    let digest = RangeReader.PartDigest(md5Hex: job.md5, contentMD5: S3Client.contentMD5(hex: job.md5) ?? "",
                                                        sha256Hex: known)
                    return (digest, reader.finish(path: job.path).unchanged)
                }
                var digest = try reader.next(length: job.size, sha256: true, md5: false)
                digest.contentMD5 = S3Client.contentMD5(hex: job.md5) ?? ""
                return (digest, reader.finish(path: job.path).unchanged)
            }
        } catch {
            return outcome(error, job)
        }
        guard check.1 else { return recheck(job, unreadable: nil) }
        guard let contentMD5 = check.0?.contentMD5 ?? S3Client.contentMD5(hex: job.md5) else {
            return .failed("the queued MD5 is malformed")
        }
        await bucket.take(Int(job.size))
        _ = try await retrying { () async throws(S3Error) in
            try await client.putObject(key: key, path: job.path, contentMD5: contentMD5, contentType: media.contentType,
                                       metadata: ["original-format": media.originalFormat], storageClass: storageClass,
                                       payloadSHA256: check.0?.sha256Hex, expected: job.identity, followSymlinks: follow,
                                       credentials: credentials)
        }
        meter.add(job.size)
        return .uploaded(sent: job.size)
    }

    private func multipart(_ job: UploadJob, plan: PartPlan, client: S3Client, key: String, media: MediaType,
                           storageClass: String?, credentials: S3Credentials) async throws(S3Error) -> Outcome {
        // A resumed upload keeps the part size it started with.
        let partSize = job.partSize ?? plan.partSize ?? options.partSize
        let parts = PartPlan(fileSize: job.size, multipartThreshold: 0, configuredPartSize: partSize)
        var uploadId = job.uploadId
        var existing: [Int: S3Client.Part] = [:]
        if let id = uploadId {
            do {
                let listed = try await retrying { () async throws(S3Error) in try await client.listParts(key: key, uploadId: id, credentials: credentials) }
                for p in listed { existing[p.partNumber] = p }
                logger.info("resuming a multipart upload", metadata: ["path": "\(job.path)", "partsAtS3": "\(existing.count)", "parts": "\(parts.partCount)"])
            } catch where error.kind == .notFound {
                uploadId = nil
                try? database.recordMultipart(md5: job.md5, uploadId: nil, partSize: nil)
            }
        }
        if uploadId == nil {
            let id = try await retrying { () async throws(S3Error) in
                try await client.createMultipartUpload(key: key, contentType: media.contentType,
                                                       metadata: ["original-format": media.originalFormat],
                                                       storageClass: storageClass, credentials: credentials)
            }
            do {
                try database.recordMultipart(md5: job.md5, uploadId: id, partSize: partSize)
            } catch {
                throw S3Error(kind: .transient, code: "LocalDatabase", message: "cannot record the upload id: \(error)")
            }
            uploadId = id
        }
        guard let uploadId else { return .cancelled }
        let reader: RangeReader
        let follow = options.followSymlinks
        do {
            reader = try RangeReader(path: job.path, expected: job.identity, followSymlinks: follow)
        } catch {
            await abort(client, key: key, uploadId: uploadId, md5: job.md5, credentials: credentials)
            return outcome(error, job)
        }
        var completed: [S3Client.Part] = []
        var sent: Int64 = 0
        for number in 1...parts.partCount {
            if Task.isCancelled { return .cancelled }
            let (offset, length) = parts.range(ofPart: number)
            let have = existing[number]
            let digest: RangeReader.PartDigest
            do {
                let wantSHA = client.signsPayload && !(have?.size == length)
                digest = try await BlockingIO.run { () throws(RangeReader.Failure) in try reader.next(length: length, sha256: wantSHA) }
            } catch {
                await abort(client, key: key, uploadId: uploadId, md5: job.md5, credentials: credentials)
                return outcome(error, job)
            }
            if let have, have.size == length, have.etag.lowercased() == digest.md5Hex {
                completed.append(S3Client.Part(partNumber: number, etag: have.etag, size: length))
                continue
            }
            await bucket.take(Int(length))
            let etag: String
            do {
                etag = try await retrying { () async throws(S3Error) in
                    try await client.uploadPart(key: key, uploadId: uploadId, partNumber: number, path: job.path, offset: offset,
                                                length: length, contentMD5: digest.contentMD5, payloadSHA256: digest.sha256Hex,
                                                expected: job.identity, followSymlinks: follow, credentials: credentials)
                }
            } catch where error.kind == .localFile || error.kind == .contentMismatch {
                // The file changed or went away mid-upload: what S3 holds of it is of no use
                // (a deleted file's upload was otherwise left open at S3 for good).
                await abort(client, key: key, uploadId: uploadId, md5: job.md5, credentials: credentials)
                throw error
            }
            try? database.recordPart(md5: job.md5, part: UploadedPart(partNumber: number, etag: etag, size: length))
            completed.append(S3Client.Part(partNumber: number, etag: etag, size: length))
            meter.add(length)
            sent += length
        }
        let (whole, unchanged) = reader.finish(path: job.path)
        guard unchanged, whole == job.md5 else {
            await abort(client, key: key, uploadId: uploadId, md5: job.md5, credentials: credentials)
            return .sourceChanged(gone: false)
        }
        _ = try await retrying { () async throws(S3Error) in
            try await client.completeMultipartUpload(key: key, uploadId: uploadId, parts: completed, credentials: credentials)
        }
        return .uploaded(sent: sent)
    }

    /// One S3 request, tried again up to twice after a short jittered pause when it fails
    /// transiently (503 SlowDown, a reset connection, a timeout), as the AWS SDKs do. Only
    /// when that does not help does the whole object go back to the queue with the queue's
    /// longer, growing backoff: a flaky link costs a second here and there, not minutes,
    /// and a multipart upload is not set back by one unlucky part. An answer that arrived
    /// but could not be read (`MalformedResponse`) is not repeated blindly: the request
    /// may have taken effect, and the object-level retry looks (HEAD, ListParts) first.
    func retrying<T>(_ request: () async throws(S3Error) -> T) async throws(S3Error) -> T {
        var retries = 0
        while true {
            do {
                return try await request()
            } catch where error.kind == .transient && error.code != "MalformedResponse" && retries < Self.requestRetries {
                retries += 1
                let cap = 0.25 * pow(2, Double(retries))   // 0.5 s, then 1 s
                try? await Task.sleep(for: .milliseconds(Int64((0.1 + Double.random(in: 0...cap)) * 1000)))
                if Task.isCancelled {
                    throw S3Error(kind: .cancelled, code: "Cancelled", message: "the upload was interrupted",
                                  operation: error.operation, key: error.key)
                }
            }
        }
    }

    static let requestRetries = 2

    /// An upload we abandon is aborted so S3 does not keep (and bill) its parts.
    private func abort(_ client: S3Client, key: String, uploadId: String, md5: String, credentials: S3Credentials) async {
        try? await client.abortMultipartUpload(key: key, uploadId: uploadId, credentials: credentials)
        try? database.recordMultipart(md5: md5, uploadId: nil, partSize: nil)
    }

    func outcome(_ failure: RangeReader.Failure, _ job: UploadJob) -> Outcome {
        switch failure {
        case .gone: .sourceChanged(gone: true)
        case .changed: recheck(job, unreadable: nil)
        case .unreadable(let why): recheck(job, unreadable: "cannot read the file: \(why)")
        }
    }

    /// What a file that could not be sent as hashed is now. Gone, or no longer a regular
    /// file (a FIFO or a link swapped in): it leaves the queue. Another file than the one
    /// hashed (rewritten, truncated — even while its body was on the wire): it is read
    /// again. Only the very file that was hashed, unreadable (`unreadable` given: EACCES,
    /// EIO), is `failed` — a file an editor is re-saving must not need `photolalactl retry`.
    func recheck(_ job: UploadJob, unreadable why: String?) -> Outcome {
        var st = stat()
        let rc = options.followSymlinks ? stat(job.path, &st) : lstat(job.path, &st)
        if rc != 0 {
            if errno == ENOENT || errno == ENOTDIR { return .sourceChanged(gone: true) }
            return why.map { .failed($0) } ?? .sourceChanged(gone: false)
        }
        if (st.st_mode & S_IFMT) != S_IFREG { return .sourceChanged(gone: true) }
        if FileIdentity(st) != job.identity { return .sourceChanged(gone: false) }
        return why.map { .failed($0) } ?? .sourceChanged(gone: false)
    }

    // MARK: status

    public func contribute(to s: inout DaemonStatus) {
        s.s3 = outage.isActive
            ? DaemonStatus.S3Health(state: .backoff, failures: outage.failures, since: outage.since.map(Timestamp.string),
                                    nextAttemptAt: outage.until.map(Timestamp.string), lastError: outage.lastError)
            : DaemonStatus.S3Health(state: .ok)
        let rate = meter.rate()
        s.queue.uploadRate = rate
        if rate > 0, s.queue.pendingBytes > 0 {
            s.queue.etaSeconds = Double(s.queue.pendingBytes) / rate
        }
    }
}
