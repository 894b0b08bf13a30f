import Foundation
import PhotolalaCore
import Queue

/// Writing an attempt's outcome to the queue, and the stage's part of the status.
extension UploaderService {
    /// Records an outcome, retrying while the database refuses (a full disk): until it
    /// is recorded the object stays claimed by this worker, so it is neither lost nor
    /// sent twice; a stop in the meantime leaves it `uploading`, which the next start resets.
    func record(_ outcome: UploadOutcome, for job: UploadJob) async {
        var schedule = policy.recording
        while true {
            do {
                try recordOnce(outcome, for: job)
                break
            } catch {
                if schedule.failures == 0 {
                    logger.error("cannot record an upload result (retrying until the database can be written): \(error)", metadata: ["path": "\(job.path)"])
                }
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                try? await Task.sleep(for: Backoff.duration(schedule.fail(random: 0)))
            }
        }
        Task { await signal.notify() }
    }

    private func recordOnce(_ outcome: UploadOutcome, for job: UploadJob) throws {
        switch outcome {
        case let .uploaded(sent, etag, key):
            let files = try database.recordUpload(md5: job.md5, key: key, size: job.size, etag: etag, storageClass: options.storageClass)
            DaemonCounter.uploadedObjects.increment()
            DaemonCounter.uploadedBytes.increment(by: job.size)
            DaemonCounter.uploadedFiles.increment(by: Int64(files))
            logger.info("uploaded", metadata: ["path": "\(job.path)", "bytes": "\(sent)", "md5": "\(job.md5)"])
        case .alreadyPresent:
            let files = try database.markUploaded(md5: job.md5)
            DaemonCounter.deduplicatedObjects.increment()
            DaemonCounter.uploadedFiles.increment(by: Int64(files))
            logger.info("already backed up", metadata: ["path": "\(job.path)", "md5": "\(job.md5)"])
        case let .retry(why, count, after, _):
            let attempts = job.attempts + (count ? 1 : 0)
            let delay = after ?? policy.objectDelay(attempts: attempts, random: .random(in: 0..<1))
            try database.releaseObject(md5: job.md5, retryAt: Date().addingTimeInterval(delay), error: why, countAttempt: count)
            logger.warning("upload will be retried", metadata: ["path": "\(job.path)", "in": "\(Int(delay.rounded()))s", "why": "\(why)"])
        case .failed(let why):
            try database.failObject(md5: job.md5, reason: why)
            DaemonCounter.failedObjects.increment()
            logger.error("upload failed", metadata: ["path": "\(job.path)", "why": "\(why)"])
        case .sourceChanged(let gone):
            // The queue puts a changed file back to be hashed and wakes ingest itself.
            try database.sourceChanged(job: job, gone: gone)
            logger.info(gone ? "file vanished before upload" : "file changed before upload; it will be read again",
                        metadata: ["path": "\(job.path)"])
        case .cancelled:
            try database.releaseObject(md5: job.md5, retryAt: nil, error: nil, countAttempt: false)
        }
    }

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
