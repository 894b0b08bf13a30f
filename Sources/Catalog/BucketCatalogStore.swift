import Bucket
import Logging
import PhotolalaCore

/// The catalog's objects in the user's bucket, through the stage's `BucketSession`: the
/// catalog under `catalogs/{userId}/`, and whether a photo is still under
/// `photos/{userId}/` (each request refuses any key outside its prefix). Snapshots and
/// pointers are always STANDARD. No retries in place: the stage's schedule retries.
package struct BucketCatalogStore: CatalogStore {
    package let userId: String
    let bucket: BucketSession
    let multipartThreshold: Int64
    let partSize: Int64
    /// Told "key uploadId" when a multipart upload of a snapshot starts and nil when it
    /// ends, so one a crash abandoned can be aborted at the next start.
    let journal: @Sendable (String?) async -> Void
    let logger: Logger

    package init(userId: String, bucket: BucketSession, multipartThreshold: Int64, partSize: Int64,
                 journal: @escaping @Sendable (String?) async -> Void, logger: Logger) {
        self.userId = userId
        self.bucket = bucket
        self.multipartThreshold = multipartThreshold
        self.partSize = partSize
        self.journal = journal
        self.logger = logger
    }

    private var catalogs: String { CatalogFormat.prefix(userId: userId) }
    private var photos: String { CatalogFormat.photoPrefix(userId: userId) }

    package func readPointer() async throws(S3Error) -> StoredPointer? {
        let key = CatalogFormat.pointerKey(userId: userId)
        return try await bucket.perform(under: catalogs) { bucket throws(S3Error) in try await bucket.getObjectIfPresent(key: key) }
            .map { StoredPointer(body: $0.bytes, etag: $0.etag) }
    }

    package func downloadSnapshot(md5: String, to path: String) async throws(S3Error) -> String? {
        let key = CatalogFormat.snapshotKey(userId: userId, md5: md5)
        let sink: DownloadSink
        do {
            sink = try DownloadSink(path: path)
        } catch {
            throw S3Error(kind: .localFile, code: "LocalFileError", message: "\(error)", operation: "GetObject", key: key)
        }
        // Its size first: the read's deadline grows with it (85 MB on a slow uplink).
        guard let info = try await bucket.perform(under: catalogs, { bucket throws(S3Error) in try await bucket.headObject(key: key) })
        else { return nil }
        do {
            _ = try await bucket.perform(under: catalogs) { bucket throws(S3Error) in
                try await bucket.getObject(key: key, expectedBytes: info.size) { buffer in try sink.write(buffer) }
            }
        } catch where error.kind == .notFound {
            return nil
        }
        return sink.finish().md5
    }

    package func uploadSnapshot(path: String, md5: String, size: Int64) async throws(S3Error) {
        let key = CatalogFormat.snapshotKey(userId: userId, md5: md5)
        let plan = PartPlan(fileSize: size, multipartThreshold: multipartThreshold, configuredPartSize: partSize)
        guard plan.partSize != nil else {
            // Content-MD5 is the snapshot's name: S3 refuses a body that is not those bytes.
            let contentMD5 = S3Client.contentMD5(hex: md5)!
            _ = try await bucket.perform(under: catalogs) { bucket throws(S3Error) in
                try await bucket.putObject(key: key, path: path, contentMD5: contentMD5, contentType: "text/csv")
            }
            return
        }
        let uploadId = try await bucket.perform(under: catalogs) { bucket throws(S3Error) in
            try await bucket.createMultipartUpload(key: key, contentType: "text/csv")
        }
        await journal("\(key) \(uploadId)")
        do {
            var parts: [S3Client.Part] = []
            for number in 1...plan.partCount {
                let range = plan.range(ofPart: number)
                // Each part's Content-MD5 is taken from the file as it is sent.
                let etag = try await bucket.perform(under: catalogs) { bucket throws(S3Error) in
                    try await bucket.uploadPart(key: key, uploadId: uploadId, partNumber: number, path: path,
                                                offset: range.offset, length: range.length)
                }
                parts.append(.init(partNumber: number, etag: etag, size: range.length))
            }
            let done = parts
            _ = try await bucket.perform(under: catalogs) { bucket throws(S3Error) in
                try await bucket.completeMultipartUpload(key: key, uploadId: uploadId, parts: done)
            }
            await journal(nil)
        } catch {
            await abort(key: key, uploadId: uploadId)
            throw error
        }
        logger.debug("catalog snapshot uploaded in parts", metadata: ["parts": "\(plan.partCount)", "bytes": "\(size)"])
    }

    /// Discards an upload that will never complete (best effort: S3's lifecycle rule for
    /// incomplete uploads is the backstop).
    func abort(key: String, uploadId: String) async {
        do {
            try await bucket.perform(under: catalogs) { bucket throws(S3Error) in
                try await bucket.abortMultipartUpload(key: key, uploadId: uploadId)
            }
            await journal(nil)
        } catch {
            logger.notice("could not abort an unfinished catalog upload; S3 discards it by its lifecycle rule",
                          metadata: ["key": "\(key)", "error": "\(error)"])
        }
    }

    package func writePointer(md5: String, condition: PointerCondition) async throws(S3Error) -> String {
        let key = CatalogFormat.pointerKey(userId: userId)
        let body = CatalogFormat.pointerBody(md5: md5)
        return try await bucket.perform(under: catalogs) { bucket throws(S3Error) in
            switch condition {
            case .ifMatch(let etag):
                try await bucket.putObject(key: key, bytes: body, contentType: "text/plain", ifMatch: etag)
            case .ifNoneMatch:
                try await bucket.putObject(key: key, bytes: body, contentType: "text/plain", ifNoneMatch: true)
            case .unconditional:
                try await bucket.putObject(key: key, bytes: body, contentType: "text/plain")
            }
        }
    }

    package func photoExists(md5: String) async throws(S3Error) -> Bool {
        let key = CatalogFormat.photoKey(userId: userId, md5: md5)
        do {
            return try await bucket.perform(under: photos) { bucket throws(S3Error) in try await bucket.headObject(key: key) } != nil
        } catch where error.kind == .forbidden {
            return true
        }
    }

    package func listPhotos(_ page: @Sendable ([String]) throws -> Void) async throws(S3Error) {
        let prefix = photos
        var token: String?
        repeat {
            let from = token
            let listed = try await bucket.perform(under: prefix) { bucket throws(S3Error) in
                try await bucket.listObjects(prefix: prefix, continuationToken: from)
            }
            let md5s = listed.objects.compactMap { object -> String? in
                guard object.key.hasSuffix(".dat") else { return nil }
                return String(object.key.dropFirst(prefix.count).dropLast(4))
            }
            do {
                try page(md5s)
            } catch {
                throw S3Error(kind: .localFile, code: "LocalFileError", message: "\(error)", operation: "ListObjectsV2", key: prefix)
            }
            token = listed.nextContinuationToken
        } while token != nil
    }
}
