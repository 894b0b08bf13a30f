import NIOCore
import PhotolalaCore

/// The real `Bucket`: an `S3Client` (limited to one key prefix) and the credentials of
/// one grant. Made by `S3Transport` for each attempt of a `BucketSession`.
struct S3Bucket: Bucket {
    let client: S3Client
    let credentials: S3Credentials

    var signsPayload: Bool { client.signsPayload }

    func putObject(key: String, path: String, offset: Int64, length: Int64?, contentMD5: String, contentType: String,
                   metadata: [String: String], storageClass: String?, payloadSHA256: String?, expected: FileIdentity?,
                   followSymlinks: Bool, ifNoneMatch: Bool) async throws(S3Error) -> String {
        try await client.putObject(key: key, path: path, offset: offset, length: length, contentMD5: contentMD5,
                                   contentType: contentType, metadata: metadata, storageClass: storageClass,
                                   payloadSHA256: payloadSHA256, expected: expected, followSymlinks: followSymlinks,
                                   ifNoneMatch: ifNoneMatch, credentials: credentials)
    }

    func putObject(key: String, bytes: [UInt8], contentType: String, metadata: [String: String], ifMatch: String?,
                   bareIfMatch: Bool, ifNoneMatch: Bool) async throws(S3Error) -> String {
        try await client.putObject(key: key, bytes: bytes, contentType: contentType, metadata: metadata, ifMatch: ifMatch,
                                   bareIfMatch: bareIfMatch, ifNoneMatch: ifNoneMatch, credentials: credentials)
    }

    func headObject(key: String) async throws(S3Error) -> S3Client.ObjectInfo? {
        try await client.headObject(key: key, credentials: credentials)
    }

    func getObjectIfPresent(key: String) async throws(S3Error) -> (bytes: [UInt8], etag: String)? {
        try await client.getObjectIfPresent(key: key, credentials: credentials)
    }

    func getObject(key: String, range: ClosedRange<Int64>?, expectedBytes: Int64,
                   onHead: (@Sendable (S3Client.ObjectHead) async throws -> Void)?,
                   consume: @Sendable (ByteBuffer) async throws -> Void) async throws(S3Error) -> S3Client.ObjectHead {
        try await client.getObject(key: key, range: range, expectedBytes: expectedBytes, credentials: credentials,
                                   onHead: onHead, consume: consume)
    }

    func listObjects(prefix: String, continuationToken: String?, maxKeys: Int) async throws(S3Error) -> S3Client.ListPage {
        try await client.listObjects(prefix: prefix, continuationToken: continuationToken, maxKeys: maxKeys,
                                     credentials: credentials)
    }

    func deleteObject(key: String) async throws(S3Error) {
        try await client.deleteObject(key: key, credentials: credentials)
    }

    func createMultipartUpload(key: String, contentType: String, metadata: [String: String],
                               storageClass: String?) async throws(S3Error) -> String {
        try await client.createMultipartUpload(key: key, contentType: contentType, metadata: metadata,
                                               storageClass: storageClass, credentials: credentials)
    }

    func uploadPart(key: String, uploadId: String, partNumber: Int, path: String, offset: Int64, length: Int64,
                    contentMD5: String?, payloadSHA256: String?, expected: FileIdentity?,
                    followSymlinks: Bool) async throws(S3Error) -> String {
        try await client.uploadPart(key: key, uploadId: uploadId, partNumber: partNumber, path: path, offset: offset,
                                    length: length, contentMD5: contentMD5, payloadSHA256: payloadSHA256,
                                    expected: expected, followSymlinks: followSymlinks, credentials: credentials)
    }

    func listParts(key: String, uploadId: String) async throws(S3Error) -> [S3Client.Part] {
        try await client.listParts(key: key, uploadId: uploadId, credentials: credentials)
    }

    func completeMultipartUpload(key: String, uploadId: String, parts: [S3Client.Part]) async throws(S3Error) -> String {
        try await client.completeMultipartUpload(key: key, uploadId: uploadId, parts: parts, credentials: credentials)
    }

    func abortMultipartUpload(key: String, uploadId: String) async throws(S3Error) {
        try await client.abortMultipartUpload(key: key, uploadId: uploadId, credentials: credentials)
    }

    func restoreObject(key: String, days: Int, tier: String) async throws(S3Error) -> S3Client.RestoreRequest {
        try await client.restoreObject(key: key, days: days, tier: tier, credentials: credentials)
    }
}
