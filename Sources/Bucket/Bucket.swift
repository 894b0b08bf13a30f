/// Bucket: the one way to S3 — SigV4, the S3 client, TLS trust, the `Bucket` protocol
/// every stage talks to and the `BucketSession` that signs for it.
import NIOCore
import PhotolalaCore

/// The operations the stages use on one user's part of the bucket, already signed: the
/// real one is an `S3Client` with a grant's credentials (`S3Bucket`), the tests' is
/// `BucketTesting.InMemoryBucket`. A stage gets one inside `BucketSession.perform`, which
/// owns credentials, clock skew and retries; keys outside the session's prefix are refused.
///
/// Every failure is an `S3Error` whose `kind` says what to do next. Conveniences with the
/// usual defaults are in the extension below.
package protocol Bucket: Sendable {
    /// True when bodies go over plain HTTP and are signed with their real SHA-256: a
    /// caller that has it passes `payloadSHA256` and saves a read.
    var signsPayload: Bool { get }

    /// One object from `length` bytes of the file at `path` from `offset` (to its end when
    /// nil), with `contentMD5` (base64) checked by S3. `expected`: refuse any other file
    /// than the one hashed. `ifNoneMatch`: only if the key is free (else `.preconditionFailed`).
    /// Returns the ETag.
    func putObject(key: String, path: String, offset: Int64, length: Int64?, contentMD5: String, contentType: String,
                   metadata: [String: String], storageClass: String?, payloadSHA256: String?, expected: FileIdentity?,
                   followSymlinks: Bool, ifNoneMatch: Bool) async throws(S3Error) -> String
    /// One small object from memory. `ifMatch`: replace only this ETag, sent quoted as S3
    /// returns it or, `bareIfMatch`, without the quotes (for a store that refuses the quoted
    /// form: docs/decisions.md, "What Pacific does differently"); `ifNoneMatch`: only if
    /// the key is free. Returns the ETag.
    func putObject(key: String, bytes: [UInt8], contentType: String, metadata: [String: String], ifMatch: String?,
                   bareIfMatch: Bool, ifNoneMatch: Bool) async throws(S3Error) -> String
    /// Size, ETag and storage class of `key`; nil when there is no such key.
    func headObject(key: String) async throws(S3Error) -> S3Client.ObjectInfo?
    /// A small object whole and its ETag, or nil when there is no such key.
    func getObjectIfPresent(key: String) async throws(S3Error) -> (bytes: [UInt8], etag: String)?
    /// Streams the object (or the bytes `range`, both ends included) into `consume` in
    /// order; `onHead` hears the answer's head before the first byte.
    func getObject(key: String, range: ClosedRange<Int64>?, expectedBytes: Int64,
                   onHead: (@Sendable (S3Client.ObjectHead) async throws -> Void)?,
                   consume: @Sendable (ByteBuffer) async throws -> Void) async throws(S3Error) -> S3Client.ObjectHead
    /// One page (at most `maxKeys`, ≤ 1,000) of the keys under `prefix`, in key order.
    func listObjects(prefix: String, continuationToken: String?, maxKeys: Int) async throws(S3Error) -> S3Client.ListPage
    /// Deletes `key`; a missing key is not an error.
    func deleteObject(key: String) async throws(S3Error)
    /// Starts a multipart upload; returns its upload id.
    func createMultipartUpload(key: String, contentType: String, metadata: [String: String],
                               storageClass: String?) async throws(S3Error) -> String
    /// Part `partNumber` from a file range; `contentMD5` nil: read from the range. Returns its ETag.
    func uploadPart(key: String, uploadId: String, partNumber: Int, path: String, offset: Int64, length: Int64,
                    contentMD5: String?, payloadSHA256: String?, expected: FileIdentity?,
                    followSymlinks: Bool) async throws(S3Error) -> String
    /// The parts S3 holds for an upload, in part order (`NoSuchUpload`: start over).
    func listParts(key: String, uploadId: String) async throws(S3Error) -> [S3Client.Part]
    /// Assembles the object; returns its ETag (empty when the store does not say).
    func completeMultipartUpload(key: String, uploadId: String, parts: [S3Client.Part]) async throws(S3Error) -> String
    /// Discards an upload and its parts; one already gone counts as aborted.
    func abortMultipartUpload(key: String, uploadId: String) async throws(S3Error)
    /// Asks an archived object (GLACIER, DEEP_ARCHIVE) back for `days`.
    func restoreObject(key: String, days: Int, tier: String) async throws(S3Error) -> S3Client.RestoreRequest
}

