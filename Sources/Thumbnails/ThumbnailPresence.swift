import S3

/// "Is this thumbnail already in the bucket?" (a phone may have made it; app-catalog.md
/// says an existing one is kept). Asked with a HEAD for now; the one place to switch to
/// the bucket inventory in the queue database once it exists (s3-layout.md).
struct ThumbnailPresence: Sendable {
    /// nil when S3 would not say (HEAD forbidden by a stricter policy): then the upload's
    /// `If-None-Match: *` keeps whatever is there.
    func exists(key: String, client: S3Client, credentials: S3Credentials) async throws(S3Error) -> Bool? {
        do {
            return try await client.headObject(key: key, credentials: credentials) != nil
        } catch where error.kind == .forbidden {
            return nil
        }
    }
}
