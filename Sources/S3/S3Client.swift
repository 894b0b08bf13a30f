#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AsyncHTTPClient
import Foundation
import Digests
import PhotolalaCore
import Logging
import NIOCore
import NIOHTTP1

/// The S3 operations photolalad needs (PUT, HEAD, multipart, ListParts, abort), signed
/// with SigV4 and streamed from files in fixed-size chunks, so memory stays flat
/// whatever the file size.
///
/// A value type: copies share one `HTTPClient` (and its connection pool). Credentials
/// come with every call because the credentials service owns refreshing them; the clock
/// offset is a plain property the uploader updates after a `clockSkew` error.
///
/// Every failure is an `S3Error` whose `kind` says what to do next.
public struct S3Client: Sendable {
    public struct Configuration: Sendable, Equatable {
        public var bucket: String
        public var region: String
        /// An S3-compatible endpoint (`http://127.0.0.1:5055`): path-style addressing.
        /// Nil: AWS, virtual-hosted (`https://bucket.s3.region.amazonaws.com/key`).
        public var endpoint: String?
        /// When set, every operation refuses a key outside this prefix
        /// (`photos/<userId>/`): a last guard against writing where the session policy
        /// would deny it anyway, or worse, where it would not.
        public var requiredKeyPrefix: String?
        /// Every request gets at least this long to be sent and answered…
        public var minimumRequestTimeout: TimeInterval = 60
        /// …plus its body size divided by this many bytes per second (a floor on a
        /// slow uplink, not an expectation).
        public var minimumThroughput: Double = 100 * 1024
        /// Bytes read from the file per body chunk.
        public var chunkSize: Int = 256 * 1024
        /// Largest response body read into memory (ListParts pages are the biggest, ~300 KB).
        public var maximumResponseBytes: Int = 16 << 20

        public init(bucket: String, region: String, endpoint: String? = nil, requiredKeyPrefix: String? = nil) {
            self.bucket = bucket
            self.region = region
            self.endpoint = endpoint
            self.requiredKeyPrefix = requiredKeyPrefix
        }
    }

    /// What HEAD tells about an object.
    public struct ObjectInfo: Sendable, Equatable {
        public var size: Int64
        /// Without the surrounding quotes; the hex MD5 for a single-PUT object.
        public var etag: String

        public init(size: Int64, etag: String) {
            self.size = size
            self.etag = etag
        }
    }

    /// One uploaded part of a multipart upload.
    public struct Part: Sendable, Equatable {
        public var partNumber: Int
        /// Without the surrounding quotes.
        public var etag: String
        /// Bytes in the part; not needed to complete an upload.
        public var size: Int64

        public init(partNumber: Int, etag: String, size: Int64 = 0) {
            self.partNumber = partNumber
            self.etag = etag
            self.size = size
        }
    }

    public static let maximumSinglePutSize: Int64 = 5 << 30
    public static let maximumPartCount = 10_000

    public var configuration: Configuration
    /// Seconds added to the local clock when signing (S3's time minus ours); set it from
    /// `S3Error.clockOffset(localNow:)` after a `clockSkew` error.
    public var clockOffset: TimeInterval
    public let httpClient: HTTPClient
    public var logger: Logger
    let signer: SigV4Signer
    let target: Target

