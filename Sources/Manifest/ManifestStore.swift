import AsyncHTTPClient
import Backend
import Bucket
import Foundation
import Logging
import ManifestFormat

/// The manifest's objects in the bucket, for one account: listing, reading (checked),
/// writing and deleting under `metadata/{userId}/`. Made per grant, as the uploader makes
/// its clients, over one shared connection pool.
package struct ManifestStore: ManifestObjects {
    package let client: S3Client
    package let credentials: S3Credentials
    package let userId: String

    package init(grant: STSGrant, userId: String, trust: TLSTrust, http: HTTPClient, clockOffset: TimeInterval,
                logger: Logger) throws(S3Error) {
        client = try S3Client(configuration: grant.s3Configuration(keyPrefix: ManifestKeys.userPrefix(userId), trust: trust),
                              httpClient: http, clockOffset: clockOffset, logger: logger)
        credentials = grant.s3Credentials
        self.userId = userId
    }

    /// Every key under `prefix`, page after page.
    package func keys(under prefix: String) async throws(S3Error) -> [String] {
        var keys: [String] = []
        var token: String?
        repeat {
            let page = try await client.listObjects(prefix: prefix, continuationToken: token, credentials: credentials)
            keys += page.objects.map(\.key)
            token = page.nextContinuationToken
        } while token != nil
        return keys
    }

    /// The object's bytes, nil when there is no such key.
    package func bytes(_ key: String) async throws(S3Error) -> [UInt8]? {
        try await client.getObjectIfPresent(key: key, credentials: credentials)?.bytes
    }

    package func put(_ key: String, _ bytes: [UInt8], contentType: String = "application/octet-stream", ifNoneMatch: Bool = false) async throws(S3Error) {
        _ = try await client.putObject(key: key, bytes: bytes, contentType: contentType, ifNoneMatch: ifNoneMatch, credentials: credentials)
    }

    package func delete(_ key: String) async throws(S3Error) {
        try await client.deleteObject(key: key, credentials: credentials)
    }
}
