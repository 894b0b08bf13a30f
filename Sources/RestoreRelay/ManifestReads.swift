import Bucket
import ManifestFormat
import PhotolalaCore

/// A device's manifest objects, read through the restore's session and its budget.
struct ManifestReads: ManifestObjects {
    let session: BucketSession
    let userId: String
    let budget: BucketBudget

    /// Every object under `prefix`, with its time.
    func listing(under prefix: String) async throws(S3Error) -> [ListedObject] {
        var out: [ListedObject] = []
        var token: String?
        repeat {
            let page = try await session.perform(under: ManifestKeys.userPrefix(userId), budget: budget) { [token] bucket throws(S3Error) in
                try await bucket.listObjects(prefix: prefix, continuationToken: token)
            }
            out += page.objects
            token = page.nextContinuationToken
        } while token != nil
        return out
    }

    func keys(under prefix: String, from token: String?) async throws(S3Error) -> (keys: [String], next: String?) {
        let page = try await session.perform(under: ManifestKeys.userPrefix(userId), budget: budget) { bucket throws(S3Error) in
            try await bucket.listObjects(prefix: prefix, continuationToken: token)
        }
        return (page.objects.map(\.key), page.nextContinuationToken)
    }

    func bytes(_ key: String) async throws(S3Error) -> [UInt8]? {
        try await session.perform(under: ManifestKeys.userPrefix(userId), budget: budget) { bucket throws(S3Error) in
            try await bucket.getObjectIfPresent(key: key)?.bytes
        }
    }
}
