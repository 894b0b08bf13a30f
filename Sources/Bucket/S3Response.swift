import Foundation
import PhotolalaCore

/// An answer read whole, and what it says for each operation: the object's head, a page
/// of keys or parts, an upload id, an ETag — or the `S3Error` it carries. S3 may answer
/// 200 with an `<Error>` body (the status goes out before a multipart assembly ends), and
/// a 200 with a body of the wrong shape is most likely cut short or a proxy's: both are
/// errors here, never a value.
package struct S3Response: Sendable {
    package var status: Int
    var headers: [(name: String, value: String)]
    package var body: [UInt8]
    /// The request's operation and key, for the errors.
    var operation: String
    var key: String?

    func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    var requestId: String? { header("x-amz-request-id") }

    /// The `ETag` header, without quotes; empty when absent.
    var etag: String { Self.unquoted(header("ETag") ?? "") }

    /// The error this answer carries.
    var failure: S3Error {
        S3Error.decode(status: status, headers: headers, body: body, operation: operation, key: key)
    }

    /// Throws the error unless the status is one of `expected`.
    func expect(_ expected: Int...) throws(S3Error) {
        guard expected.contains(status) else { throw failure }
    }

    /// HEAD: the object's size, ETag, storage class, restore and encryption; nil on a 404.
    func objectInfo() throws(S3Error) -> S3Client.ObjectInfo? {
        switch status {
        case 200:
            guard let size = header("Content-Length").flatMap({ Int64($0) }) else {
                throw S3Error(kind: .transient, status: 200, code: "MalformedResponse",
                              message: "HEAD answer without Content-Length", requestId: requestId,
                              operation: operation, key: key)
            }
            return S3Client.ObjectInfo(size: size, etag: etag, storageClass: header("x-amz-storage-class"),
                                       restore: header("x-amz-restore").map(Self.restoreState),
                                       serverSideEncryption: header("x-amz-server-side-encryption"),
                                       contentType: header("Content-Type"), originalFormat: header("x-amz-meta-original-format"),
                                       lastModified: header("Last-Modified").flatMap(S3Error.parseHTTPDate))
        case 404:
            return nil
        default:
            throw failure
        }
    }

    /// A `ListBucketResult` page.
    func listPage() throws(S3Error) -> S3Client.ListPage {
        try expect(200)
        let root = try document(expected: "ListBucketResult")
        var objects: [ListedObject] = []
        for element in root.children("Contents") {
            guard let key = element.childText("Key"), let size = element.childText("Size").flatMap({ Int64($0) }) else {
                throw malformed(expected: "Contents with Key and Size")
            }
            objects.append(ListedObject(
                key: key, size: size, etag: Self.unquoted(element.childText("ETag") ?? ""),
                storageClass: element.childText("StorageClass").flatMap { $0.isEmpty ? nil : $0 } ?? "STANDARD",
                lastModified: element.childText("LastModified").flatMap(S3Error.parseISO8601)))
        }
        let truncated = root.childText("IsTruncated")?.lowercased() == "true"
        let token = root.childText("NextContinuationToken").flatMap { $0.isEmpty ? nil : $0 }
        if truncated && token == nil { throw malformed(expected: "a NextContinuationToken on a truncated page") }
        return S3Client.ListPage(objects: objects, nextContinuationToken: truncated ? token : nil)
    }

    /// `InitiateMultipartUploadResult`'s upload id.
    func uploadId() throws(S3Error) -> String {
        try expect(200)
        // Root names are not checked (SDKs don't; moto spells some differently).
        guard let uploadId = try document(expected: "InitiateMultipartUploadResult").childText("UploadId"),
              !uploadId.isEmpty else {
            throw malformed(expected: "InitiateMultipartUploadResult")
        }
        return uploadId
    }

    /// `UploadPart`'s ETag, which completing the upload needs.
    func partETag() throws(S3Error) -> String {
        try expect(200)
        guard !etag.isEmpty else { throw malformed(expected: "an ETag header") }
        return etag
    }

    /// One `ListParts` page: its parts, whether more follow, and where the next page
    /// starts when S3 says (`NextPartNumberMarker`).
    func partsPage() throws(S3Error) -> (parts: [S3Client.Part], truncated: Bool, nextMarker: Int?) {
        try expect(200)
        // moto answers `<ListPartsResponse>` where S3 answers `<ListPartsResult>`.
        let root = try document(expected: "ListPartsResult")
        var parts: [S3Client.Part] = []
        for element in root.children("Part") {
            guard let number = element.childText("PartNumber").flatMap({ Int($0) }), let etag = element.childText("ETag") else {
                throw malformed(expected: "PartNumber and ETag in each Part")
            }
            parts.append(S3Client.Part(partNumber: number, etag: Self.unquoted(etag),
                                       size: element.childText("Size").flatMap { Int64($0) } ?? 0))
        }
        return (parts, root.childText("IsTruncated") == "true", root.childText("NextPartNumberMarker").flatMap { Int($0) })
    }

    /// `CompleteMultipartUploadResult`'s ETag (empty when the store does not say).
    func completedETag() throws(S3Error) -> String {
        try expect(200)
        // Ceph RGW 16 (Pacific) answers `<ETag></ETag>` for an upload it did assemble: an
        // empty ETag is not a failure, and the caller knows the ETag from the parts it sent.
        return Self.unquoted(try document(expected: "CompleteMultipartUploadResult").childText("ETag") ?? "")
    }

    /// What `RestoreObject` answered.
    func restoreRequest() throws(S3Error) -> S3Client.RestoreRequest {
        switch status {
        case 202: return .started
        case 200: return .available
        case 409 where failure.code == "RestoreAlreadyInProgress": return .inProgress
        default: throw failure
        }
    }

    /// The XML root of a 200 answer: an `<Error>` root is the error it names.
    private func document(expected: String) throws(S3Error) -> S3XMLElement {
        guard let root = S3XMLElement.parse(body) else { throw malformed(expected: expected) }
        if root.name == "Error" { throw failure }
        return root
    }

    /// A 200 with the wrong body is most likely a truncated answer or a proxy: retry.
    func malformed(expected: String) -> S3Error {
        S3Error(kind: .transient, status: status, code: "MalformedResponse",
                message: "expected \(expected) in the answer (got \(body.count) bytes: \(String(decoding: body.prefix(120), as: UTF8.self)))",
                requestId: requestId, operation: operation, key: key)
    }

    /// `x-amz-restore: ongoing-request="true"` while a copy is being brought back;
    /// `ongoing-request="false", expiry-date="…"` once it can be read.
    package static func restoreState(_ header: String) -> S3Client.ObjectInfo.Restore {
        header.replacingOccurrences(of: " ", with: "").contains("ongoing-request=\"true\"") ? .inProgress : .available
    }

    static func unquoted(_ etag: String) -> String {
        var text = Substring(etag.trimmingCharacters(in: .whitespaces))
        if text.hasPrefix("W/") { text = text.dropFirst(2) }
        if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") { text = text.dropFirst().dropLast() }
        return String(text)
    }
}
