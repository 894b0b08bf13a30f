import Bucket
import Foundation
import PhotolalaCore

/// A completed sign-in (sections 1 and 2). Holds secrets: its description shows none.
package struct SignIn: Codable, Sendable, Equatable, CustomStringConvertible {
    package var userId: String
    package var accessToken: String
    package var accessTokenExpiresAt: String?
    package var refreshToken: String

    package init(userId: String, accessToken: String, accessTokenExpiresAt: String?, refreshToken: String) {
        self.userId = userId
        self.accessToken = accessToken
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.refreshToken = refreshToken
    }

    package var description: String { "SignIn(userId: \(userId), tokens: [redacted])" }

    /// This sign-in after a refresh: the new access token, and the rotated refresh token
    /// when the backend sent one (stored before anything uses it).
    package func refreshed(with fresh: RefreshedTokens) -> SignIn {
        var updated = self
        updated.accessToken = fresh.accessToken
        updated.accessTokenExpiresAt = fresh.accessTokenExpiresAt
        if let rotated = fresh.refreshToken { updated.refreshToken = rotated }
        return updated
    }
}

/// Section 3's answer. The refresh token may rotate: the new one must be stored before use.
package struct RefreshedTokens: Codable, Sendable, Equatable, CustomStringConvertible {
    package var accessToken: String
    package var accessTokenExpiresAt: String?
    package var refreshToken: String?
    package var description: String { "RefreshedTokens([redacted])" }
}

/// Section 2: what the user is shown while pairing.
package struct DeviceAuthorization: Codable, Sendable, Equatable {
    package var deviceCode: String
    package var userCode: String
    package var verificationUri: String
    package var verificationUriComplete: String?
    package var expiresIn: Int
    package var interval: Int?
}

/// Section 4: short-lived storage credentials and where to use them.
package struct STSGrant: Sendable, Equatable, CustomStringConvertible {
    package var accessKeyId: String
    package var secretAccessKey: String
    package var sessionToken: String
    package var expiration: Date
    package var region: String
    package var bucket: String
    /// nil: AWS S3 for `region`, virtual-hosted style. Set: that endpoint, path-style.
    package var endpoint: String?

    package init(accessKeyId: String, secretAccessKey: String, sessionToken: String, expiration: Date, region: String, bucket: String, endpoint: String?) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiration = expiration
        self.region = region
        self.bucket = bucket
        self.endpoint = endpoint
    }

    package var description: String { "STSGrant(bucket: \(bucket), region: \(region), expires: \(Timestamp.string(expiration)), keys: [redacted])" }

    /// The grant as every stage's bucket session signs with it.
    package var bucketGrant: BucketGrant {
        BucketGrant(credentials: S3Credentials(accessKeyId: accessKeyId, secretAccessKey: secretAccessKey,
                                               sessionToken: sessionToken, expiration: expiration),
                    bucket: bucket, region: region, endpoint: endpoint)
    }
}

/// Section 5.
package struct AppleCredentialState: Sendable, Equatable {
    package enum State: String, Sendable, Codable { case authorized, revoked, notFound, transferred }
    package var state: State
    package var checkedAt: Date?
    package init(state: State, checkedAt: Date?) {
        self.state = state
        self.checkedAt = checkedAt
    }
}

/// What went wrong talking to the backend, classified the way the daemon branches on it.
/// Messages never include a token.
package enum BackendError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 401 invalid_token: the access token expired or is unknown — refresh it once.
    case invalidToken
    /// invalid_grant: the sign-in is gone — the user must log in again.
    case invalidGrant
    /// 403 with a code the queue pauses on (subscription_required, quota_exceeded, account_revoked).
    case forbidden(code: String, message: String)
    /// Pairing answers.
    case authorizationPending, slowDown, expiredToken, accessDenied
    /// A rejected request (400 invalid_request, 401 invalid_token at sign-in, ...).
    case rejected(status: Int, code: String, message: String)
    /// Network trouble, timeouts, 5xx: retry later with backoff.
    case transient(String)

    package var isTransient: Bool {
        if case .transient = self { return true }
        return false
    }

    /// What a refusal at sign-in with an Apple identity token tells the user.
    var identityTokenRefusal: String {
        switch self {
        case .rejected(401, _, let m): "the identity token was refused (bad signature, wrong audience or expired)\(m.isEmpty ? "" : ": \(m)")"
        case .rejected(_, _, let m): "the identity token was refused: \(m.isEmpty ? description : m)"
        default: description
        }
    }

    package var description: String {
        switch self {
        case .invalidToken: "the backend refused the access token (it is refreshed and the call retried)"
        case .invalidGrant: "the sign-in is no longer valid: run `photolalactl login`"
        case let .forbidden(code, message): "the backend refused: \(code)\(message.isEmpty ? "" : " (\(message))")"
        case .authorizationPending: "waiting for the user to confirm"
        case .slowDown: "polling too fast"
        case .expiredToken: "the pairing code expired before it was confirmed: run `photolalactl login` again"
        case .accessDenied: "the pairing was declined on the phone"
        case let .rejected(status, code, message): "the backend refused the request (HTTP \(status) \(code)): \(message)"
        case let .transient(why): "the backend could not be reached: \(why)"
        }
    }
}
