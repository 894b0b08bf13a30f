import Foundation

/// Deleting an object: what the manifest's compaction needs once a snapshot supersedes
/// older segments (s3:DeleteObject is in the session policy of backend-api.md).
extension S3Client {
    /// Deletes `key`; a key that is not there is not an error (S3 answers 204 either way).
    package func deleteObject(key: String, credentials: S3Credentials) async throws(S3Error) {
        let operation = "DeleteObject"
        try checkKey(key, operation: operation)
        let response = try await execute(Request(operation: operation, method: .DELETE, path: objectPath(key), key: key),
                                         credentials: credentials)
        guard response.status == 204 || response.status == 200 || response.status == 404 else {
            throw response.error(operation: operation, key: key)
        }
    }
}
