import Digests
import Foundation
import PhotolalaCore

/// Multipart uploads. Nothing appears under the key until `completeMultipartUpload`, so
/// an interrupted upload never leaves a partial object; the upload id and finished parts
/// live in the caller's queue database, and `listParts` lets a restarted daemon resume.
extension S3Client {
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

    /// Starts a multipart upload and returns its upload id. Content type, metadata and
    /// storage class are fixed here, not on the parts.
    package func createMultipartUpload(key: String, contentType: String, metadata: [String: String] = [:],
                                      storageClass: String? = nil,
                                      credentials: S3Credentials) async throws(S3Error) -> String {
        let operation = "CreateMultipartUpload"
        try checkKey(key, operation: operation)
        let headers = try objectHeaders(contentType: contentType, metadata: metadata, storageClass: storageClass,
                                        operation: operation, key: key)
        let response = try await execute(Request(
            operation: operation, method: .POST, path: objectPath(key), query: [.init("uploads")],
            headers: headers, key: key), credentials: credentials)
        guard response.status == 200 else { throw response.error(operation: operation, key: key) }
        let root = S3XMLElement.parse(response.body)
        if root?.name == "Error" { throw response.error(operation: operation, key: key) }
        // Root names are not checked (SDKs don't; moto spells some differently).
        guard let root, let uploadId = root.childText("UploadId"), !uploadId.isEmpty else {
            throw malformed(response, operation: operation, key: key, expected: "InitiateMultipartUploadResult")
        }
        return uploadId
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
        try checkKey(key, operation: operation)
        guard (1...Self.maximumPartCount).contains(partNumber) else {
            throw S3Error(kind: .permanent, code: "InvalidArgument",
                          message: "part numbers run from 1 to 10,000, not \(partNumber)", operation: operation, key: key)
        }
        let file = try OpenFile(path: path, operation: operation, key: key, expected: expected, followSymlinks: followSymlinks)
        let length = try file.checkRange(offset: offset, length: length, operation: operation, key: key)

        var md5 = contentMD5
        var payloadHash = signsPayload ? payloadSHA256 : SigV4Signer.unsignedPayload
        if md5 == nil || payloadHash == nil {
            let digest = try file.digest(offset: offset, length: length, md5: md5 == nil, sha256: payloadHash == nil,
                                         chunkSize: 1 << 20, operation: operation, key: key)
            if md5 == nil { md5 = digest.contentMD5 }
            if payloadHash == nil { payloadHash = digest.sha256Hex }
        }
        let response = try await execute(Request(
            operation: operation, method: .PUT, path: objectPath(key),
            query: [.init("partNumber", String(partNumber)), .init("uploadId", uploadId)],
            headers: [.init("Content-MD5", md5!)], body: .file(file, offset: offset, length: length),
            payloadHash: payloadHash!, key: key), credentials: credentials)
        guard response.status == 200 else { throw response.error(operation: operation, key: key) }
        guard let etag = response.header("ETag").map(Self.unquoted), !etag.isEmpty else {
            throw malformed(response, operation: operation, key: key, expected: "an ETag header")
        }
        return etag
    }

    /// The parts S3 holds for an upload, in part-number order, following pagination.
    /// A `notFound` error with code `NoSuchUpload` means the upload is gone: start over.
    package func listParts(key: String, uploadId: String, credentials: S3Credentials) async throws(S3Error) -> [Part] {
        try await listParts(key: key, uploadId: uploadId, pageSize: 1000, credentials: credentials)
    }

