import Foundation

/// Bringing an object in an archive class (GLACIER, DEEP_ARCHIVE) back for reading.
extension S3Client {
    package enum RestoreRequest: Sendable, Equatable {
        /// Asked for now; HEAD says when it is ready (`ObjectInfo.restore`).
        case started
        /// Already asked for earlier, not ready yet.
        case inProgress
        /// A copy is there to read.
        case available
    }

    /// `RestoreObject` for `days` days at `tier` (`Standard`: hours for GLACIER, up to 12 h
    /// for DEEP_ARCHIVE; `Bulk`: cheaper and slower).
    package func restoreObject(key: String, days: Int = 7, tier: String = "Standard",
                              credentials: S3Credentials) async throws(S3Error) -> RestoreRequest {
        let operation = "RestoreObject"
        try checkKey(key, operation: operation)
        let xml = "<RestoreRequest xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Days>\(days)</Days>"
            + "<GlacierJobParameters><Tier>\(Self.xmlEscaped(tier))</Tier></GlacierJobParameters></RestoreRequest>"
        let body = Array(xml.utf8)
        let response = try await execute(Request(
            operation: operation, method: .POST, path: objectPath(key), query: [.init("restore")],
            headers: [.init("Content-Type", "application/xml"), .init("Content-MD5", Self.contentMD5(of: body))],
            body: .bytes(body), payloadHash: payloadHash(of: body), key: key), credentials: credentials)
        switch response.status {
        case 202: return .started
        case 200: return .available
        case 409 where response.error(operation: operation, key: key).code == "RestoreAlreadyInProgress": return .inProgress
        default: throw response.error(operation: operation, key: key)
        }
    }
}
