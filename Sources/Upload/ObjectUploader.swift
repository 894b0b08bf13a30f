import Bucket
import Digests
import Dispatch
import Foundation
import Logging
import PhotolalaCore
import Queue

/// What became of one attempt at one object. The uploader records it in the queue; the
/// outage backoff reads it to tell "S3 answered" from "S3 is failing".
package enum UploadOutcome: Sendable, Equatable {
    /// `etag`: what S3 lists for the bytes sent (see `ETag`), recorded for `verify`.
    case uploaded(sent: Int64, etag: String, key: String)
    case alreadyPresent
    /// `outage`: S3 failed to answer properly (5xx, throttling, a reset, a time-out),
    /// which makes every worker back off, not just this object. `after` nil: the object's
    /// own backoff decides.
    case retry(String, countAttempt: Bool, after: TimeInterval?, outage: Bool = false)
    case failed(String)
    /// The file no longer holds the queued bytes: hashed again (or, gone, dropped).
    case sourceChanged(gone: Bool)
    case cancelled
}

/// Sends one object: first whether it is already there (the inventory, or a HEAD where
/// there is no listing to trust: `PresenceCheck`), then one PUT up to the threshold or a
/// resumable multipart upload above it: parts read front to back, each with its own
/// Content-MD5, recorded as S3 acknowledges them so a restart resumes (ListParts) instead
/// of starting over, and a running MD5 of the whole file that must equal the key before
/// completing. Every request goes through the stage's `BucketSession` with the
/// uploader's budget (`UploadPolicy`: two quick tries in place, then the queue); what a
/// failure means for the object is the caller's call.
struct ObjectUploader: Sendable {
    let bucket: BucketSession
    /// `photos/{userId}/`: every key is refused outside it.
    let keyPrefix: String
    let md5: String
    let options: UploaderService.Options
    let policy: UploadPolicy
    let database: QueueDatabase
    let bandwidth: TokenBucket
    let meter: RateMeter
    let payloadDigests: PayloadDigests
    let presence: PresenceCheck
    let logger: Logger

    var key: String { keyPrefix + md5 + ".dat" }

    private var source: SourceCheck { SourceCheck(followSymlinks: options.followSymlinks) }

    private var storageClass: String? { options.storageClass == "STANDARD" ? nil : options.storageClass }

    private func metadata(_ type: MediaType) -> [String: String] { ["original-format": type.originalFormat] }

    /// - Parameter mode: how presence is found out for now (the inventory or a HEAD).
    func upload(_ job: UploadJob, mode: PresenceCheck.Mode) async throws(S3Error) -> UploadOutcome {
        let key = self.key
        let known = mode == .inventory ? ((try? await database.inventoryPresence(key: key)) ?? .unknown) : .unknown
        var step = presence.step(mode: mode, presence: known, size: job.size, overwrite: job.overwrite)
        if step == .head {
            do {
                let info = try await request { bucket throws(S3Error) in try await bucket.headObject(key: key) }
                step = presence.afterHead(listedSize: info?.size, size: job.size)
            } catch {
                // The session already took a bare 400 for stale credentials once.
                guard policy.headLeavesPresenceUnknown(error) else { throw error }
                step = .put(ifNoneMatch: true)
            }
        }
        guard case .put(let ifNoneMatch) = step else { return .alreadyPresent }
        let signs = try await request { bucket throws(S3Error) in bucket.signsPayload }
        if payloadDigests.wanted != signs { payloadDigests.setWanted(signs) }
        let plan = PartPlan(fileSize: job.size, multipartThreshold: options.multipartThreshold, configuredPartSize: options.partSize)
        if plan.partSize == nil && job.uploadId == nil {
            return try await single(job, ifNoneMatch: ifNoneMatch, signs: signs)
        }
        return try await multipart(job, plan: plan, signs: signs)
    }

