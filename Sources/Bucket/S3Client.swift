import AsyncHTTPClient
import Digests
import Foundation
import Logging
import NIOCore
import PhotolalaCore

/// The S3 operations photolalad needs — single objects (PUT from a file range or from
/// memory, HEAD, GET whole or streamed, DELETE), listing, multipart uploads (create, parts,
/// ListParts, complete, abort) and `RestoreObject` — signed with SigV4 and streamed from
/// files in fixed-size chunks, so memory stays flat whatever the file size. What each
/// operation sends is `S3Requests`, what its answer says `S3Response`, the wire
/// `S3Exchange`.
///
/// A value type: copies share one `HTTPClient` (and its connection pool). Credentials
/// come with every call because the grant source owns refreshing them; the clock offset
/// is a plain property the bucket session sets after a `clockSkew` error.
///
/// Every failure is an `S3Error` whose `kind` says what to do next.
package struct S3Client: Sendable {
    package static let maximumSinglePutSize: Int64 = 5 << 30
    package static let maximumPartCount = 10_000

    /// Which bucket, where, and the limits every request is held to.
    package struct Configuration: Sendable, Equatable {
        package var bucket: String
        package var region: String
        /// An S3-compatible endpoint (`http://127.0.0.1:5055`): path-style addressing.
        /// Nil: AWS, virtual-hosted (`https://bucket.s3.region.amazonaws.com/key`).
        package var endpoint: String?
        /// When set, every operation refuses a key outside this prefix
        /// (`photos/<userId>/`): a last guard against writing where the session policy
        /// would deny it anyway, or worse, where it would not.
        package var requiredKeyPrefix: String?
        /// Every request gets at least this long to be sent and answered…
        package var minimumRequestTimeout: TimeInterval = 60
        /// …plus its body size divided by this many bytes per second (a floor on a
        /// slow uplink, not an expectation).
        package var minimumThroughput: Double = 100 * 1024
        /// Bytes read from the file per body chunk.
        package var chunkSize: Int = 256 * 1024
        /// Largest response body read into memory (ListParts pages are the biggest, ~300 KB).
        package var maximumResponseBytes: Int = 16 << 20
        /// What an https endpoint's certificate is verified against (`tls.ca_file`).
        package var trust: TLSTrust = .system

        package init(bucket: String, region: String, endpoint: String? = nil, requiredKeyPrefix: String? = nil) {
            self.bucket = bucket
            self.region = region
            self.endpoint = endpoint
            self.requiredKeyPrefix = requiredKeyPrefix
        }
    }

    /// What HEAD tells about an object.
    package struct ObjectInfo: Sendable, Equatable {
        package var size: Int64
        /// Without the surrounding quotes; the hex MD5 for a single-PUT object.
        package var etag: String
        /// `x-amz-storage-class`; nil means STANDARD (S3 leaves the header out for it).
        package var storageClass: String?
        /// For an object in an archive class: whether a copy was asked back (`RestoreObject`)
        /// and whether it can be read now (`x-amz-restore`).
        package var restore: Restore?
        /// `x-amz-server-side-encryption`: `AES256`, `aws:kms`, `aws:kms:dsse`; nil when S3
        /// says nothing. Under `aws:kms*` the ETag is not the MD5 of the bytes.
        package var serverSideEncryption: String?
        /// `Content-Type` and `x-amz-meta-original-format` as the uploader set them (what an
        /// export names a file by when the catalog does not say).
        package var contentType: String?
        package var originalFormat: String?
        /// `Last-Modified`: when the object was written (the date of a photo no catalog row dates).
        package var lastModified: Date?

        package enum Restore: Sendable, Equatable {
            case inProgress
            case available
        }

        package init(size: Int64, etag: String, storageClass: String? = nil, restore: Restore? = nil,
                     serverSideEncryption: String? = nil, contentType: String? = nil, originalFormat: String? = nil,
                     lastModified: Date? = nil) {
            self.lastModified = lastModified
            self.size = size
            self.etag = etag
            self.storageClass = storageClass
            self.restore = restore
            self.serverSideEncryption = serverSideEncryption
            self.contentType = contentType
            self.originalFormat = originalFormat
        }

        /// SSE-KMS: the ETag is not an MD5, so only reading the bytes back proves them.
        package var etagIsNotMD5: Bool {
            serverSideEncryption?.lowercased().hasPrefix("aws:kms") ?? false
        }

        /// GLACIER and DEEP_ARCHIVE objects cannot be read until a copy is brought back.
        package var needsRestore: Bool {
            guard let storageClass, ["GLACIER", "DEEP_ARCHIVE"].contains(storageClass) else { return false }
            return restore != .available
        }
    }

    /// What a GET answered besides the bytes.
    package struct ObjectHead: Sendable, Equatable {
        /// Without the quotes.
        package var etag: String
        /// Bytes in this answer (the range's length for a ranged GET).
        package var contentLength: Int64
        /// The whole object's size (from `Content-Range` for a ranged GET).
        package var objectSize: Int64
        /// `Content-Type` and `x-amz-meta-original-format`: what the object says it is.
        package var contentType: String?
        package var originalFormat: String?

        package init(etag: String, contentLength: Int64, objectSize: Int64, contentType: String? = nil, originalFormat: String? = nil) {
            self.etag = etag
            self.contentLength = contentLength
            self.objectSize = objectSize
            self.contentType = contentType
            self.originalFormat = originalFormat
        }
    }

    /// One page of a listing, in key order.
    package struct ListPage: Sendable, Equatable {
        package var objects: [ListedObject]
        /// Where the next page starts; nil on the last page.
        package var nextContinuationToken: String?

        package init(objects: [ListedObject], nextContinuationToken: String?) {
            self.objects = objects
            self.nextContinuationToken = nextContinuationToken
        }
    }

    /// One uploaded part of a multipart upload.
    package struct Part: Sendable, Equatable {
        package var partNumber: Int
        /// Without the surrounding quotes.
        package var etag: String
        /// Bytes in the part; not needed to complete an upload.
        package var size: Int64

        package init(partNumber: Int, etag: String, size: Int64 = 0) {
            self.partNumber = partNumber
            self.etag = etag
            self.size = size
        }
    }

    /// What `RestoreObject` (an archived object asked back for reading) answered.
    package enum RestoreRequest: Sendable, Equatable {
        /// Asked for now; HEAD says when it is ready (`ObjectInfo.restore`).
        case started
        /// Already asked for earlier, not ready yet.
        case inProgress
        /// A copy is there to read.
        case available
    }

    package var configuration: Configuration
    /// Seconds added to the local clock when signing (S3's time minus ours); set it from
    /// `S3Error.clockOffset(localNow:)` after a `clockSkew` error.
    package var clockOffset: TimeInterval
    package let httpClient: HTTPClient
    package var logger: Logger
    let signer: SigV4Signer
    let target: S3Target

    /// Uses `httpClient`, which the caller keeps and shuts down.
    package init(configuration: Configuration, httpClient: HTTPClient, clockOffset: TimeInterval = 0,
                 logger: Logger = Logger(label: "photolalad.s3")) throws(S3Error) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.clockOffset = clockOffset
        self.logger = logger
        signer = SigV4Signer(region: configuration.region, service: "s3")
        target = try S3Target(configuration)
    }

    /// Creates its own `HTTPClient` (see `makeHTTPClient`); call `shutdown()` when done.
    package init(configuration: Configuration, clockOffset: TimeInterval = 0,
                 logger: Logger = Logger(label: "photolalad.s3")) throws(S3Error) {
        try self.init(configuration: configuration, httpClient: Self.makeHTTPClient(), clockOffset: clockOffset,
                      logger: logger)
    }

    /// An HTTP/1.1 client fit for S3: 10 s to connect, 60 s of silence tolerated while
    /// waiting for an answer or while the peer stops reading, redirects not followed (a
    /// streamed body cannot be replayed, and S3 only redirects on a wrong region).
    /// Connections are kept alive and reused for 60 s. A connection that cannot be made
    /// (refused, TLS refused) fails its requests at once instead of being retried by the
    /// pool until their deadline: the uploader's own backoff retries, and status says why.
    /// TLS trust comes with each request (`Configuration.trust`).
    package static func makeHTTPClient(connectTimeout: TimeInterval = 10, idleTimeout: TimeInterval = 60,
                                       maximumConnectionsPerHost: Int = 8, connectProxy: ConnectProxy? = nil) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Int64(connectTimeout * 1000)),
                           read: .milliseconds(Int64(idleTimeout * 1000)),
                           write: .milliseconds(Int64(idleTimeout * 1000))),
            connectionPool: .init(idleTimeout: .seconds(60),
                                  concurrentHTTP1ConnectionsPerHostSoftLimit: maximumConnectionsPerHost),
            decompression: .disabled)
        configuration.httpVersion = .http1Only
        configuration.connectionPool.retryConnectionEstablishment = false
        if let connectProxy { configuration.proxy = .server(host: connectProxy.host, port: connectProxy.port) }
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// Shuts the underlying `HTTPClient` down; only for a client made by `init(configuration:)`.
    package func shutdown() async throws {
        try await httpClient.shutdown()
    }

    /// True when bodies go over plain HTTP and must therefore be signed with their real SHA-256.
    package var signsPayload: Bool { !target.usesTLS }

    /// The deadline for a request carrying `bodyBytes` (see `Configuration`).
    package func requestTimeout(bodyBytes: Int64) -> TimeInterval {
        exchange.timeout(bodyBytes: bodyBytes)
    }

    package var requests: S3Requests { S3Requests(target: target, requiredKeyPrefix: configuration.requiredKeyPrefix) }

    var exchange: S3Exchange {
        S3Exchange(httpClient: httpClient, configuration: configuration, target: target, signer: signer,
                   clockOffset: clockOffset, logger: logger)
    }

    /// Signs and sends one request and reads its whole (small) answer, whatever its status.
    package func execute(_ request: S3Request, credentials: S3Credentials, signer: SigV4Signer? = nil) async throws(S3Error) -> S3Response {
        try await exchange.execute(request, credentials: credentials, signer: signer)
    }

    // MARK: - Single objects

    /// Uploads `length` bytes of the file at `path` from `offset` (to the end of the file
    /// when nil) as one object. Returns the ETag.
    ///
    /// - Parameters:
    ///   - contentMD5: base64 of the 16-byte MD5 of exactly these bytes (`contentMD5(hex:)`
    ///     turns the key's hex MD5 into it); S3 rejects a body that does not match.
    ///   - metadata: user metadata without the `x-amz-meta-` prefix (`original-format`).
    ///   - storageClass: sent unless nil or `STANDARD`.
    ///   - payloadSHA256: over plain HTTP the body's hex SHA-256 is signed; pass it if
    ///     known, otherwise the file range is read once more to compute it. Ignored over HTTPS.
    ///   - expected: the identity the file had when it was hashed; anything else now at
    ///     `path` is refused (`.localFile`) before a byte is read.
    ///   - followSymlinks: false refuses a symlink at `path`.
    package func putObject(key: String, path: String, offset: Int64 = 0, length: Int64? = nil,
                           contentMD5: String, contentType: String, metadata: [String: String] = [:],
                           storageClass: String? = nil, payloadSHA256: String? = nil,
                           expected: FileIdentity? = nil, followSymlinks: Bool = true, ifNoneMatch: Bool = false,
                           credentials: S3Credentials) async throws(S3Error) -> String {
        let operation = "PutObject"
        try requests.check(key, operation)
        let (file, length) = try Self.openBody(path: path, offset: offset, length: length, expected: expected,
                                               followSymlinks: followSymlinks, operation: operation, key: key)
        var request = try requests.putObject(key: key, file: file, offset: offset, length: length, contentMD5: contentMD5,
                                             contentType: contentType, metadata: metadata, storageClass: storageClass,
                                             ifNoneMatch: ifNoneMatch)
        // Over plain HTTP the body's SHA-256 is signed: given, or one more read of the range.
        if signsPayload, let payloadSHA256 {
            request.payloadHash = payloadSHA256
        } else if signsPayload {
            request.payloadHash = try Self.digest(file, offset: offset, length: length, md5: false, sha256: true,
                                                  operation: operation, key: key).sha256Hex!
        }
        let response = try await execute(request, credentials: credentials)
        try response.expect(200)
        return response.etag
    }

    /// Uploads a small body held in memory (a thumbnail, a catalog pointer, a manifest
    /// segment) as one object, with its Content-MD5. Returns the ETag.
    ///
    /// - Parameters:
    ///   - ifMatch: replace only the object with this ETag (compare-and-swap).
    ///   - bareIfMatch: send that ETag without its quotes (Ceph Pacific honours only that form).
    ///   - ifNoneMatch: only if the key is free.
    ///   A condition that does not hold throws `.preconditionFailed`.
    package func putObject(key: String, bytes: [UInt8], contentType: String, metadata: [String: String] = [:],
                           ifMatch: String? = nil, bareIfMatch: Bool = false, ifNoneMatch: Bool = false,
                           credentials: S3Credentials) async throws(S3Error) -> String {
        let response = try await execute(requests.putObject(key: key, bytes: bytes, contentType: contentType, metadata: metadata,
                                                            ifMatch: ifMatch, quoted: !bareIfMatch, ifNoneMatch: ifNoneMatch),
                                         credentials: credentials)
        try response.expect(200)
        return response.etag
    }

    /// Size and ETag of `key`, or nil when it does not exist.
    ///
    /// A 403 throws an `S3Error` of kind `.forbidden`: a role policy may deny HeadObject,
    /// and the caller then treats existence as unknown and uploads.
    package func headObject(key: String, credentials: S3Credentials) async throws(S3Error) -> ObjectInfo? {
        try await execute(requests.object(.HEAD, key: key), credentials: credentials).objectInfo()
    }

    /// The whole object, which must fit in `maximumResponseBytes`.
    package func getObject(key: String, credentials: S3Credentials) async throws(S3Error) -> [UInt8] {
        let response = try await execute(requests.object(.GET, key: key), credentials: credentials)
        try response.expect(200)
        return response.body
    }

    /// A small object and its ETag, or nil when there is no such key.
    package func getObjectIfPresent(key: String, credentials: S3Credentials) async throws(S3Error) -> (bytes: [UInt8], etag: String)? {
        let response = try await execute(requests.object(.GET, key: key), credentials: credentials)
        if response.status == 404 { return nil }
        try response.expect(200)
        return (response.body, response.etag)
    }

    /// Streams the object (or the bytes `range`, both ends included) into `consume`, a
    /// buffer at a time, in order, so memory stays flat (a restore, `verify --deep`).
    ///
    /// - Parameters:
    ///   - expectedBytes: how much is coming, for the deadline (see `requestTimeout`); the
    ///     range's length when a range is given.
    ///   - onHead: told the answer's head (the range's length, the object's size) before
    ///     the first byte, so a relay can announce the length it is about to send.
    /// - Throws: `.notFound` for a missing key; `.localFile` (code `ConsumerFailed`) when
    ///   `consume` throws, with its error in the message; the transfer errors of `execute`.
    package func getObject(key: String, range: ClosedRange<Int64>? = nil, expectedBytes: Int64 = 0,
                           credentials: S3Credentials,
                           onHead: (@Sendable (ObjectHead) async throws -> Void)? = nil,
                           consume: @Sendable (ByteBuffer) async throws -> Void) async throws(S3Error) -> ObjectHead {
        let request = try requests.object(.GET, key: key, range: range)
        let (operation, exchange) = (request.operation, exchange)
        let timeout = exchange.timeout(bodyBytes: range.map { $0.upperBound - $0.lowerBound + 1 } ?? expectedBytes)
        let response = try await exchange.send(request, credentials: credentials, timeout: timeout)
        let head = S3Response(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                              body: [], operation: operation, key: key)
        guard head.status == 200 || head.status == 206 else {
            var failed = head
            failed.body = (try? await response.body.collect(upTo: configuration.maximumResponseBytes)).map { Array(buffer: $0) } ?? []
            throw failed.failure
        }
        let length = head.header("Content-Length").flatMap { Int64($0) } ?? -1
        // "bytes 0-99/12345": the object's size is after the slash.
        let size = head.header("Content-Range").flatMap { $0.split(separator: "/").last }.flatMap { Int64($0) } ?? length
        var received: Int64 = 0
        do {
            if let onHead {
                do {
                    try await onHead(ObjectHead(etag: head.etag, contentLength: length, objectSize: size, contentType: head.header("Content-Type"),
                                                originalFormat: head.header("x-amz-meta-original-format")))
                } catch {
                    throw ConsumerFailure(underlying: error)
                }
            }
            for try await buffer in response.body {
                received += Int64(buffer.readableBytes)
                do {
                    try await consume(buffer)
                } catch {
                    throw ConsumerFailure(underlying: error)
                }
            }
        } catch let failure as ConsumerFailure {
            throw S3Error(kind: .localFile, code: "ConsumerFailed", message: "\(failure.underlying)", operation: operation, key: key)
        } catch {
            throw S3Exchange.transportError(error, operation: operation, key: key, timeout: timeout)
        }
        guard length < 0 || received == length else {
            throw S3Error(kind: .transient, status: head.status, code: "IncompleteBody",
                          message: "the answer ended after \(received) of \(length) bytes", operation: operation, key: key)
        }
        return ObjectHead(etag: head.etag, contentLength: received, objectSize: size, contentType: head.header("Content-Type"),
                          originalFormat: head.header("x-amz-meta-original-format"))
    }

    private struct ConsumerFailure: Error {
        var underlying: any Error
    }

    /// Deletes `key` (the manifest's compaction); a key that is not there is not an error
    /// (S3 answers 204 either way).
    package func deleteObject(key: String, credentials: S3Credentials) async throws(S3Error) {
        try await execute(requests.object(.DELETE, key: key), credentials: credentials).expect(204, 200, 404)
    }

    /// One page of the keys under `prefix`, in key order. `prefix` must lie inside the
    /// client's `requiredKeyPrefix` (the session policy allows listing only there).
    package func listObjects(prefix: String, continuationToken: String? = nil, maxKeys: Int = 1000,
                             credentials: S3Credentials) async throws(S3Error) -> ListPage {
        let request = try requests.listObjects(prefix: prefix, continuationToken: continuationToken, maxKeys: maxKeys)
        return try await execute(request, credentials: credentials).listPage()
    }

    /// `RestoreObject` for `days` days at `tier` (`Standard`: hours for GLACIER, up to 12 h
    /// for DEEP_ARCHIVE; `Bulk`: cheaper and slower).
    package func restoreObject(key: String, days: Int = 7, tier: String = "Standard",
                               credentials: S3Credentials) async throws(S3Error) -> RestoreRequest {
        try await execute(requests.restoreObject(key: key, days: days, tier: tier), credentials: credentials).restoreRequest()
    }

    // MARK: - Multipart uploads
    //
    // Nothing appears under the key until `completeMultipartUpload`, so an interrupted
    // upload never leaves a partial object; the upload id and finished parts live in the
    // caller's queue database, and `listParts` lets a restarted daemon resume.

    /// Starts a multipart upload and returns its upload id. Content type, metadata and
    /// storage class are fixed here, not on the parts.
    package func createMultipartUpload(key: String, contentType: String, metadata: [String: String] = [:],
                                       storageClass: String? = nil,
                                       credentials: S3Credentials) async throws(S3Error) -> String {
        let request = try requests.createMultipartUpload(key: key, contentType: contentType, metadata: metadata,
                                                         storageClass: storageClass)
        return try await execute(request, credentials: credentials).uploadId()
    }

    /// Uploads bytes `offset..<offset+length` of the file at `path` as part `partNumber`
    /// (1…10,000) and returns its ETag.
    ///
    /// - Parameters:
    ///   - contentMD5: base64 MD5 of this part's bytes. When nil the range is read once
    ///     to compute it (together with the SHA-256 over plain HTTP, in the same pass).
    ///   - payloadSHA256: see `putObject`.
    package func uploadPart(key: String, uploadId: String, partNumber: Int, path: String, offset: Int64,
                            length: Int64, contentMD5: String? = nil, payloadSHA256: String? = nil,
                            expected: FileIdentity? = nil, followSymlinks: Bool = true,
                            credentials: S3Credentials) async throws(S3Error) -> String {
        let operation = "UploadPart"
        try requests.check(key, operation)
        let (file, length) = try Self.openBody(path: path, offset: offset, length: length, expected: expected,
                                               followSymlinks: followSymlinks, operation: operation, key: key)
        var request = try requests.uploadPart(key: key, uploadId: uploadId, partNumber: partNumber, file: file,
                                              offset: offset, length: length)
        var md5 = contentMD5
        var payloadHash = signsPayload ? payloadSHA256 : SigV4Signer.unsignedPayload
        if md5 == nil || payloadHash == nil {
            let digest = try Self.digest(file, offset: offset, length: length, md5: md5 == nil, sha256: payloadHash == nil,
                                         operation: operation, key: key)
            if let bytes = digest.md5 { md5 = Self.contentMD5(digest: bytes) }
            if payloadHash == nil { payloadHash = digest.sha256Hex }
        }
        request.headers.append(.init("Content-MD5", md5!))
        request.payloadHash = payloadHash!
        return try await execute(request, credentials: credentials).partETag()
    }

    /// The parts S3 holds for an upload, in part-number order, following pagination.
    /// A `notFound` error with code `NoSuchUpload` means the upload is gone: start over.
    package func listParts(key: String, uploadId: String, credentials: S3Credentials) async throws(S3Error) -> [Part] {
        try await listParts(key: key, uploadId: uploadId, pageSize: 1000, credentials: credentials)
    }

    /// `pageSize` is S3's `max-parts`; small values let tests exercise pagination.
    func listParts(key: String, uploadId: String, pageSize: Int, credentials: S3Credentials) async throws(S3Error) -> [Part] {
        var parts: [Part] = []
        var marker: Int?
        // 10,000 parts at most: more pages than that means the server is looping.
        let maximumPages = Self.maximumPartCount / max(1, pageSize) + 2
        for _ in 0..<maximumPages {
            let request = try requests.listParts(key: key, uploadId: uploadId, pageSize: pageSize, after: marker)
            let response = try await execute(request, credentials: credentials)
            let page = try response.partsPage()
            parts += page.parts
            guard page.truncated else { return parts.sorted { $0.partNumber < $1.partNumber } }
            guard let next = page.nextMarker ?? parts.last?.partNumber, next != marker else {
                throw response.malformed(expected: "a NextPartNumberMarker that advances")
            }
            marker = next
        }
        throw S3Error(kind: .transient, code: "MalformedResponse", message: "ListParts did not end after \(maximumPages) pages",
                      operation: "ListParts", key: key)
    }

    /// Assembles the object from `parts` (sorted here) and returns its ETag (empty when the
    /// store does not say).
    ///
    /// S3 may answer 200 and still fail: the status goes out before the assembly ends,
    /// and the failure arrives as an `<Error>` body. That is detected and thrown like any
    /// other error (usually `transient`, `InternalError`).
    package func completeMultipartUpload(key: String, uploadId: String, parts: [Part],
                                         credentials: S3Credentials) async throws(S3Error) -> String {
        let request = try requests.completeMultipartUpload(key: key, uploadId: uploadId, parts: parts)
        return try await execute(request, credentials: credentials).completedETag()
    }

    /// Discards an upload and its parts. An upload that is already gone counts as aborted.
    package func abortMultipartUpload(key: String, uploadId: String, credentials: S3Credentials) async throws(S3Error) {
        let response = try await execute(requests.abortMultipartUpload(key: key, uploadId: uploadId), credentials: credentials)
        guard response.status != 200, response.status != 204, response.failure.code != "NoSuchUpload" else { return }
        throw response.failure
    }

    // MARK: - Bodies and their digests

    /// The base64 Content-MD5 for a 32-digit hex MD5 (the one in the object key); nil if
    /// `hex` is not 16 bytes of hex.
    package static func contentMD5(hex: String) -> String? {
        guard hex.utf8.count == 32, let bytes = Hex.bytes(hex) else { return nil }
        return contentMD5(digest: bytes)
    }

    /// The base64 Content-MD5 of a body held in memory.
    package static func contentMD5(of bytes: [UInt8]) -> String {
        contentMD5(digest: MD5.digest(bytes))
    }

    /// The base64 Content-MD5 of a 16-byte MD5.
    package static func contentMD5(digest: [UInt8]) -> String {
        Data(digest).base64EncodedString()
    }

    /// Opens the file a request's body is read from and checks the range against its size
    /// at open; `expected`: refuse any other file than the hashed one. A FIFO swapped in at
    /// `path` does not hold a worker: `VerifiedFile` opens without blocking. Returns the
    /// file and the length to send.
    package static func openBody(path: String, offset: Int64 = 0, length: Int64? = nil, expected: FileIdentity? = nil,
                                 followSymlinks: Bool = true, operation: String,
                                 key: String?) throws(S3Error) -> (file: VerifiedFile, length: Int64) {
        let file: VerifiedFile
        do {
            file = try VerifiedFile(path: path, expected: expected, followSymlinks: followSymlinks)
        } catch {
            let why = switch error {
            case .vanished: "\(path): the file disappeared before it was uploaded"
            case .changed: "\(path) is another file than the one hashed: it changed since it was hashed"
            case .notRegularFile: "\(path) is not a regular file"
            case .unreadable(let reason): "\(path): \(reason)"
            }
            throw S3Error(kind: .localFile, code: "LocalFileError", message: why, operation: operation, key: key)
        }
        let length = length ?? (file.size - offset)
        guard offset >= 0, length >= 0, offset + length <= file.size else {
            throw S3Error(kind: .localFile, code: "LocalFileError",
                          message: "\(path) is \(file.size) bytes, too short for \(length) bytes at offset \(offset): "
                              + "it changed since it was hashed", operation: operation, key: key)
        }
        return (file, length)
    }

    /// One read of a body's range for its MD5 and, over plain HTTP, its SHA-256.
    package static func digest(_ file: VerifiedFile, offset: Int64, length: Int64, md5: Bool, sha256: Bool, operation: String,
                       key: String) throws(S3Error) -> VerifiedFile.RangeDigest {
        do {
            return try file.digest(from: offset, length: length, md5: md5, sha256: sha256)
        } catch {
            let why = error == .changed ? "\(file.path) shrank while it was read: it changed since it was hashed"
                : "\(file.path): \(error)"
            throw S3Error(kind: .localFile, code: "LocalFileError", message: why, operation: operation, key: key)
        }
    }
}
