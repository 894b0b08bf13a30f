import Backend
import Bucket

/// The account as every stage's `BucketSession` sees it: the STS grant in hand, refreshed
/// when S3 refuses it.
extension AccountService: GrantSource {
    package func grant() async throws(GrantUnavailable) -> BucketGrant {
        do {
            return try await credentials().bucketGrant
        } catch {
            switch error {
            case .signedOut: throw .signedOut
            case .paused(let reason): throw .paused(reason)
            case .cancelled: throw .cancelled
            }
        }
    }

    package func rejected(_ grant: BucketGrant) async {
        // Only the credentials that were refused: a newer grant may already be in place.
        guard let held = creds.grant, held.bucketGrant == grant else { return }
        rejectedByS3(held)
    }
}

extension STSGrant {
    /// The grant as a bucket session signs with it.
    package var bucketGrant: BucketGrant {
        BucketGrant(credentials: s3Credentials, bucket: bucket, region: region, endpoint: endpoint)
    }
}
