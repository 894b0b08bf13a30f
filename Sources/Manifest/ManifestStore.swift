import Bucket
import Logging
import ManifestFormat
import PhotolalaCore
import Vault

/// The manifest's objects in the bucket under `metadata/{userId}/`, through the stage's
/// session: each request on its own, with no transient retry in place
/// (`BucketBudget.handBack`): a failed step is tried again on the stage's backoff.
struct ManifestStore: ManifestObjects {
    let session: BucketSession
    let prefix: String

    init(session: BucketSession, userId: String) {
        self.session = session
        prefix = ManifestKeys.userPrefix(userId)
    }

    func keys(under prefix: String, from token: String?) async throws(S3Error) -> (keys: [String], next: String?) {
        let page = try await session.perform(under: self.prefix) { bucket throws(S3Error) in
            try await bucket.listObjects(prefix: prefix, continuationToken: token)
        }
        return (page.objects.map(\.key), page.nextContinuationToken)
    }

    func bytes(_ key: String) async throws(S3Error) -> [UInt8]? {
        try await session.perform(under: prefix) { bucket throws(S3Error) in try await bucket.getObjectIfPresent(key: key)?.bytes }
    }

    func put(_ key: String, _ bytes: [UInt8], contentType: String = "application/octet-stream", ifNoneMatch: Bool = false) async throws(S3Error) {
        _ = try await session.perform(under: prefix) { bucket throws(S3Error) in
            try await bucket.putObject(key: key, bytes: bytes, contentType: contentType, ifNoneMatch: ifNoneMatch)
        }
    }

    func delete(_ key: String) async throws(S3Error) {
        try await session.perform(under: prefix) { bucket throws(S3Error) in try await bucket.deleteObject(key: key) }
    }

    /// The SHA-256 the chain's head `seq` has in the bucket under `key`: the log segment's
    /// own, or (`snapshot`: `seq` is a snapshot too) what the snapshot's index follows; nil:
    /// neither opens.
    func headSHA(_ seq: Int64, snapshot: Bool, _ keys: ManifestKeys, _ key: MetadataKey) async throws -> String? {
        if let bytes = try await self.bytes(keys.log(seq)),
           let (segment, _) = try? ManifestSegment.open(bytes, key: key, objectKey: keys.log(seq)),
           segment.header.kind == .log, segment.header.seq == seq {
            return ManifestSegment.sealedDigestHex(of: bytes)
        }
        if snapshot, let bytes = try await self.bytes(keys.snapshotIndex(seq)),
           let (index, _) = try? ManifestSegment.open(bytes, key: key, objectKey: keys.snapshotIndex(seq)),
           index.header.kind == .snapshotIndex, let prev = index.header.prev {
            return prev
        }
        return nil
    }

    /// Deletes `stale` one by one, then records how many went (and, if one failed after
    /// some went, that it did).
    func delete(_ stale: [String], _ keys: ManifestKeys, why: String, audit: (any AuditRecorder)?, logger: Logger) async throws {
        guard !stale.isEmpty else { return }
        var deleted = 0
        func record(_ outcome: AuditOutcome, _ error: (any Error)? = nil) {
            var details: AuditDetails = ["prefix": .string(keys.prefix), "count": .int(Int64(deleted)), "why": .string(why)]
            if let error { details["error"] = .string("\(error)"); details["of"] = .int(Int64(stale.count)) }
            audit?.record(AuditEvent(.s3Delete, by: .daemon, outcome, details))
            logger.info("deleted manifest objects", metadata: ["prefix": "\(keys.prefix)", "count": "\(deleted)", "why": "\(why)"])
        }
        do {
            for key in stale {
                try await delete(key)
                deleted += 1
            }
        } catch {
            // What went before the failure is recorded; a delete that failed removed nothing.
            if deleted > 0 { record(.failed, error) }
            throw error
        }
        record(.ok)
    }
}
