import Digests
import Foundation
import NIOHTTP1

/// One S3 request as it goes on the wire, before signing: the method, the percent-encoded
/// path and query, the headers to sign (Host is added from the endpoint), the body and the
/// payload hash SigV4 signs.
package struct S3Request: Sendable {
    enum Body: Sendable {
        case none
        case bytes([UInt8])
        /// Streamed from the very file that was hashed (`FileChunks`).
        case file(VerifiedFile, offset: Int64, length: Int64)

        var count: Int64 {
            switch self {
            case .none: 0
            case let .bytes(bytes): Int64(bytes.count)
            case let .file(_, _, length): length
            }
        }
    }

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

/// What each operation sends to one bucket, checked before anything goes out: keys of 1 to
/// 1024 bytes inside `requiredKeyPrefix` (byte for byte, as S3 and the session policy
/// compare them), metadata in printable ASCII, part numbers S3 accepts. A value: a request
/// can be read in a test without a network.
package struct S3Requests: Sendable {
    let target: S3Target
    /// When set, every operation refuses a key outside it (`photos/<userId>/`).
    let requiredKeyPrefix: String?

    /// True when bodies go over plain HTTP and must therefore be signed with their real SHA-256.
    var signsPayload: Bool { !target.usesTLS }

    package func objectPath(_ key: String) -> String {
        target.pathPrefix + "/" + SigV4Signer.encodePath(key)
    }

    /// One object from a file range. Its payload hash is left `UNSIGNED-PAYLOAD`: over plain
    /// HTTP the caller signs the range's SHA-256 instead, once the request is known to be good.
    func putObject(key: String, file: VerifiedFile, offset: Int64, length: Int64, contentMD5: String, contentType: String,
                   metadata: [String: String], storageClass: String?, ifNoneMatch: Bool) throws(S3Error) -> S3Request {
        let operation = "PutObject"
        try check(key, operation)
        guard length <= S3Client.maximumSinglePutSize else {
            throw S3Error(kind: .permanent, code: "EntityTooLarge",
                          message: "a single PUT is limited to 5 GiB; this is \(length) bytes: use a multipart upload",
                          operation: operation, key: key)
        }
        var headers = try objectHeaders(contentType: contentType, metadata: metadata, storageClass: storageClass,
                                        operation: operation, key: key)
        headers.append(.init("Content-MD5", contentMD5))
        // `*`: only if nothing is there yet; a 412 (`.preconditionFailed`) says it is.
        if ifNoneMatch { headers.append(.init("If-None-Match", "*")) }
        return S3Request(operation: operation, method: .PUT, path: objectPath(key), headers: headers,
                         body: .file(file, offset: offset, length: length), payloadHash: SigV4Signer.unsignedPayload,
                         key: key)
    }

    /// One small object from memory, with its Content-MD5; `ifMatch` replaces only that ETag,
    /// sent quoted as S3 returns it, or bare for a store that refuses the quoted form.
    func putObject(key: String, bytes: [UInt8], contentType: String, metadata: [String: String], ifMatch: String?,
                   quoted: Bool = true, ifNoneMatch: Bool) throws(S3Error) -> S3Request {
        let operation = "PutObject"
        try check(key, operation)
        var headers = try objectHeaders(contentType: contentType, metadata: metadata, storageClass: nil,
                                        operation: operation, key: key)
        headers.append(.init("Content-MD5", S3Client.contentMD5(of: bytes)))
        if let ifMatch { headers.append(.init("If-Match", quoted ? "\"\(ifMatch)\"" : ifMatch)) }
        if ifNoneMatch { headers.append(.init("If-None-Match", "*")) }
        return S3Request(operation: operation, method: .PUT, path: objectPath(key), headers: headers, body: .bytes(bytes),
                         payloadHash: payloadHash(of: bytes), key: key)
    }

    /// GET, HEAD and DELETE of one key; a GET of the bytes `range` (both ends included).
    func object(_ method: HTTPMethod, key: String, range: ClosedRange<Int64>? = nil) throws(S3Error) -> S3Request {
        let operation = switch method {
        case .HEAD: "HeadObject"
        case .DELETE: "DeleteObject"
        default: "GetObject"
        }
        try check(key, operation)
        var headers: [SigV4Signer.Header] = []
        if let range { headers.append(.init("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")) }
        return S3Request(operation: operation, method: method, path: objectPath(key), headers: headers, key: key)
    }

    /// One page (`ListObjectsV2`, at most 1,000 keys) under `prefix`, which must lie inside
    /// `requiredKeyPrefix` (the session policy allows listing only there).
    func listObjects(prefix: String, continuationToken: String?, maxKeys: Int) throws(S3Error) -> S3Request {
        let operation = "ListObjectsV2"
        if let requiredKeyPrefix, !prefix.utf8.starts(with: requiredKeyPrefix.utf8) {
            throw S3Error(kind: .permanent, code: "InvalidRequest", message: "refusing to list outside \(requiredKeyPrefix)",
                          operation: operation, key: prefix)
        }
        var query: [SigV4Signer.QueryItem] = [.init("list-type", "2"), .init("prefix", prefix),
                                              .init("max-keys", String(max(1, min(1000, maxKeys))))]
        if let continuationToken { query.append(.init("continuation-token", continuationToken)) }
        return S3Request(operation: operation, method: .GET, path: target.pathPrefix + "/", query: query, key: prefix)
    }

    /// Content type, metadata and storage class are fixed here, not on the parts.
    func createMultipartUpload(key: String, contentType: String, metadata: [String: String],
                               storageClass: String?) throws(S3Error) -> S3Request {
        let operation = "CreateMultipartUpload"
        try check(key, operation)
        let headers = try objectHeaders(contentType: contentType, metadata: metadata, storageClass: storageClass,
                                        operation: operation, key: key)
        return S3Request(operation: operation, method: .POST, path: objectPath(key), query: [.init("uploads")],
                         headers: headers, key: key)
    }

    /// Part `partNumber` (1…10,000) from a file range, without its Content-MD5 and payload
    /// hash: the caller adds them once the request is known to be good (they may cost a read).
    func uploadPart(key: String, uploadId: String, partNumber: Int, file: VerifiedFile, offset: Int64,
                    length: Int64) throws(S3Error) -> S3Request {
        let operation = "UploadPart"
        try check(key, operation)
        guard (1...S3Client.maximumPartCount).contains(partNumber) else {
            throw S3Error(kind: .permanent, code: "InvalidArgument",
                          message: "part numbers run from 1 to 10,000, not \(partNumber)", operation: operation, key: key)
        }
        return S3Request(operation: operation, method: .PUT, path: objectPath(key),
                         query: [.init("partNumber", String(partNumber)), .init("uploadId", uploadId)],
                         body: .file(file, offset: offset, length: length), payloadHash: SigV4Signer.unsignedPayload,
                         key: key)
    }

    /// One page of `ListParts`, after part `marker`.
    func listParts(key: String, uploadId: String, pageSize: Int, after marker: Int?) throws(S3Error) -> S3Request {
        let operation = "ListParts"
        try check(key, operation)
        var query: [SigV4Signer.QueryItem] = [.init("uploadId", uploadId), .init("max-parts", String(pageSize))]
        if let marker { query.append(.init("part-number-marker", String(marker))) }
        return S3Request(operation: operation, method: .GET, path: objectPath(key), query: query, key: key)
    }

    /// The object assembled from `parts` (sorted here; at least one).
    func completeMultipartUpload(key: String, uploadId: String, parts: [S3Client.Part]) throws(S3Error) -> S3Request {
        let operation = "CompleteMultipartUpload"
        try check(key, operation)
        guard !parts.isEmpty else {
            throw S3Error(kind: .permanent, code: "InvalidRequest", message: "a multipart upload needs at least one part",
                          operation: operation, key: key)
        }
        var xml = #"<?xml version="1.0" encoding="UTF-8"?>"#
            + #"<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">"#
        for part in parts.sorted(by: { $0.partNumber < $1.partNumber }) {
            xml += "<Part><PartNumber>\(part.partNumber)</PartNumber><ETag>\"\(Self.xmlEscaped(part.etag))\"</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        let body = Array(xml.utf8)
        // The body is small and in memory: signing its real hash costs nothing, even over TLS.
        return S3Request(operation: operation, method: .POST, path: objectPath(key), query: [.init("uploadId", uploadId)],
                         headers: [.init("Content-Type", "application/xml")], body: .bytes(body),
                         payloadHash: SHA256.hexDigest(body), key: key)
    }

    func abortMultipartUpload(key: String, uploadId: String) throws(S3Error) -> S3Request {
        let operation = "AbortMultipartUpload"
        try check(key, operation)
        return S3Request(operation: operation, method: .DELETE, path: objectPath(key), query: [.init("uploadId", uploadId)],
                         key: key)
    }

    /// `RestoreObject` for `days` days at `tier`.
    func restoreObject(key: String, days: Int, tier: String) throws(S3Error) -> S3Request {
        let operation = "RestoreObject"
        try check(key, operation)
        let xml = "<RestoreRequest xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Days>\(days)</Days>"
            + "<GlacierJobParameters><Tier>\(Self.xmlEscaped(tier))</Tier></GlacierJobParameters></RestoreRequest>"
        let body = Array(xml.utf8)
        return S3Request(operation: operation, method: .POST, path: objectPath(key), query: [.init("restore")],
                         headers: [.init("Content-Type", "application/xml"), .init("Content-MD5", S3Client.contentMD5(of: body))],
                         body: .bytes(body), payloadHash: payloadHash(of: body), key: key)
    }

    /// The payload hash to sign for a body held in memory: its SHA-256 over plain HTTP,
    /// `UNSIGNED-PAYLOAD` over TLS (Content-MD5 guards the bytes).
    func payloadHash(of bytes: [UInt8]) -> String {
        signsPayload ? SHA256.hexDigest(bytes) : SigV4Signer.unsignedPayload
    }

    func check(_ key: String, _ operation: String) throws(S3Error) {
        guard !key.isEmpty, key.utf8.count <= 1024 else {
            throw S3Error(kind: .permanent, code: "InvalidRequest",
                          message: "object keys are 1 to 1024 bytes of UTF-8", operation: operation, key: key)
        }
        // Byte for byte, as S3 and the session policy compare keys (`hasPrefix` is Unicode
        // equivalence, which a key is not).
        if let requiredKeyPrefix, !key.utf8.starts(with: requiredKeyPrefix.utf8) {
            throw S3Error(kind: .permanent, code: "InvalidRequest",
                          message: "refusing a key outside \(requiredKeyPrefix)", operation: operation, key: key)
        }
    }

    private func objectHeaders(contentType: String, metadata: [String: String], storageClass: String?,
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

    private static func xmlEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }
}
