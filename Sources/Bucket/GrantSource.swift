import Foundation
import PhotolalaCore

/// Short-lived credentials for one user's part of one bucket: what a `GrantSource` hands
/// out and a `BucketSession` signs with. Every textual form redacts the keys.
package struct BucketGrant: Sendable, Equatable, CustomStringConvertible {
    package var credentials: S3Credentials
    package var bucket: String
    package var region: String
    /// nil: AWS S3 for `region`, virtual-hosted. Set: that endpoint, path-style.
    package var endpoint: String?

    package init(credentials: S3Credentials, bucket: String, region: String, endpoint: String? = nil) {
        self.credentials = credentials
        self.bucket = bucket
        self.region = region
        self.endpoint = endpoint
    }

    /// The S3 client's configuration for this grant's bucket, refusing any key outside
    /// `keyPrefix`, over connections checked against `trust`.
    package func configuration(keyPrefix: String, trust: TLSTrust) -> S3Client.Configuration {
        var configuration = S3Client.Configuration(bucket: bucket, region: region, endpoint: endpoint,
                                                   requiredKeyPrefix: keyPrefix)
        configuration.trust = trust
        return configuration
    }

    package var description: String {
        "BucketGrant(bucket: \(bucket), region: \(region), credentials: \(credentials))"
    }
}

/// Why there is no grant to sign with: nothing a bucket session can fix by retrying.
package enum GrantUnavailable: Error, Sendable, Equatable {
    case signedOut
    case paused(DaemonStatus.PauseReason)
    /// Stopping.
    case cancelled
}

/// Where a `BucketSession` gets its credentials: the account service in the daemon, a
/// fixed source in tests (`BucketTesting.FixedGrants`). The session asks for a grant
/// before each request and says when S3 refused one; the source keeps it fresh.
package protocol GrantSource: Sendable {
    /// Credentials to sign with: at once while valid, otherwise after a refresh.
    func grant() async throws(GrantUnavailable) -> BucketGrant
    /// S3 refused `grant` (expired or revoked): the next `grant()` brings another.
    func rejected(_ grant: BucketGrant) async
    /// The signed-in user (the Photolala user id, as the backend spells it); nil when signed out.
    var userId: String? { get async }
    /// This NAS's device id, once made.
    var deviceId: String? { get async }
    /// Changes when the credentials in hand were dropped (logout, Apple ID revoked, a
    /// subscription pause): whoever uses them stops what is under way.
    var credentialDrops: ChangeFeed { get }
}
