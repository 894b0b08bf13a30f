import Foundation

/// Short-lived STS credentials for one user's prefixes. The caller (the credentials
/// service) owns refreshing them; the S3 client takes a value per request.
///
/// Every textual form (`description`, `debugDescription`, `dump`, string interpolation)
/// redacts: only the first four characters of the key id (enough to tell `ASIA` from
/// `AKIA` and to match a log line to a vend) ever reach a log.
public struct S3Credentials: Sendable, Equatable {
    public var accessKeyId: String
    public var secretAccessKey: String
    public var sessionToken: String?
    public var expiration: Date

    public init(accessKeyId: String, secretAccessKey: String, sessionToken: String? = nil,
                expiration: Date = .distantFuture) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiration = expiration
    }

    /// True when the credentials expire within `margin` seconds of `now` (or already have).
    public func expires(within margin: TimeInterval, of now: Date = Date()) -> Bool {
        expiration.timeIntervalSince(now) <= margin
    }

    /// `ASIA…` style: enough to correlate, never enough to use.
    public var redactedAccessKeyId: String {
        accessKeyId.count <= 4 ? String(repeating: "*", count: accessKeyId.count) : accessKeyId.prefix(4) + "…"
    }
}

extension S3Credentials: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        let expiry = expiration == .distantFuture ? "never" : ISO8601DateFormatter().string(from: expiration)
        return "S3Credentials(accessKeyId: \(redactedAccessKeyId), secretAccessKey: <redacted>, "
            + "sessionToken: \(sessionToken == nil ? "none" : "<redacted>"), expiration: \(expiry))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(self, children: [
            "accessKeyId": redactedAccessKeyId,
            "secretAccessKey": "<redacted>",
            "sessionToken": sessionToken == nil ? "none" : "<redacted>",
            "expiration": expiration,
        ], displayStyle: .struct)
    }
}
