import Bucket
import Foundation
import Digests
import Logging
import PhotolalaCore
import Queue

/// Sends one object: first whether it is already there (the inventory, or a HEAD where
/// there is no listing to trust: `PresenceCheck`), then one PUT up to the threshold or a
/// resumable multipart upload above it (`+Multipart`). Made for one attempt with one set
/// of credentials; what an error means is `UploadPolicy`'s call.
struct ObjectUploader: Sendable {
    let client: S3Client
    let credentials: S3Credentials
    let key: String
    let options: UploaderService.Options
    let policy: UploadPolicy
    let database: QueueDatabase
    let bandwidth: TokenBucket
    let meter: RateMeter
    let payloadDigests: PayloadDigests
    let presence: PresenceCheck
    let logger: Logger

    var source: SourceCheck { SourceCheck(followSymlinks: options.followSymlinks) }

    /// - Parameters:
    ///   - mode: how presence is found out for now (the inventory or a HEAD).
    ///   - freshCredentials: this attempt already refreshed its credentials once.
    func upload(_ job: UploadJob, mode: PresenceCheck.Mode, freshCredentials: Bool) async -> Result<UploadOutcome, S3Error> {
        let known = mode == .inventory ? ((try? database.inventoryPresence(key: key)) ?? .unknown) : .unknown
        var step = presence.step(mode: mode, presence: known, size: job.size, overwrite: job.overwrite)
        if step == .head {
            do {
                let info = try await retrying { () async throws(S3Error) in try await client.headObject(key: key, credentials: credentials) }
                step = presence.afterHead(listedSize: info?.size, size: job.size)
            } catch {
                switch policy.headVerdict(error, freshCredentials: freshCredentials) {
                case .unknown: step = .put(ifNoneMatch: true)
                case .staleCredentials:
                    var stale = error
                    stale.kind = .credentialsExpired
                    return .failure(stale)
                case .fail: return .failure(error)
                }
            }
        }
        guard case .put(let ifNoneMatch) = step else { return .success(.alreadyPresent) }
        let plan = PartPlan(fileSize: job.size, multipartThreshold: options.multipartThreshold, configuredPartSize: options.partSize)
        do {
            if plan.partSize == nil && job.uploadId == nil {
                return .success(try await single(job, ifNoneMatch: ifNoneMatch))
            }
            return .success(try await multipart(job, plan: plan))
        } catch {
            return .failure(error)
        }
    }

    func metadata(_ type: MediaType) -> [String: String] { ["original-format": type.originalFormat] }

    var storageClass: String? { options.storageClass == "STANDARD" ? nil : options.storageClass }

    private func single(_ job: UploadJob, ifNoneMatch: Bool) async throws(S3Error) -> UploadOutcome {
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
            return source.outcome(error, job)
        }
        guard check.1 else { return source.recheck(job, unreadable: nil) }
        guard let contentMD5 = check.0?.contentMD5 ?? S3Client.contentMD5(hex: job.md5) else {
            return .failed("the queued MD5 is malformed")
        }
        let type = MediaType.forPath(job.path)
        await bandwidth.take(Int(job.size))
        func put(_ condition: Bool) async throws(S3Error) -> String {
            try await retrying { () async throws(S3Error) in
                try await client.putObject(key: key, path: job.path, contentMD5: contentMD5, contentType: type.contentType,
                                           metadata: metadata(type), storageClass: storageClass,
                                           payloadSHA256: check.0?.sha256Hex, expected: job.identity, followSymlinks: follow,
                                           ifNoneMatch: condition, credentials: credentials)
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

    /// One S3 request, tried again in place while `policy` says so (see
    /// `UploadPolicy.retriesRequest`); only then does the object go back to the queue.
    func retrying<T>(_ request: () async throws(S3Error) -> T) async throws(S3Error) -> T {
        var retries = 0
        while true {
            do {
                return try await request()
            } catch where policy.retriesRequest(error, retriesSoFar: retries) {
                retries += 1
                let delay = policy.requestDelay(retry: retries, random: .random(in: 0..<1))
                try? await Task.sleep(for: Backoff.duration(delay))
                if Task.isCancelled {
                    throw S3Error(kind: .cancelled, code: "Cancelled", message: "the upload was interrupted",
                                  operation: error.operation, key: error.key)
                }
            }
        }
    }
}