    /// Uses `httpClient`, which the caller keeps and shuts down.
    public init(configuration: Configuration, httpClient: HTTPClient, clockOffset: TimeInterval = 0,
                logger: Logger = Logger(label: "photolalad.s3")) throws(S3Error) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.clockOffset = clockOffset
        self.logger = logger
        signer = SigV4Signer(region: configuration.region, service: "s3")
        target = try Target(configuration)
    }

    /// Creates its own `HTTPClient` (see `makeHTTPClient`); call `shutdown()` when done.
    public init(configuration: Configuration, clockOffset: TimeInterval = 0,
                logger: Logger = Logger(label: "photolalad.s3")) throws(S3Error) {
        try self.init(configuration: configuration, httpClient: Self.makeHTTPClient(), clockOffset: clockOffset,
                      logger: logger)
    }

    /// An HTTP/1.1 client fit for S3: 10 s to connect, 60 s of silence tolerated while
    /// waiting for an answer or while the peer stops reading, redirects not followed (a
    /// streamed body cannot be replayed, and S3 only redirects on a wrong region).
    public static func makeHTTPClient(connectTimeout: TimeInterval = 10, idleTimeout: TimeInterval = 60,
                                      maximumConnectionsPerHost: Int = 8) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Int64(connectTimeout * 1000)),
                           read: .milliseconds(Int64(idleTimeout * 1000)),
                           write: .milliseconds(Int64(idleTimeout * 1000))),
            connectionPool: .init(idleTimeout: .seconds(60),
                                  concurrentHTTP1ConnectionsPerHostSoftLimit: maximumConnectionsPerHost),
            decompression: .disabled)
        configuration.httpVersion = .http1Only
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// Shuts the underlying `HTTPClient` down; only for a client made by `init(configuration:)`.
    public func shutdown() async throws {
        try await httpClient.shutdown()
    }

    /// True when bodies go over plain HTTP and must therefore be signed with their real SHA-256.
    public var signsPayload: Bool { !target.usesTLS }

    /// The deadline for a request carrying `bodyBytes`: the minimum plus the time the body
    /// takes at the minimum throughput.
    public func requestTimeout(bodyBytes: Int64) -> TimeInterval {
        configuration.minimumRequestTimeout + Double(max(0, bodyBytes)) / configuration.minimumThroughput
    }

    // MARK: - Objects

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
    public func putObject(key: String, path: String, offset: Int64 = 0, length: Int64? = nil,
                          contentMD5: String, contentType: String, metadata: [String: String] = [:],
                          storageClass: String? = nil, payloadSHA256: String? = nil,
                          expected: FileIdentity? = nil, followSymlinks: Bool = true,
                          credentials: S3Credentials) async throws(S3Error) -> String {
        let operation = "PutObject"
        try checkKey(key, operation: operation)
        let file = try OpenFile(path: path, operation: operation, key: key, expected: expected, followSymlinks: followSymlinks)
        let length = try file.checkRange(offset: offset, length: length, operation: operation, key: key)
        guard length <= Self.maximumSinglePutSize else {
            throw S3Error(kind: .permanent, code: "EntityTooLarge",
                          message: "a single PUT is limited to 5 GiB; this is \(length) bytes: use a multipart upload",
                          operation: operation, key: key)
        }
        var headers = try objectHeaders(contentType: contentType, metadata: metadata, storageClass: storageClass,
                                        operation: operation, key: key)
        headers.append(.init("Content-MD5", contentMD5))
        let payloadHash = try payloadHashForFile(file, offset: offset, length: length, given: payloadSHA256,
                                                 operation: operation, key: key)
        let response = try await execute(Request(
            operation: operation, method: .PUT, path: objectPath(key), headers: headers,
            body: .file(file, offset: offset, length: length), payloadHash: payloadHash, key: key),
            credentials: credentials)
        guard response.status == 200 else { throw response.error(operation: operation, key: key) }
        return Self.unquoted(response.header("ETag") ?? "")
    }

    /// Size and ETag of `key`, or nil when it does not exist.
    ///
    /// A 403 throws an `S3Error` of kind `.forbidden`: a role policy may deny HeadObject,
    /// and the caller then treats existence as unknown and uploads.
    public func headObject(key: String, credentials: S3Credentials) async throws(S3Error) -> ObjectInfo? {
        let operation = "HeadObject"
        try checkKey(key, operation: operation)
        let response = try await execute(Request(operation: operation, method: .HEAD, path: objectPath(key), key: key),
                                         credentials: credentials)
        switch response.status {
        case 200:
            guard let size = response.header("Content-Length").flatMap({ Int64($0) }) else {
                throw S3Error(kind: .transient, status: 200, code: "MalformedResponse",
                              message: "HEAD answer without Content-Length", requestId: response.requestId,
                              operation: operation, key: key)
            }
            return ObjectInfo(size: size, etag: Self.unquoted(response.header("ETag") ?? ""))
        case 404:
            return nil
        default:
            throw response.error(operation: operation, key: key)
        }
    }

    /// The whole object; for tests and diagnostics (bounded by `maximumResponseBytes`).
    func getObject(key: String, credentials: S3Credentials) async throws(S3Error) -> [UInt8] {
        let operation = "GetObject"
        try checkKey(key, operation: operation)
        let response = try await execute(Request(operation: operation, method: .GET, path: objectPath(key), key: key),
                                         credentials: credentials)
        guard response.status == 200 else { throw response.error(operation: operation, key: key) }
        return response.body
    }

    // MARK: - Digests

    /// The base64 Content-MD5 for a 32-digit hex MD5 (the one in the object key); nil if
    /// `hex` is not 16 bytes of hex.
    public static func contentMD5(hex: String) -> String? {
        let chars = Array(hex.utf8)
        guard chars.count == 32 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(16)
        var i = 0
        while i < 32 {
            guard let byte = UInt8(String(decoding: chars[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
            i += 2
        }
        return Data(bytes).base64EncodedString()
    }

    /// Digests of a file range in one read pass with a fixed buffer.
    public struct RangeDigest: Sendable, Equatable {
        /// Lowercase hex MD5.
        public var md5Hex: String
        /// Base64 MD5, the `Content-MD5` header value.
        public var contentMD5: String
        /// Lowercase hex SHA-256, when asked for.
        public var sha256Hex: String?
    }

    /// Reads `length` bytes from `offset` (to the end when nil) once, computing the MD5 and,
    /// if asked, the SHA-256. Blocking: it reads the file on the calling thread.
    public static func digestFileRange(path: String, offset: Int64 = 0, length: Int64? = nil,
                                       sha256: Bool = false, chunkSize: Int = 1 << 20) throws(S3Error) -> RangeDigest {
        let file = try OpenFile(path: path, operation: "Digest", key: nil)
        let length = try file.checkRange(offset: offset, length: length, operation: "Digest", key: nil)
        return try file.digest(offset: offset, length: length, md5: true, sha256: sha256, chunkSize: chunkSize,
                               operation: "Digest", key: nil)
    }

    // MARK: - Plumbing shared with the multipart extension

    func objectPath(_ key: String) -> String {
        target.pathPrefix + "/" + SigV4Signer.encodePath(key)
    }

    func checkKey(_ key: String, operation: String) throws(S3Error) {
        guard !key.isEmpty, key.utf8.count <= 1024 else {
            throw S3Error(kind: .permanent, code: "InvalidRequest",
                          message: "object keys are 1 to 1024 bytes of UTF-8", operation: operation, key: key)
        }
        if let prefix = configuration.requiredKeyPrefix, !key.hasPrefix(prefix) {
            throw S3Error(kind: .permanent, code: "InvalidRequest",
                          message: "refusing a key outside \(prefix)", operation: operation, key: key)
        }
    }

    func objectHeaders(contentType: String, metadata: [String: String], storageClass: String?,
                       operation: String, key: String) throws(S3Error) -> [SigV4Signer.Header] {
        var headers: [SigV4Signer.Header] = [.init("Content-Type", contentType)]
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            // Header values must be printable ASCII; S3 would otherwise mangle or reject them.
            guard !name.isEmpty, (name + value).utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
                throw S3Error(kind: .permanent, code: "InvalidRequest",
                              message: "metadata \(name) must be printable ASCII", operation: operation, key: key)
            }
            headers.append(.init("x-amz-meta-" + name.lowercased(), value))
        }
        if let storageClass, !storageClass.isEmpty, storageClass != "STANDARD" {
            headers.append(.init("x-amz-storage-class", storageClass))
        }
        return headers
    }

    /// Over TLS, `UNSIGNED-PAYLOAD` (Content-MD5 guards the bytes); over plain HTTP the real
    /// SHA-256, which costs one more read of the range unless the caller has it.
    func payloadHashForFile(_ file: OpenFile, offset: Int64, length: Int64, given: String?,
                            operation: String, key: String) throws(S3Error) -> String {
        guard signsPayload else { return SigV4Signer.unsignedPayload }
        if let given { return given }
        return try file.digest(offset: offset, length: length, md5: false, sha256: true,
                               chunkSize: 1 << 20, operation: operation, key: key).sha256Hex!
    }

    static func unquoted(_ etag: String) -> String {
        var text = Substring(etag.trimmingCharacters(in: .whitespaces))
        if text.hasPrefix("W/") { text = text.dropFirst(2) }
        if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") { text = text.dropFirst().dropLast() }
        return String(text)
    }

    // MARK: - Requests

    enum Body: Sendable {
        case none
        case bytes([UInt8])
        case file(OpenFile, offset: Int64, length: Int64)

        var count: Int64 {
            switch self {
            case .none: 0
            case let .bytes(bytes): Int64(bytes.count)
            case let .file(_, _, length): length
            }
        }
    }

    struct Request: Sendable {
        var operation: String
        var method: HTTPMethod
        /// Percent-encoded, as on the request line.
        var path: String
        var query: [SigV4Signer.QueryItem] = []
        /// Headers to sign and send, without Host (added from the endpoint).
        var headers: [SigV4Signer.Header] = []
        var body: Body = .none
        var payloadHash: String = SigV4Signer.emptyPayloadHash
        var key: String?
    }

    struct Response: Sendable {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }

        var requestId: String? { header("x-amz-request-id") }

        func error(operation: String, key: String?) -> S3Error {
            S3Error.decode(status: status, headers: headers, body: body, operation: operation, key: key)
        }
    }

    /// Signs and sends one request, and reads the whole (small) answer. Any status comes
    /// back; only a failure to get an answer throws.
    func execute(_ request: Request, credentials: S3Credentials, signer: SigV4Signer? = nil) async throws(S3Error) -> Response {
        let signer = signer ?? self.signer
        let signed = [SigV4Signer.Header("Host", target.hostHeader)] + request.headers
        let signature = signer.sign(method: request.method.rawValue, path: request.path, query: request.query,
                                    headers: signed, payloadHash: request.payloadHash, credentials: credentials,
                                    date: Date().addingTimeInterval(clockOffset))

        var http = HTTPClientRequest(url: target.origin + signature.requestTarget)
        http.method = request.method
        for header in signed + signature.headersToAdd {
            http.headers.add(name: header.name, value: header.value)
        }
        switch request.body {
        case .none:
            // S3 wants a length on every POST and PUT, even an empty one.
            if request.method == .POST || request.method == .PUT { http.body = .bytes(ByteBuffer()) }
        case let .bytes(bytes):
            http.body = .bytes(ByteBuffer(bytes: bytes))
        case let .file(file, offset, length):
            http.body = length == 0 ? .bytes(ByteBuffer())
                : .stream(FileChunks(file: file, offset: offset, length: length, chunkSize: configuration.chunkSize),
                          length: .known(length))
        }

        let timeout = requestTimeout(bodyBytes: request.body.count)
        let started = ContinuousClock.now
        do {
            let response = try await httpClient.execute(http, timeout: .milliseconds(Int64(timeout * 1000)),
                                                        logger: logger)
            let body = try await response.body.collect(upTo: configuration.maximumResponseBytes)
            let result = Response(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                                  body: Array(buffer: body))
            logger.debug("S3 request", metadata: [
                "operation": "\(request.operation)", "key": "\(request.key ?? "-")",
                "status": "\(result.status)", "request-id": "\(result.requestId ?? "-")",
                "bytes": "\(request.body.count)", "elapsed": "\(ContinuousClock.now - started)",
            ])
            return result
        } catch {
            let failure = Self.transportError(error, operation: request.operation, key: request.key, timeout: timeout)
            logger.debug("S3 request failed", metadata: [
                "operation": "\(request.operation)", "key": "\(request.key ?? "-")", "error": "\(failure.code)",
            ])
            throw failure
        }
    }

    static func transportError(_ error: any Error, operation: String, key: String?, timeout: TimeInterval) -> S3Error {
        if let error = error as? S3Error { return error }
        if let error = error as? FileReadError {
            return S3Error(kind: .localFile, code: "LocalFileError", message: error.description,
                           operation: operation, key: key)
        }
        if error is CancellationError || (error as? HTTPClientError) == .cancelled || Task.isCancelled {
            return S3Error(kind: .cancelled, code: "Cancelled", message: "cancelled", operation: operation, key: key)
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded:
                return S3Error(kind: .transient, code: "Timeout",
                               message: "no answer within \(Int(timeout)) s (the body-size-scaled deadline)",
                               operation: operation, key: key)
            case .connectTimeout, .readTimeout, .writeTimeout, .tlsHandshakeTimeout, .getConnectionFromPoolTimeout:
                return S3Error(kind: .transient, code: "Timeout", message: "\(error)", operation: operation, key: key)
            case .invalidURL, .emptyHost, .emptyScheme, .alreadyShutdown, .bodyLengthMismatch:
                return S3Error(kind: .permanent, code: "InvalidRequest", message: "\(error)",
                               operation: operation, key: key)
            default:
                break
            }
        }
        // Refused, reset, unreachable, DNS, TLS: the network, which comes back.
        return S3Error(kind: .transient, code: "NetworkError", message: "\(error)", operation: operation, key: key)
    }

    // MARK: - Addressing

    /// Where requests go: the origin, the Host header that is signed, and the path prefix
    /// (the bucket, for path-style addressing).
    struct Target: Sendable, Equatable {
        var origin: String
        var hostHeader: String
        var pathPrefix: String
        var usesTLS: Bool

        init(_ configuration: Configuration) throws(S3Error) {
            let bucket = configuration.bucket
            guard !bucket.isEmpty else {
                throw S3Error(kind: .permanent, code: "InvalidRequest", message: "no bucket configured")
            }
            guard let endpoint = configuration.endpoint else {
                let awsHost = "s3.\(configuration.region).amazonaws.com"
                usesTLS = true
                if bucket.contains(".") {
                    // A dotted bucket breaks the *.s3 wildcard certificate: path-style instead.
                    origin = "https://" + awsHost
                    hostHeader = awsHost
                    pathPrefix = "/" + SigV4Signer.encodePath(bucket)
                } else {
                    hostHeader = "\(bucket).\(awsHost)"
                    origin = "https://" + hostHeader
                    pathPrefix = ""
                }
                return
            }
            guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(),
                  scheme == "http" || scheme == "https", let rawHost = url.host, !rawHost.isEmpty else {
                throw S3Error(kind: .permanent, code: "InvalidRequest",
                              message: "endpoint \(endpoint) is not an http:// or https:// URL with a host")
            }
            usesTLS = scheme == "https"
            let host = rawHost.contains(":") && !rawHost.hasPrefix("[") ? "[\(rawHost)]" : rawHost
            let defaultPort = usesTLS ? 443 : 80
            hostHeader = url.port.map { $0 == defaultPort ? host : "\(host):\($0)" } ?? host
            origin = "\(scheme)://\(hostHeader)"
            var basePath = url.path
            while basePath.hasSuffix("/") { basePath.removeLast() }
            pathPrefix = (basePath.isEmpty ? "" : SigV4Signer.encodePath(basePath)) + "/" + SigV4Signer.encodePath(bucket)
        }
    }
}

