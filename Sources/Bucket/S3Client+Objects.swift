import Foundation
import PhotolalaCore

/// Single objects: PUT from a file range, HEAD, GET; and the key, header and payload-hash
/// rules the multipart extension shares.
extension S3Client {
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

        package enum Restore: Sendable, Equatable {
            case inProgress
            case available
        }

        package init(size: Int64, etag: String, storageClass: String? = nil, restore: Restore? = nil,
                    serverSideEncryption: String? = nil, contentType: String? = nil, originalFormat: String? = nil) {
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
        // `*`: only if nothing is there yet; a 412 (`.preconditionFailed`) says it is.
        if ifNoneMatch { headers.append(.init("If-None-Match", "*")) }
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
    package func headObject(key: String, credentials: S3Credentials) async throws(S3Error) -> ObjectInfo? {
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
            return ObjectInfo(size: size, etag: Self.unquoted(response.header("ETag") ?? ""),
                              storageClass: response.header("x-amz-storage-class"),
                              restore: response.header("x-amz-restore").map(Self.restoreState),
                              serverSideEncryption: response.header("x-amz-server-side-encryption"),
                              contentType: response.header("Content-Type"), originalFormat: response.header("x-amz-meta-original-format"))
        case 404:
            return nil
        default:
            throw response.error(operation: operation, key: key)
        }
    }

    /// Uploads a small body held in memory (a thumbnail, a catalog pointer, a manifest
    /// segment) as one object, with its Content-MD5. Returns the ETag.
    ///
    /// - Parameters:
    ///   - ifMatch: replace only the object with this ETag (compare-and-swap).
    ///   - ifNoneMatch: only if the key is free.
    ///   A condition that does not hold throws `.preconditionFailed`.
    package func putObject(key: String, bytes: [UInt8], contentType: String, metadata: [String: String] = [:],
                          ifMatch: String? = nil, ifNoneMatch: Bool = false,
                          credentials: S3Credentials) async throws(S3Error) -> String {
        let operation = "PutObject"
        try checkKey(key, operation: operation)
        var headers = try objectHeaders(contentType: contentType, metadata: metadata, storageClass: nil,
                                        operation: operation, key: key)
        headers.append(.init("Content-MD5", Self.contentMD5(of: bytes)))
        if let ifMatch { headers.append(.init("If-Match", "\"\(ifMatch)\"")) }
        if ifNoneMatch { headers.append(.init("If-None-Match", "*")) }
        let response = try await execute(Request(
            operation: operation, method: .PUT, path: objectPath(key), headers: headers,
            body: .bytes(bytes), payloadHash: payloadHash(of: bytes), key: key), credentials: credentials)
        guard response.status == 200 else { throw response.error(operation: operation, key: key) }
        return Self.unquoted(response.header("ETag") ?? "")
    }

    /// `x-amz-restore: ongoing-request="true"` while a copy is being brought back;
    /// `ongoing-request="false", expiry-date="…"` once it can be read.
    static func restoreState(_ header: String) -> ObjectInfo.Restore {
        header.replacingOccurrences(of: " ", with: "").contains("ongoing-request=\"true\"") ? .inProgress : .available
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
        // Byte for byte, as S3 and the session policy compare keys (`hasPrefix` is Unicode
        // equivalence, which a key is not).
        if let prefix = configuration.requiredKeyPrefix, !key.utf8.starts(with: prefix.utf8) {
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
}
