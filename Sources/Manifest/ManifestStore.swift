import AsyncHTTPClient
import Account
import Bucket
import Foundation
import Logging

/// The manifest's objects in the bucket, for one account: listing, reading (checked),
/// writing and deleting under `metadata/{userId}/`. Made per grant, as the uploader makes
/// its clients, over one shared connection pool.
package struct ManifestStore: Sendable {
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

    /// A segment, read and checked; `digest` (hex) must match when given (a snapshot part
    /// against its index).
    package func segment(_ key: String, digest: String? = nil) async throws -> (segment: ManifestSegment, bytes: [UInt8]) {
        guard let bytes = try await bytes(key) else { throw ManifestReadError.missing(key) }
        if let digest, ManifestSegment.digestHex(of: bytes) != digest { throw ManifestReadError.damaged(key, "it is not the part its index names") }
        do {
            return (try ManifestSegment.decode(bytes), bytes)
        } catch {
            throw ManifestReadError.damaged(key, error.description)
        }
    }

    package func put(_ key: String, _ bytes: [UInt8], contentType: String = "application/octet-stream", ifNoneMatch: Bool = false) async throws(S3Error) {
        _ = try await client.putObject(key: key, bytes: bytes, contentType: contentType, ifNoneMatch: ifNoneMatch, credentials: credentials)
    }

    package func delete(_ key: String) async throws(S3Error) {
        try await client.deleteObject(key: key, credentials: credentials)
    }
}

/// Why a manifest could not be read as the listing promised.
package enum ManifestReadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Listed but gone when fetched: compacted away meanwhile; read again.
    case missing(String)
    case damaged(String, String)

    package var description: String {
        switch self {
        case .missing(let key): "\(key) went away while it was being read (the manifest was being compacted); read it again"
        case let .damaged(key, why): "\(key) cannot be trusted: \(why)"
        }
    }
}
