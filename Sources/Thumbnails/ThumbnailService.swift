/// Thumbnails: the stage after the upload: each uploaded photo's PTM-256 thumbnail into the
/// bucket and its catalog columns into the `photo` row, for the catalog stage to publish.
import Bucket
import Digests
import Foundation
import Logging
import PhotolalaCore
import Previews
import Queue
import ServiceLifecycle

/// What makes a photo's thumbnail and reads its date: the sandboxed worker process in the
/// daemon (`PreviewWorkerSlot`), a fake in a test of the stage.
package protocol PreviewRenderer: Sendable {
    /// Reads the photo behind `fd` (kept open by the caller until this returns).
    func read(fd: Int32, _ request: WorkerMessage.Request) async -> PreviewWorkerSlot.Outcome
    /// Ends the read under way now (a stop must not wait for a slow decoder).
    func interrupt() async
    /// Stops the worker (the stage turned off, or stopping).
    func stop() async
}

extension PreviewWorkerSlot: PreviewRenderer {}

/// The thumbnail stage: takes objects `uploaded` with no `photo` row, gives each a
/// `pending` row, and moves it to `ready` (thumbnail in the bucket, columns filled),
/// `skipped` (a format the apps do not show) or `failed` (could not be decoded), one
/// transaction per step. Decoding happens only in sandboxed worker processes
/// (`PreviewRenderer`). Originals come first: while objects wait to be uploaded the
/// stage waits, and its workers run at the lowest CPU and I/O priority.
package actor ThumbnailService: Service, Stage {
    package struct Options: Sendable, Equatable {
        /// `catalog.enabled`: false turns the stage off.
        package var enabled: Bool
        /// Photos read at once (one worker process each): few, a NAS has few cores.
        package var concurrency: Int
        /// `watch.follow_symlinks`: a path may be a link, read through it as hashed.
        package var followSymlinks: Bool
        /// The system's CAs plus `tls.ca_file`, as for the uploads.
        package var trust: TLSTrust

        package init(_ settings: Settings) {
            enabled = settings.catalog.enabled
            concurrency = max(1, min(2, ProcessInfo.processInfo.activeProcessorCount / 2))
            followSymlinks = settings.watch.followSymlinks
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    /// What became of one attempt, recorded in one transaction.
    private enum Step: Equatable {
        case ready(PhotoColumns, takenAt: Int64)
        case skipped(PhotoColumns)
        case failed(PhotoColumns?, String)
        /// Not the photo's fault (S3, credentials, no worker): try again later, uncounted.
        case later(String, after: TimeInterval)
        /// Possibly the photo's fault (a crash, the file in flux): counted, failed at the limit.
        case again(String, after: TimeInterval)
    }

    /// Attempts a photo gets when its worker crashes or its files keep changing.
    private static let attemptLimit = 2

    /// The queue, clock, log, status feed and audit trail (`Stage` reads them through it).
    package nonisolated let context: StageContext
    private let bucket: BucketSession
    private let gate: any StageGate
    private var options: Options
    private let makeRenderer: @Sendable () -> any PreviewRenderer
    private var busy: Set<String> = []
    /// `uploaded` fired since the last pass that gave uploaded objects their rows.
    private var seedWanted = true
    /// A worker is seeding now.
    private var seeding = false
    /// The `uploaded` signal's generation that pass saw.
    private var seededAt: Int?
    private var lastSeed: Date?
    private var retries = Backoff(base: 5, cap: 300, jitter: .equal)
    /// Why no preview worker could start (a decoder library missing, the sandbox refused),
    /// until one does: a status problem, since no photo gets a thumbnail meanwhile.
    private var workerProblem: String?
    private var loop: StageLoop?

    /// - Parameters:
    ///   - bucket: the stage's session.
    ///   - gate: whether uploads (and so thumbnails) may run.
    ///   - renderer: makes one renderer per worker (`PreviewWorkerSlot` in the daemon).
    package init(context: StageContext, bucket: BucketSession, gate: any StageGate, options: Options,
                 renderer: @escaping @Sendable () -> any PreviewRenderer = { PreviewWorkerSlot() }) {
        self.context = context
        self.bucket = bucket
        self.gate = gate
        self.options = options
        makeRenderer = renderer
    }

    package func apply(_ new: Options) async {
        let concurrencyChanged = new.concurrency != options.concurrency
        options = new
        await bucket.apply(trust: new.trust)
        if concurrencyChanged { logger.notice("the number of preview workers takes effect at the next restart") }
        loop?.wake()
    }

    package func run() async throws {
        let uploaded = database.signals.uploaded
        // Uploads give new rows to seed; `retry` puts failed photos back.
        let loop = StageLoop(clock: clock, wakes: [.stream(gate.changes()), .signal(uploaded),
                                                   .signal(database.signals.photosRetried)])
        self.loop = loop
        let renderers = (0..<options.concurrency).map { _ in makeRenderer() }
        await loop.run(workers: renderers.count) { worker in
            await self.step(renderers[worker])
        }
        for renderer in renderers { await renderer.stop() }
        await bucket.shutdown()
    }

    private func step(_ renderer: any PreviewRenderer) async -> StageLoop.Next {
        guard options.enabled else {
            await renderer.stop()
            return .wake
        }
        if await gate.blockReason() != nil { return .wake }
        let now = clock.now()
        // Originals first: a preview never takes a turn from a backup.
        if (try? await database.hasDueObjects(now: now)) ?? false { return .wait(until: now.addingTimeInterval(30)) }
        let job: PhotoJob?
        do {
            try await seedIfWanted(now: now)
            job = try await claim(now: now)
        } catch {
            logger.error("cannot read the queue for thumbnails: \(error)")
            return .wait(until: now.addingTimeInterval(5))
        }
        guard let job else { return .wait(until: try? await database.nextPhotoDueTime(now: now)) }
        let step = await attempt(job, renderer)
        await record(step, for: job)
        busy.remove(job.md5)
        return .now
    }

    /// Gives uploaded objects their `pending` rows: a pass over the object table in
    /// windows (one short transaction each), after uploads happened, at most every 30 s
    /// while there is other work.
    private func seedIfWanted(now: Date) async throws {
        let generation = database.signals.uploaded.generation
        if generation != seededAt { seedWanted = true }
        // One worker seeds; the others go on with the rows there are.
        guard seedWanted, !seeding else { return }
        seeding = true
        defer { seeding = false }
        if let lastSeed, now.timeIntervalSince(lastSeed) < 30, try await !database.duePhotos(excluding: busy, limit: 1, now: now).isEmpty {
            return
        }
        seedWanted = false
        seededAt = generation
        lastSeed = now
        var rowid: Int64 = 0
        while true {
            let step = try await database.seedPhotos(after: rowid, now: now)
            if step.atEnd { break }
            rowid = step.last
        }
    }

    /// The next due photo no other worker has: asked for as many as there are workers,
    /// since the others may claim some while this one reads.
    private func claim(now: Date) async throws -> PhotoJob? {
        while true {
            let due = try await database.duePhotos(excluding: busy, limit: max(1, options.concurrency), now: now)
            guard !due.isEmpty else { return nil }
            if let job = due.first(where: { !busy.contains($0.md5) }) {
                busy.insert(job.md5)
                return job
            }
        }
    }

    // MARK: one photo

    /// One photo: its live file, its head, its thumbnail and date from a renderer, the
    /// thumbnail into the bucket, and the row's next state.
    private func attempt(_ job: PhotoJob, _ renderer: any PreviewRenderer) async -> Step {
        var opened: VerifiedFile?
        for source in job.sources {
            if let file = try? VerifiedFile(path: source.path, expected: source.identity, followSymlinks: options.followSymlinks) {
                opened = file
                break
            }
        }
        guard let file = opened else {
            return .again("no file on the NAS holds these bytes any more", after: 3600)
        }
        let head: (md5: String, format: PhotoFormat)
        do {
            head = try Self.head(of: file)
        } catch {
            return .again("the file could not be read: \(error)", after: 60)
        }
        let columns = PhotoColumns(headMD5: head.md5, size: file.identity.size,
                                   format: head.format.catalogName ?? head.format.rawValue.uppercased())
        guard head.format.catalogName != nil else { return .skipped(columns) }

        guard let userId = await bucket.userId else { return .later("not signed in", after: 30) }
        // The user id exactly as the backend spells it (the apps use the uppercase form).
        let prefix = "thumbnails/\(userId)/"
        let key = prefix + job.md5 + ".jpg"
        let present: Bool?
        do {
            present = try await exists(key: key, prefix: prefix)
        } catch {
            return s3Trouble(error)
        }

        let reply: WorkerMessage.Reply
        switch await read(file, .init(format: head.format, wantThumbnail: present != true), with: renderer) {
        case .unavailable(let why):
            // Said once, not at every retry: the renderer keeps trying (and succeeds once
            // the library is installed again) while the photos wait, uncounted.
            if workerProblem != why { logger.error("thumbnails are off, backups go on: \(why)") }
            workerProblem = why
            return .later("no preview worker: \(why)", after: 30)
        case .crashed(let why):
            workerProblem = nil
            // Killed by our own stop: not the photo's fault.
            if Task.isCancelled { return .later("stopped", after: 0) }
            return .again(why, after: 5)
        case .read(let r):
            if workerProblem != nil { logger.notice("a preview worker started again: thumbnails resume") }
            workerProblem = nil
            reply = r
        }
        if let why = reply.failure { return .failed(columns, why) }
        guard file.isUnchanged else { return .again("the file changed while its preview was made", after: 60) }
        let takenAt = PhotoDate().seconds(original: reply.dateTimeOriginal, offset: reply.offsetTimeOriginal,
                                          modified: file.identity.mtimeSec)
        if present != true {
            guard let jpeg = reply.jpeg else { return .failed(columns, "the decoder made no thumbnail") }
            do {
                let etag = try await bucket.perform(under: prefix) { bucket throws(S3Error) in
                    try await bucket.putObject(key: key, bytes: jpeg, contentType: "image/jpeg", ifNoneMatch: true)
                }
                // The inventory learns it at once instead of at the next listing.
                try? await database.recordStored(key: key, size: Int64(jpeg.count), etag: etag, now: clock.now())
            } catch where error.kind == .preconditionFailed {
                // Another device put one there meanwhile: theirs is kept.
            } catch {
                return s3Trouble(error)
            }
        }
        retries.reset()
        return .ready(columns, takenAt: takenAt)
    }

    /// All the daemon itself reads of a photo (the very file that was hashed), before it
    /// hands the descriptor to the worker: the MD5 of the first 4096 bytes (the whole file
    /// if shorter) and the format from the first bytes (app-catalog.md).
    package static func head(of file: VerifiedFile) throws(VerifiedFile.Failure) -> (md5: String, format: PhotoFormat) {
        var bytes = [UInt8](repeating: 0, count: Int(min(Int64(PhotoFormat.sniffLength), file.size)))
        var failure: VerifiedFile.Failure?
        let got = bytes.withUnsafeMutableBytes { buffer -> Int in
            do throws(VerifiedFile.Failure) {
                return try file.read(filling: buffer, at: 0)
            } catch {
                failure = error
                return 0
            }
        }
        if let failure { throw failure }
        // Shorter than hashed: not that file any more.
        guard got == bytes.count else { throw .changed }
        return (Hex.string(MD5.digest(Array(bytes.prefix(4096)))), PhotoFormat.sniff(bytes))
    }

    /// The renderer's answer; a stop (the task cancelled) interrupts it at once.
    private func read(_ file: VerifiedFile, _ request: WorkerMessage.Request,
                      with renderer: any PreviewRenderer) async -> PreviewWorkerSlot.Outcome {
        await withTaskGroup(of: PreviewWorkerSlot.Outcome?.self) { group in
            group.addTask { await renderer.read(fd: file.descriptor, request) }
            group.addTask {
                // Sleeps until cancelled: by the stop, or below once the read is done.
                try? await Sleep.for(.seconds(86_400 * 365))
                await renderer.interrupt()
                return nil
            }
            var outcome = PreviewWorkerSlot.Outcome.unavailable("stopped")
            while let next = await group.next() {
                if let next { outcome = next }
                group.cancelAll()
            }
            return outcome
        }
    }

    /// "Is this thumbnail already in the bucket?" (a phone may have made it; app-catalog.md
    /// says an existing one is kept). The inventory answers when a complete listing of
    /// `thumbnails/{userId}/` knows; only without one is S3 asked with a HEAD. nil when
    /// nobody can say (HEAD forbidden by a stricter policy): then the upload's
    /// `If-None-Match: *` keeps whatever is there.
    private func exists(key: String, prefix: String) async throws(S3Error) -> Bool? {
        switch try? await database.inventoryPresence(key: key) {
        case .present?: return true
        case .absent?: return false
        case .unknown?, nil: break
        }
        do {
            return try await bucket.perform(under: prefix) { bucket throws(S3Error) in try await bucket.headObject(key: key) } != nil
        } catch where error.kind == .forbidden {
            return nil
        }
    }

    /// What the session handed back (it already refreshed the credentials and corrected
    /// the clock once): the photo waits, uncounted.
    private func s3Trouble(_ error: S3Error) -> Step {
        switch error.kind {
        case .credentialsExpired:
            return .later("S3 refused the credentials; fetching new ones", after: 1)
        case .clockSkew:
            return .later("the clock differs from S3's", after: 1)
        case .cancelled:
            return .later("stopped", after: 0)
        case .unavailable:
            return .later("waiting for credentials", after: 30)
        default:
            return .later("S3: \(error)", after: retries.fail(random: .random(in: 0..<1)))
        }
    }

    private func record(_ step: Step, for job: PhotoJob) async {
        let path = job.sources.first?.path ?? job.md5
        let now = clock.now()
        do {
            switch step {
            case let .ready(columns, takenAt):
                try await database.markPhotoReady(md5: job.md5, columns: columns, takenAt: takenAt, now: now)
                logger.info("thumbnail ready", metadata: ["path": "\(path)", "md5": "\(job.md5)", "format": "\(columns.format)"])
            case .skipped(let columns):
                try await database.markPhotoSkipped(md5: job.md5, columns: columns, now: now)
                logger.debug("no thumbnail for this format", metadata: ["path": "\(path)", "format": "\(columns.format)"])
            case let .failed(columns, why):
                try await database.markPhotoFailed(md5: job.md5, columns: columns, reason: why, now: now)
                logger.notice("no preview: \(why)", metadata: ["path": "\(path)", "md5": "\(job.md5)"])
            case let .later(why, after):
                try await database.postponePhoto(md5: job.md5, until: now.addingTimeInterval(after), error: why, countAttempt: false, now: now)
            case let .again(why, after):
                if job.attempts + 1 >= Self.attemptLimit {
                    try await database.markPhotoFailed(md5: job.md5, columns: nil, reason: why, now: now)
                    logger.notice("no preview: \(why)", metadata: ["path": "\(path)", "md5": "\(job.md5)"])
                } else {
                    try await database.postponePhoto(md5: job.md5, until: now.addingTimeInterval(after), error: why, countAttempt: true, now: now)
                }
            }
        } catch {
            logger.error("cannot record a thumbnail result (it is read again later): \(error)", metadata: ["path": "\(path)"])
        }
    }

    // MARK: status

    /// The stage's part of the status (cli.md's `thumbnails`).
    package func contribute(to s: inout DaemonStatus) async {
        guard let counts = try? await database.photoCounts() else { return }
        s.thumbnails = DaemonStatus.Thumbnails(done: counts.ready, pending: options.enabled ? counts.pending + counts.unseen : 0,
                                               failed: counts.failed)
        if options.enabled, let workerProblem {
            s.problems.append("Thumbnails are off: \(workerProblem). Backups go on; thumbnails resume by themselves once a preview worker can start.")
        }
    }
}