    /// One request under the session's one rule and the uploader's budget.
    private func request<T: Sendable>(_ operation: @Sendable (any Bucket) async throws(S3Error) -> T) async throws(S3Error) -> T {
        try await bucket.perform(under: keyPrefix, budget: policy.request, observer: Self.countRetry, operation)
    }

    /// What the session retried in place that the upload counters count.
    private static let countRetry: BucketSession.RetryObserver = { error, decision in
        switch decision {
        case .refreshGrant, .correctClock:
            if error.kind == .credentialsExpired { DaemonCounter.credentialExpirationMisses.increment() }
            DaemonCounter.uploadRetries.increment(error.kind.rawValue)
        case .retry, .handBack:
            break
        }
    }

    private func single(_ job: UploadJob, ifNoneMatch: Bool, signs: Bool) async throws(S3Error) -> UploadOutcome {
        let follow = options.followSymlinks
        // Taken in the hashing pass for exactly this identity: no second read to sign.
        let known = signs ? payloadDigests.take(md5: job.md5, identity: job.identity) : nil
        // Content-MD5 is the MD5 the file was hashed with, so S3 rejects a body that changed
        // since. Over plain HTTP the body's SHA-256 is signed: from the hashing pass when it
        // was taken there, otherwise read once now; the file's identity (device, inode,
        // size, mtime in ns) must be the hashed one before and after.
        let check: (sha256Hex: String?, unchanged: Bool)
        do {
            check = try await Blocking.run { () throws(VerifiedFile.Failure) -> (String?, Bool) in
                let file = try VerifiedFile(path: job.path, expected: job.identity, followSymlinks: follow)
                guard signs else { return (nil, file.isUnchanged) }
                if let known { return (known, file.isUnchanged) }
                let sha256 = try file.digest(length: job.size, md5: false, sha256: true).sha256Hex
                return (sha256, file.isUnchanged)
            }
        } catch {
            return source.outcome(error, job)
        }
        guard check.unchanged else { return source.recheck(job, unreadable: nil) }
        guard let contentMD5 = S3Client.contentMD5(hex: job.md5) else {
            return .failed("the queued MD5 is malformed")
        }
        let type = MediaType.forPath(job.path)
        let (key, metadata, storageClass, payloadSHA256) = (self.key, metadata(type), storageClass, check.sha256Hex)
        await bandwidth.take(Int(job.size))
        func put(_ condition: Bool) async throws(S3Error) -> String {
            try await request { bucket throws(S3Error) in
                try await bucket.putObject(key: key, path: job.path, contentMD5: contentMD5, contentType: type.contentType,
                                           metadata: metadata, storageClass: storageClass, payloadSHA256: payloadSHA256,
                                           expected: job.identity, followSymlinks: follow, ifNoneMatch: condition)
            }
        }
        do {
            _ = try await put(ifNoneMatch)
        } catch where ifNoneMatch && error.status == 501 {
            // A store that does not implement conditional writes: the inventory said the key
            // was free, and the key names the bytes, so an unconditional PUT is just as safe.
            _ = try await put(false)
        }
        meter.add(job.size)
        // A single PUT's ETag is its body's MD5, which the key names: what `verify` expects.
        return .uploaded(sent: job.size, etag: job.md5, key: key)
    }

