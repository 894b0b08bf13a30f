import Backend
import Bucket
import Foundation
import PhotolalaCore
import Previews
import Queue
import ServiceLifecycle

/// One photo: its live file, its head, its thumbnail and date from a worker, the
/// thumbnail into the bucket, and the row's next state.
extension ThumbnailService {
    /// What became of one attempt, recorded in one transaction.
    enum Step: Equatable {
        case ready(PhotoColumns, takenAt: Int64)
        case skipped(PhotoColumns)
        case failed(PhotoColumns?, String)
        /// Not the photo's fault (S3, credentials, no worker): try again later, uncounted.
        case later(String, after: TimeInterval)
        /// Possibly the photo's fault (a crash, the file in flux): counted, failed at the limit.
        case again(String, after: TimeInterval)
    }

    /// Attempts a photo gets when its worker crashes or its files keep changing.
    static let attemptLimit = 2

    func read(_ job: PhotoJob, with slot: PreviewWorkerSlot) async {
        let step = await attempt(job, slot)
        record(step, for: job)
    }

    private func attempt(_ job: PhotoJob, _ slot: PreviewWorkerSlot) async -> Step {
        var opened: PhotoFile?
        for source in job.sources {
            if let file = try? PhotoFile(path: source.path, expected: source.identity, followSymlinks: options.followSymlinks) {
                opened = file
                break
            }
        }
        guard let file = opened else {
            return .again("no file on the NAS holds these bytes any more", after: 3600)
        }
        let head: (md5: String, format: PhotoFormat)
        do {
            head = try file.head()
        } catch {
            return .again("the file could not be read: \(error)", after: 60)
        }
        let columns = PhotoColumns(headMD5: head.md5, size: file.identity.size,
                                   format: head.format.catalogName ?? head.format.rawValue.uppercased())
        guard head.format.catalogName != nil else { return .skipped(columns) }

        let grant: STSGrant
        do {
            grant = try await account.credentials()
        } catch {
            return .later("waiting for credentials", after: 30)
        }
        guard let userId = await account.userId else { return .later("not signed in", after: 30) }
        // The user id exactly as the backend spells it (the apps use the uppercase form).
        let prefix = "thumbnails/\(userId)/"
        let key = prefix + job.md5 + ".jpg"
        let client: S3Client
        do {
            client = try S3Client(configuration: grant.s3Configuration(keyPrefix: prefix, trust: options.trust),
                                  httpClient: http, clockOffset: clockOffset, logger: logger)
        } catch {
            return .later("S3: \(error)", after: 60)
        }
        let credentials = grant.s3Credentials
        let present: Bool?
        do {
            present = try await ThumbnailPresence(database: database).exists(key: key, client: client, credentials: credentials)
        } catch {
            return s3Trouble(error, grant: grant)
        }

        let reply: WorkerMessage.Reply
        switch await slot.read(fd: file.fd, .init(format: head.format, wantThumbnail: present != true)) {
        case .unavailable(let why):
            // Said once, not at every retry: the slot keeps trying (and succeeds once the
            // library is installed again) while the photos wait, uncounted.
            if workerProblem != why { logger.error("thumbnails are off, backups go on: \(why)") }
            workerProblem = why
            return .later("no preview worker: \(why)", after: 30)
        case .crashed(let why):
            workerProblem = nil
            // Killed by our own stop: not the photo's fault.
            if Task.isShuttingDownGracefully || Task.isCancelled { return .later("stopped", after: 0) }
            return .again(why, after: 5)
        case .read(let r):
            if workerProblem != nil { logger.notice("a preview worker started again: thumbnails resume") }
            workerProblem = nil
            reply = r
        }
        if let why = reply.failure { return .failed(columns, why) }
        guard file.unchanged() else { return .again("the file changed while its preview was made", after: 60) }
        let takenAt = PhotoDate().seconds(original: reply.dateTimeOriginal, offset: reply.offsetTimeOriginal,
                                          modified: file.identity.mtimeSec)
        if present != true {
            guard let jpeg = reply.jpeg else { return .failed(columns, "the decoder made no thumbnail") }
            do {
                let etag = try await client.putObject(key: key, bytes: jpeg, contentType: "image/jpeg", ifNoneMatch: true,
                                                      credentials: credentials)
                ThumbnailPresence(database: database).stored(key: key, size: Int64(jpeg.count), etag: etag)
            } catch where error.kind == .preconditionFailed {
                // Another device put one there meanwhile: theirs is kept.
            } catch {
                return s3Trouble(error, grant: grant)
            }
        }
        retries.reset()
        return .ready(columns, takenAt: takenAt)
    }

    private func s3Trouble(_ error: S3Error, grant: STSGrant) -> Step {
        switch error.kind {
        case .credentialsExpired:
            Task { await account.rejectedByS3(grant) }
            return .later("S3 refused the credentials; fetching new ones", after: 1)
        case .clockSkew:
            if let offset = error.clockOffset() { clockOffset = offset }
            return .later("the clock differs from S3's", after: 1)
        case .cancelled:
            return .later("stopped", after: 0)
        default:
            return .later("S3: \(error)", after: retries.fail(random: .random(in: 0..<1)))
        }
    }

    private func record(_ step: Step, for job: PhotoJob) {
        let path = job.sources.first?.path ?? job.md5
        do {
            switch step {
            case let .ready(columns, takenAt):
                try database.markPhotoReady(md5: job.md5, columns: columns, takenAt: takenAt)
                logger.info("thumbnail ready", metadata: ["path": "\(path)", "md5": "\(job.md5)", "format": "\(columns.format)"])
            case .skipped(let columns):
                try database.markPhotoSkipped(md5: job.md5, columns: columns)
                logger.debug("no thumbnail for this format", metadata: ["path": "\(path)", "format": "\(columns.format)"])
            case let .failed(columns, why):
                try database.markPhotoFailed(md5: job.md5, columns: columns, reason: why)
                logger.notice("no preview: \(why)", metadata: ["path": "\(path)", "md5": "\(job.md5)"])
            case let .later(why, after):
                try database.postponePhoto(md5: job.md5, until: Date().addingTimeInterval(after), error: why, countAttempt: false)
            case let .again(why, after):
                if job.attempts + 1 >= Self.attemptLimit {
                    try database.markPhotoFailed(md5: job.md5, columns: nil, reason: why)
                    logger.notice("no preview: \(why)", metadata: ["path": "\(path)", "md5": "\(job.md5)"])
                } else {
                    try database.postponePhoto(md5: job.md5, until: Date().addingTimeInterval(after), error: why, countAttempt: true)
                }
            }
        } catch {
            logger.error("cannot record a thumbnail result (it is read again later): \(error)", metadata: ["path": "\(path)"])
        }
    }

    /// The stage's part of the status (cli.md's `thumbnails`).
    package func contribute(to s: inout DaemonStatus) {
        guard let counts = try? database.photoCounts() else { return }
        s.thumbnails = DaemonStatus.Thumbnails(done: counts.ready, pending: options.enabled ? counts.pending + counts.unseen : 0,
                                               failed: counts.failed)
        if options.enabled, let workerProblem {
            s.problems.append("Thumbnails are off: \(workerProblem). Backups go on; thumbnails resume by themselves once a preview worker can start.")
        }
    }
}