    /// `pageSize` is S3's `max-parts`; small values let tests exercise pagination.
    func listParts(key: String, uploadId: String, pageSize: Int, credentials: S3Credentials) async throws(S3Error) -> [Part] {
        let operation = "ListParts"
        try checkKey(key, operation: operation)
        var parts: [Part] = []
        var marker: Int?
        // 10,000 parts at most: more pages than that means the server is looping.
        let maximumPages = Self.maximumPartCount / max(1, pageSize) + 2
        for _ in 0..<maximumPages {
            var query: [SigV4Signer.QueryItem] = [.init("uploadId", uploadId), .init("max-parts", String(pageSize))]
            if let marker { query.append(.init("part-number-marker", String(marker))) }
            let response = try await execute(Request(operation: operation, method: .GET, path: objectPath(key),
                                                     query: query, key: key), credentials: credentials)
            guard response.status == 200 else { throw response.error(operation: operation, key: key) }
            let parsed = S3XMLElement.parse(response.body)
            if parsed?.name == "Error" { throw response.error(operation: operation, key: key) }
            // moto answers `<ListPartsResponse>` where S3 answers `<ListPartsResult>`.
            guard let root = parsed else {
                throw malformed(response, operation: operation, key: key, expected: "ListPartsResult")
            }
            for element in root.children("Part") {
                guard let number = element.childText("PartNumber").flatMap({ Int($0) }),
                      let etag = element.childText("ETag") else {
                    throw malformed(response, operation: operation, key: key, expected: "PartNumber and ETag in each Part")
                }
                parts.append(Part(partNumber: number, etag: Self.unquoted(etag),
                                  size: element.childText("Size").flatMap { Int64($0) } ?? 0))
            }
            guard root.childText("IsTruncated") == "true" else {
                return parts.sorted { $0.partNumber < $1.partNumber }
            }
            let next = root.childText("NextPartNumberMarker").flatMap { Int($0) } ?? parts.last?.partNumber
            guard let next, next != marker else {
                throw malformed(response, operation: operation, key: key, expected: "a NextPartNumberMarker that advances")
            }
            marker = next
        }
        throw S3Error(kind: .transient, code: "MalformedResponse", message: "ListParts did not end after \(maximumPages) pages",
                      operation: operation, key: key)
    }

    /// Assembles the object from `parts` (sorted here) and returns its ETag (empty when the
    /// store does not say).
    ///
    /// S3 may answer 200 and still fail: the status goes out before the assembly ends,
    /// and the failure arrives as an `<Error>` body. That is detected and thrown like any
    /// other error (usually `transient`, `InternalError`).
    package func completeMultipartUpload(key: String, uploadId: String, parts: [Part],
                                        credentials: S3Credentials) async throws(S3Error) -> String {
        let operation = "CompleteMultipartUpload"
        try checkKey(key, operation: operation)
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
        let response = try await execute(Request(
            operation: operation, method: .POST, path: objectPath(key), query: [.init("uploadId", uploadId)],
            headers: [.init("Content-Type", "application/xml")], body: .bytes(body),
            payloadHash: SHA256.hexDigest(body), key: key), credentials: credentials)
        guard response.status == 200 else { throw response.error(operation: operation, key: key) }
        guard let root = S3XMLElement.parse(response.body) else {
            throw malformed(response, operation: operation, key: key, expected: "CompleteMultipartUploadResult")
        }
        if root.name == "Error" { throw response.error(operation: operation, key: key) }
        // Ceph RGW 16 (Pacific) answers `<ETag></ETag>` for an upload it did assemble: an
        // empty ETag is not a failure, and the caller knows the ETag from the parts it sent.
        return Self.unquoted(root.childText("ETag") ?? "")
    }

    /// Discards an upload and its parts. An upload that is already gone counts as aborted.
    package func abortMultipartUpload(key: String, uploadId: String, credentials: S3Credentials) async throws(S3Error) {
        let operation = "AbortMultipartUpload"
        try checkKey(key, operation: operation)
        let response = try await execute(Request(operation: operation, method: .DELETE, path: objectPath(key),
                                                 query: [.init("uploadId", uploadId)], key: key),
                                         credentials: credentials)
        switch response.status {
        case 200, 204: return
        default:
            let error = response.error(operation: operation, key: key)
            if error.code == "NoSuchUpload" { return }
            throw error
        }
    }

    func malformed(_ response: Response, operation: String, key: String, expected: String) -> S3Error {
        // A 200 with the wrong body is most likely a truncated answer or a proxy: retry.
        S3Error(kind: .transient, status: response.status, code: "MalformedResponse",
                message: "expected \(expected) in the answer (got \(response.body.count) bytes: \(String(decoding: response.body.prefix(120), as: UTF8.self)))", requestId: response.requestId,
                operation: operation, key: key)
    }

    static func xmlEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }
}
