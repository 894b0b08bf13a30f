import AsyncHTTPClient
import Backend
import Bucket
import Foundation
import Logging
import PhotolalaCore

/// The catalog's objects in the user's bucket, through two clients that refuse any key
/// outside `catalogs/{userId}/` and `photos/{userId}/` respectively (the latter only
/// asked whether a photo is still there). Snapshots and pointers are always STANDARD.
struct S3CatalogStore: CatalogStore {
    let userId: String
    let catalogs: S3Client
    let photos: S3Client
    let credentials: S3Credentials
    let multipartThreshold: Int64
    let partSize: Int64
    /// Told "key uploadId" when a multipart upload of a snapshot starts and nil when it
    /// ends, so one a crash abandoned can be aborted at the next start.
    let journal: @Sendable (String?) -> Void
    let logger: Logger

    init(grant: STSGrant, userId: String, trust: TLSTrust, http: HTTPClient, clockOffset: TimeInterval, multipartThreshold: Int64,
         partSize: Int64, logger: Logger, journal: @escaping @Sendable (String?) -> Void) throws(S3Error) {
        self.userId = userId
        func client(_ prefix: String) throws(S3Error) -> S3Client {
            try S3Client(configuration: grant.s3Configuration(keyPrefix: prefix, trust: trust), httpClient: http,
                         clockOffset: clockOffset, logger: logger)
        }
        catalogs = try client(CatalogFormat.prefix(userId: userId))
        photos = try client(CatalogFormat.photoPrefix(userId: userId))
        credentials = grant.s3Credentials
        self.multipartThreshold = multipartThreshold
        self.partSize = partSize
        self.journal = journal
        self.logger = logger
    }

    func readPointer() async throws(S3Error) -> StoredPointer? {
        try await catalogs.getObjectIfPresent(key: CatalogFormat.pointerKey(userId: userId), credentials: credentials)
            .map { StoredPointer(body: $0.bytes, etag: $0.etag) }
    }

    func downloadSnapshot(md5: String, to path: String) async throws(S3Error) -> String? {
        let key = CatalogFormat.snapshotKey(userId: userId, md5: md5)
        let sink: DownloadSink
        do {
            sink = try DownloadSink(path: path)
        } catch {
            throw S3Error(kind: .localFile, code: "LocalFileError", message: "\(error)", operation: "GetObject", key: key)
        }
        // Its size first: the read's deadline grows with it (85 MB on a slow uplink).
        guard let info = try await catalogs.headObject(key: key, credentials: credentials) else { return nil }
        do {
            _ = try await catalogs.getObject(key: key, expectedBytes: info.size, credentials: credentials) { buffer in
                try sink.write(buffer)
            }
        } catch where error.kind == .notFound {
            return nil
        }
        return sink.finish().md5
    }

    func uploadSnapshot(path: String, md5: String, size: Int64) async throws(S3Error) {
        let key = CatalogFormat.snapshotKey(userId: userId, md5: md5)
        let plan = PartPlan(fileSize: size, multipartThreshold: multipartThreshold, configuredPartSize: partSize)
        guard plan.partSize != nil else {
            // Content-MD5 is the snapshot's name: S3 refuses a body that is not those bytes.
            _ = try await catalogs.putObject(key: key, path: path, contentMD5: S3Client.contentMD5(hex: md5)!,
                                             contentType: "text/csv", credentials: credentials)
            return
        }
        let uploadId = try await catalogs.createMultipartUpload(key: key, contentType: "text/csv", credentials: credentials)
        journal("\(key) \(uploadId)")
        do {
            var parts: [S3Client.Part] = []
            for number in 1...plan.partCount {
                let range = plan.range(ofPart: number)
                // Each part's Content-MD5 is taken from the file as it is sent.
                let etag = try await catalogs.uploadPart(key: key, uploadId: uploadId, partNumber: number, path: path,
                                                         offset: range.offset, length: range.length, credentials: credentials)
                parts.append(.init(partNumber: number, etag: etag, size: range.length))
            }
            _ = try await catalogs.completeMultipartUpload(key: key, uploadId: uploadId, parts: parts, credentials: credentials)
            journal(nil)
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
            try await catalogs.abortMultipartUpload(key: key, uploadId: uploadId, credentials: credentials)
            journal(nil)
        } catch {
            logger.notice("could not abort an unfinished catalog upload; S3 discards it by its lifecycle rule",
                          metadata: ["key": "\(key)", "error": "\(error)"])
        }
    }

    func writePointer(md5: String, condition: PointerCondition) async throws(S3Error) -> String {
        let key = CatalogFormat.pointerKey(userId: userId)
        let body = CatalogFormat.pointerBody(md5: md5)
        switch condition {
        case .ifMatch(let etag):
            return try await catalogs.putObject(key: key, bytes: body, contentType: "text/plain", ifMatch: etag, credentials: credentials)
        case .ifNoneMatch:
            return try await catalogs.putObject(key: key, bytes: body, contentType: "text/plain", ifNoneMatch: true, credentials: credentials)
        case .unconditional:
            return try await catalogs.putObject(key: key, bytes: body, contentType: "text/plain", credentials: credentials)
        }
    }

    func photoExists(md5: String) async throws(S3Error) -> Bool {
        do {
            return try await photos.headObject(key: CatalogFormat.photoKey(userId: userId, md5: md5), credentials: credentials) != nil
        } catch where error.kind == .forbidden {
            return true
        }
    }

    func listPhotos(_ page: @Sendable ([String]) throws -> Void) async throws(S3Error) {
        let prefix = CatalogFormat.photoPrefix(userId: userId)
        var token: String?
        repeat {
            let listed = try await photos.listObjects(prefix: prefix, continuationToken: token, credentials: credentials)
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
