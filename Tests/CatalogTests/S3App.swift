import Testing
@testable import Catalog
@testable import Bucket

/// The bucket as a Photolala app sees it, with the user's own STS credentials.
struct S3App: Sendable {
    let client: S3Client
    let credentials: S3Credentials
    let userId: String

    func get(_ key: String) async throws -> [UInt8]? {
        try await client.getObjectIfPresent(key: key, credentials: credentials)?.bytes
    }

    func view(sourceLocation: SourceLocation = #_sourceLocation) async throws -> AppView? {
        try await AppView.read(userId: userId, sourceLocation: sourceLocation) { try await get($0) }
    }

    /// As the app publishes after a star or unstar: snapshot, then pointer, no condition.
    func publish(lines: [String]) async throws {
        let rows = lines.sorted { CatalogLine.isNewerOrSame(CatalogLine.parse($0).date, than: CatalogLine.parse($1).date) }
        let body = Array(([CatalogFormat.header] + rows).map { $0 + "\n" }.joined().utf8)
        let md5 = md5Hex(String(decoding: body, as: UTF8.self))
        _ = try await client.putObject(key: CatalogFormat.snapshotKey(userId: userId, md5: md5), bytes: body,
                                       contentType: "text/csv", credentials: credentials)
        _ = try await client.putObject(key: CatalogFormat.pointerKey(userId: userId), bytes: Array(md5.utf8),
                                       contentType: "text/plain", credentials: credentials)
    }

    /// A stand-in for the photo (only its presence matters here).
    func putPhoto(md5: String) async throws {
        _ = try await client.putObject(key: CatalogFormat.photoKey(userId: userId, md5: md5), bytes: Array("photo".utf8),
                                       contentType: "image/jpeg", credentials: credentials)
    }

    func deletePhoto(md5: String) async throws {
        let key = CatalogFormat.photoKey(userId: userId, md5: md5)
        let response = try await client.execute(.init(operation: "DeleteObject", method: .DELETE, path: "/\(client.configuration.bucket)/" + key, key: key),
                                                credentials: credentials)
        #expect(response.status == 204 || response.status == 200)
    }

    func keys(under prefix: String) async throws -> [String] {
        try await client.listObjects(prefix: prefix, credentials: credentials).objects.map(\.key)
    }

    func contentType(_ key: String) async throws -> String? {
        let response = try await client.execute(.init(operation: "HeadObject", method: .HEAD, path: "/\(client.configuration.bucket)/" + key, key: key),
                                                credentials: credentials)
        return response.header("Content-Type")
    }

    func etag(_ key: String) async throws -> String? {
        try await client.headObject(key: key, credentials: credentials)?.etag
    }
}
