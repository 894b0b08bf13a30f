import Bucket
import Digests
import Foundation
import PhotolalaCore
import Queue

/// Above `upload.multipart_threshold`: parts read front to back, each with its own
/// Content-MD5, recorded as S3 acknowledges them so a restart resumes (ListParts) instead
/// of starting over; a running MD5 of the whole file must equal the key before completing.
extension ObjectUploader {
    func multipart(_ job: UploadJob, plan: PartPlan) async throws(S3Error) -> UploadOutcome {
        // A resumed upload keeps the part size it started with.
        let partSize = job.partSize ?? plan.partSize ?? options.partSize
        let parts = PartPlan(fileSize: job.size, multipartThreshold: 0, configuredPartSize: partSize)
        let type = MediaType.forPath(job.path)
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
                try await client.createMultipartUpload(key: key, contentType: type.contentType, metadata: metadata(type),
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
            await abort(uploadId: uploadId, md5: job.md5)
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
            let digest: RangeReader.PartDigest
            do {
                let wantSHA = client.signsPayload && !(have?.size == length)
                digest = try await BlockingIO.run { () throws(RangeReader.Failure) in try reader.next(length: length, sha256: wantSHA) }
            } catch {
                await abort(uploadId: uploadId, md5: job.md5)
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
                etag = try await retrying { () async throws(S3Error) in
                    try await client.uploadPart(key: key, uploadId: uploadId, partNumber: number, path: job.path, offset: offset,
                                                length: length, contentMD5: digest.contentMD5, payloadSHA256: digest.sha256Hex,
                                                expected: job.identity, followSymlinks: follow, credentials: credentials)
                }
            } catch where error.kind == .localFile || error.kind == .contentMismatch {
                // The file changed or went away mid-upload: what S3 holds of it is of no use
                // (a deleted file's upload was otherwise left open at S3 for good).
                await abort(uploadId: uploadId, md5: job.md5)
                throw error
            }
            try? database.recordPart(md5: job.md5, part: UploadedPart(partNumber: number, etag: etag, size: length))
            completed.append(S3Client.Part(partNumber: number, etag: etag, size: length))
            meter.add(length)
            sent += length
        }
        let (whole, unchanged) = reader.finish(path: job.path)
        guard unchanged, whole == job.md5 else {
            await abort(uploadId: uploadId, md5: job.md5)
            return .sourceChanged(gone: false)
        }
        _ = try await retrying { () async throws(S3Error) in
            try await client.completeMultipartUpload(key: key, uploadId: uploadId, parts: completed, credentials: credentials)
        }
        return .uploaded(sent: sent, etag: ETag.multipart(partMD5s: partMD5s), key: key)
    }

    /// An upload we abandon is aborted so S3 does not keep (and bill) its parts.
    func abort(uploadId: String, md5: String) async {
        try? await client.abortMultipartUpload(key: key, uploadId: uploadId, credentials: credentials)
        try? database.recordMultipart(md5: md5, uploadId: nil, partSize: nil)
    }
}
