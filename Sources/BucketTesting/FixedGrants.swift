import Bucket
import Foundation
import PhotolalaCore

/// A grant source for tests: one user, grants numbered from 1 (`token-1`, …), a new one
/// each time S3 refuses the current one, and a sign-out or pause on demand.
package actor FixedGrants: GrantSource {
    package nonisolated let credentialDrops = ChangeFeed()
    package private(set) var userId: String?
    package private(set) var deviceId: String?
    /// Grants handed out so far (the current one's number).
    package private(set) var issued = 1
    /// Grants S3 refused.
    package private(set) var rejections = 0
    private var current: BucketGrant
    private var refusal: GrantUnavailable?
    private let bucket: String
    private let region: String

    package init(userId: String = "8F1E2D3C-0000-4000-8000-000000000001", deviceId: String? = "test-device",
                 bucket: String = "photolala-test", region: String = "us-east-1") {
        self.userId = userId
        self.deviceId = deviceId
        self.bucket = bucket
        self.region = region
        current = Self.grant(1, bucket: bucket, region: region)
    }

    package func grant() async throws(GrantUnavailable) -> BucketGrant {
        if let refusal { throw refusal }
        return current
    }

    package func rejected(_ grant: BucketGrant) async {
        guard grant == current else { return }
        rejections += 1
        issued += 1
        current = Self.grant(issued, bucket: bucket, region: region)
    }

    /// No grant from now on (`nil`: grants again), and the credentials in hand dropped.
    package func refuse(_ why: GrantUnavailable?) {
        refusal = why
        if why == .signedOut { userId = nil }
        if why != nil { credentialDrops.changed() }
    }

    /// Signed in (again) as `userId`.
    package func signIn(_ userId: String) {
        self.userId = userId
        refusal = nil
    }

    private static func grant(_ number: Int, bucket: String, region: String) -> BucketGrant {
        BucketGrant(credentials: S3Credentials(accessKeyId: "ASIATEST\(number)", secretAccessKey: "secret-\(number)",
                                               sessionToken: "token-\(number)", expiration: .distantFuture),
                    bucket: bucket, region: region)
    }
}