// MARK: - Reading files

/// Why a file body could not be read; becomes an `S3Error` of kind `.localFile`.
struct FileReadError: Error, Sendable, CustomStringConvertible {
    var description: String
}

/// An open file descriptor shared by the request and its body stream. Closing in
/// `deinit` rather than when `execute` returns matters: the HTTP client may still be
/// pulling body chunks after an early answer, and a descriptor closed (and reused) under
/// it would send another file's bytes.
final class OpenFile: @unchecked Sendable {
    // Only `pread`, which takes an explicit offset, touches the descriptor: no shared position.
    let descriptor: Int32
    let size: Int64
    let path: String

    /// O_NONBLOCK: what is at `path` may have been swapped for a FIFO since it was hashed,
    /// and a blocking open of a FIFO waits for a writer forever (an upload worker, then the
    /// daemon's shutdown, held with it). `expected`: refuse any other file than the hashed one.
    init(path: String, operation: String, key: String?, expected: FileIdentity? = nil,
         followSymlinks: Bool = true) throws(S3Error) {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (followSymlinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else {
            let code = errno
            let why = switch code {
            case ENOENT, ENOTDIR: "the file disappeared before it was uploaded"
            case EACCES, EPERM: "permission denied: the daemon's user cannot read it"
            case ELOOP: "it is a symbolic link now: it changed since it was hashed"
            default: "cannot open: \(String(cString: strerror(code)))"
            }
            throw S3Error(kind: .localFile, code: "LocalFileError", message: "\(path): \(why)",
                          operation: operation, key: key)
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw S3Error(kind: .localFile, code: "LocalFileError", message: "\(path) is not a regular file",
                          operation: operation, key: key)
        }
        if let expected, FileIdentity(info) != expected {
            close(fd)
            throw S3Error(kind: .localFile, code: "LocalFileError",
                          message: "\(path) is another file than the one hashed: it changed since it was hashed",
                          operation: operation, key: key)
        }
        descriptor = fd
        size = Int64(info.st_size)
    }

    deinit { close(descriptor) }

    /// The length to send, checked against the file's size at open.
    func checkRange(offset: Int64, length: Int64?, operation: String, key: String?) throws(S3Error) -> Int64 {
        let length = length ?? (size - offset)
        guard offset >= 0, length >= 0, offset + length <= size else {
            throw S3Error(kind: .localFile, code: "LocalFileError",
                          message: "\(path) is \(size) bytes, too short for \(length) bytes at offset \(offset): "
                              + "it changed since it was hashed", operation: operation, key: key)
        }
        return length
    }

    /// Fills `buffer` from `offset`; fewer bytes than asked only at end of file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileReadError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset + Int64(done)))
            if n < 0 {
                if errno == EINTR { continue }
                throw FileReadError(description: "\(path): read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    func digest(offset: Int64, length: Int64, md5: Bool, sha256: Bool, chunkSize: Int,
                operation: String, key: String?) throws(S3Error) -> S3Client.RangeDigest {
        var md5Hash = MD5()
        var shaHash = SHA256()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var position = offset
        var remaining = length
        while remaining > 0 {
            let want = Int(min(Int64(chunkSize), remaining))
            let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want])
            let got: Int
            do { got = try read(into: slice, at: position) } catch {
                throw S3Error(kind: .localFile, code: "LocalFileError", message: error.description,
                              operation: operation, key: key)
            }
            guard got == want else {
                throw S3Error(kind: .localFile, code: "LocalFileError",
                              message: "\(path) shrank while it was read: it changed since it was hashed",
                              operation: operation, key: key)
            }
            let bytes = UnsafeRawBufferPointer(slice)
            if md5 { md5Hash.update(bytes) }
            if sha256 { shaHash.update(bytes) }
            position += Int64(got)
            remaining -= Int64(got)
        }
        let md5Bytes = md5Hash.finish()
        return S3Client.RangeDigest(md5Hex: md5 ? Hex.string(md5Bytes) : "",
                                    contentMD5: md5 ? Data(md5Bytes).base64EncodedString() : "",
                                    sha256Hex: sha256 ? shaHash.finishHex() : nil)
    }
}