extension Bucket {
    package func putObject(key: String, path: String, offset: Int64 = 0, length: Int64? = nil, contentMD5: String,
                           contentType: String, metadata: [String: String] = [:], storageClass: String? = nil,
                           payloadSHA256: String? = nil, expected: FileIdentity? = nil, followSymlinks: Bool = true,
                           ifNoneMatch: Bool = false) async throws(S3Error) -> String {
        try await putObject(key: key, path: path, offset: offset, length: length, contentMD5: contentMD5,
                            contentType: contentType, metadata: metadata, storageClass: storageClass,
                            payloadSHA256: payloadSHA256, expected: expected, followSymlinks: followSymlinks,
                            ifNoneMatch: ifNoneMatch)
    }

    package func putObject(key: String, bytes: [UInt8], contentType: String, metadata: [String: String] = [:],
                           ifMatch: String? = nil, bareIfMatch: Bool = false, ifNoneMatch: Bool = false) async throws(S3Error) -> String {
        try await putObject(key: key, bytes: bytes, contentType: contentType, metadata: metadata, ifMatch: ifMatch,
                            bareIfMatch: bareIfMatch, ifNoneMatch: ifNoneMatch)
    }

    /// The whole (small) object; `.notFound` when there is none.
    package func getObject(key: String) async throws(S3Error) -> [UInt8] {
        guard let found = try await getObjectIfPresent(key: key) else {
            throw S3Error(kind: .notFound, status: 404, code: "NoSuchKey", message: "The specified key does not exist.",
                          operation: "GetObject", key: key)
        }
        return found.bytes
    }

    package func getObject(key: String, range: ClosedRange<Int64>? = nil, expectedBytes: Int64 = 0,
                           onHead: (@Sendable (S3Client.ObjectHead) async throws -> Void)? = nil,
                           consume: @Sendable (ByteBuffer) async throws -> Void) async throws(S3Error) -> S3Client.ObjectHead {
        try await getObject(key: key, range: range, expectedBytes: expectedBytes, onHead: onHead, consume: consume)
    }

    package func listObjects(prefix: String, continuationToken: String? = nil,
                             maxKeys: Int = 1000) async throws(S3Error) -> S3Client.ListPage {
        try await listObjects(prefix: prefix, continuationToken: continuationToken, maxKeys: maxKeys)
    }

    package func createMultipartUpload(key: String, contentType: String, metadata: [String: String] = [:],
                                       storageClass: String? = nil) async throws(S3Error) -> String {
        try await createMultipartUpload(key: key, contentType: contentType, metadata: metadata, storageClass: storageClass)
    }

    package func uploadPart(key: String, uploadId: String, partNumber: Int, path: String, offset: Int64, length: Int64,
                            contentMD5: String? = nil, payloadSHA256: String? = nil, expected: FileIdentity? = nil,
                            followSymlinks: Bool = true) async throws(S3Error) -> String {
        try await uploadPart(key: key, uploadId: uploadId, partNumber: partNumber, path: path, offset: offset,
                             length: length, contentMD5: contentMD5, payloadSHA256: payloadSHA256, expected: expected,
                             followSymlinks: followSymlinks)
    }

    package func restoreObject(key: String, days: Int = 7, tier: String = "Standard") async throws(S3Error) -> S3Client.RestoreRequest {
        try await restoreObject(key: key, days: days, tier: tier)
    }
}