    private func multipart(_ job: UploadJob, plan: PartPlan, signs: Bool) async throws(S3Error) -> UploadOutcome {
        let key = self.key
        // A resumed upload keeps the part size it started with.
        let partSize = job.partSize ?? plan.partSize ?? options.partSize
        let parts = PartPlan(fileSize: job.size, multipartThreshold: 0, configuredPartSize: partSize)
        let type = MediaType.forPath(job.path)
        var uploadId = job.uploadId
        var existing: [Int: S3Client.Part] = [:]
        if let id = uploadId {
            do {
                let listed = try await request { bucket throws(S3Error) in try await bucket.listParts(key: key, uploadId: id) }
                for p in listed { existing[p.partNumber] = p }
                logger.info("resuming a multipart upload", metadata: ["path": "\(job.path)", "partsAtS3": "\(existing.count)", "parts": "\(parts.partCount)"])
            } catch where error.kind == .notFound {
                uploadId = nil
                try? await database.recordMultipart(md5: job.md5, uploadId: nil, partSize: nil)
            }
        }
        if uploadId == nil {
            let (metadata, storageClass) = (metadata(type), storageClass)
            let id = try await request { bucket throws(S3Error) in
                try await bucket.createMultipartUpload(key: key, contentType: type.contentType, metadata: metadata,
                                                       storageClass: storageClass)
            }
            do {
                try await database.recordMultipart(md5: job.md5, uploadId: id, partSize: partSize)
            } catch {
                throw S3Error(kind: .transient, code: "LocalDatabase", message: "cannot record the upload id: \(error)")
            }
            uploadId = id
        }
        guard let uploadId else { return .cancelled }
        let reader: PartDigests
        let follow = options.followSymlinks
        do {
            reader = PartDigests(try VerifiedFile(path: job.path, expected: job.identity, followSymlinks: follow))
        } catch {
            await abort(uploadId: uploadId)
            return source.outcome(error, job)
        }
        var completed: [S3Client.Part] = []
        // Each part's MD5, from the read that sends it (or that compares it with the part
        // S3 already has): the object's ETag is the MD5 of these, which `verify` checks.
        var partMD5s: [[UInt8]] = []
        partMD5s.reserveCapacity(parts.partCount)
        var sent: Int64 = 0
        for number in 1...parts.partCount {
            if Task.isCancelled { return .cancelled }
            let (offset, length) = parts.range(ofPart: number)
            let have = existing[number]
            let digest: PartDigests.Part
            do {
                let wantSHA = signs && !(have?.size == length)
                digest = try await Blocking.run { () throws(VerifiedFile.Failure) in try reader.next(length: length, sha256: wantSHA) }
            } catch {
                await abort(uploadId: uploadId)
                return source.outcome(error, job)
            }
            partMD5s.append(Hex.bytes(digest.md5Hex) ?? [])
            if let have, have.size == length, have.etag.lowercased() == digest.md5Hex {
                completed.append(S3Client.Part(partNumber: number, etag: have.etag, size: length))
                continue
            }
            await bandwidth.take(Int(length))
            let etag: String
            do {
                etag = try await request { bucket throws(S3Error) in
                    try await bucket.uploadPart(key: key, uploadId: uploadId, partNumber: number, path: job.path, offset: offset,
                                                length: length, contentMD5: digest.contentMD5, payloadSHA256: digest.sha256Hex,
                                                expected: job.identity, followSymlinks: follow)
                }
            } catch where error.kind == .localFile || error.kind == .contentMismatch {
                // The file changed or went away mid-upload: what S3 holds of it is of no use
                // (a deleted file's upload was otherwise left open at S3 for good).
                await abort(uploadId: uploadId)
                throw error
            }
            let part = S3Client.Part(partNumber: number, etag: etag, size: length)
            try? await database.recordPart(md5: job.md5, part: part)
            completed.append(part)
            meter.add(length)
            sent += length
        }
        let (whole, unchanged) = reader.finish()
        guard unchanged, whole == job.md5 else {
            await abort(uploadId: uploadId)
            return .sourceChanged(gone: false)
        }
        let done = completed
        _ = try await request { bucket throws(S3Error) in
            try await bucket.completeMultipartUpload(key: key, uploadId: uploadId, parts: done)
        }
        return .uploaded(sent: sent, etag: ETag.multipart(partMD5s: partMD5s), key: key)
    }

    /// An upload we abandon is aborted so S3 does not keep (and bill) its parts.
    private func abort(uploadId: String) async {
        let key = self.key
        try? await request { bucket throws(S3Error) in try await bucket.abortMultipartUpload(key: key, uploadId: uploadId) }
        try? await database.recordMultipart(md5: md5, uploadId: nil, partSize: nil)
    }
}