/// A file range as a stream of `ByteBuffer`s of `chunkSize` bytes, read when the HTTP
/// client asks for the next one, so at most a few chunks are in memory per upload.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    let file: OpenFile
    let offset: Int64
    let length: Int64
    let chunkSize: Int

    func makeAsyncIterator() -> Iterator {
        Iterator(file: file, position: offset, remaining: length, chunkSize: chunkSize)
    }

    struct Iterator: AsyncIteratorProtocol {
        let file: OpenFile
        var position: Int64
        var remaining: Int64
        let chunkSize: Int

        mutating func next() async throws -> ByteBuffer? {
            guard remaining > 0 else { return nil }
            let want = Int(Swift.min(Int64(chunkSize), remaining))
            var buffer = ByteBufferAllocator().buffer(capacity: want)
            let file = self.file
            let position = self.position
            var failure: FileReadError?
            let got = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in
                do throws(FileReadError) {
                    return try file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]), at: position)
                } catch {
                    failure = error
                    return 0
                }
            }
            if let failure { throw failure }
            guard got == want else {
                throw FileReadError(description: "\(file.path) shrank during the upload: it changed since it was hashed")
            }
            #if os(Linux)
            // Uploaded bytes are not read again soon: keep a big video from flushing the page cache.
            if file.size > 64 << 20 { _ = posix_fadvise(file.descriptor, off_t(position), off_t(got), POSIX_FADV_DONTNEED) }
            #endif
            self.position += Int64(got)
            remaining -= Int64(got)
            return buffer
        }
    }
}
