import Foundation

/// Short-lived STS credentials for one user's prefixes. The caller (the credentials
/// service) owns refreshing them; the S3 client takes a value per request.
///
/// Every textual form (`description`, `debugDescription`, `dump`, string interpolation)
/// redacts: only the first four characters of the key id (enough to tell `ASIA` from
/// `AKIA` and to match a log line to a vend) ever reach a log.
package struct S3Credentials: Sendable, Equatable {
    package var accessKeyId: String
    package var secretAccessKey: String
    package var sessionToken: String?
    package var expiration: Date

    package init(accessKeyId: String, secretAccessKey: String, sessionToken: String? = nil,
                expiration: Date = .distantFuture) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiration = expiration
    }

    /// True when the credentials expire within `margin` seconds of `now` (or already have).
    package func expires(within margin: TimeInterval, of now: Date = Date()) -> Bool {
        expiration.timeIntervalSince(now) <= margin
    }

    /// `ASIA…` style: enough to correlate, never enough to use.
    package var redactedAccessKeyId: String {
        accessKeyId.count <= 4 ? String(repeating: "*", count: accessKeyId.count) : accessKeyId.prefix(4) + "…"
    }
}

extension S3Credentials: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    package var description: String {
        let expiry = expiration == .distantFuture ? "never" : ISO8601DateFormatter().string(from: expiration)
        return "S3Credentials(accessKeyId: \(redactedAccessKeyId), secretAccessKey: <redacted>, "
            + "sessionToken: \(sessionToken == nil ? "none" : "<redacted>"), expiration: \(expiry))"
    }

    package var debugDescription: String { description }

    package var customMirror: Mirror {
        Mirror(self, children: [
            "accessKeyId": redactedAccessKeyId,
            "secretAccessKey": "<redacted>",
            "sessionToken": sessionToken == nil ? "none" : "<redacted>",
            "expiration": expiration,
        ], displayStyle: .struct)
    }
}
