import Foundation
import PhotolalaCore

/// A non-2xx answer of the backend, read the way the daemon branches on it
/// (backend-api.md: `error` is the code to branch on, `message` is for logs). Pure, so
/// every code and status is tested against recorded bodies without a server.
package struct BackendRefusal: Sendable, Equatable {
    var status: Int
    /// The body's `error`, empty when the body had none (a proxy's HTML page, say).
    var code: String
    /// The backend's own words, without any secret the daemon knows (a refusal may quote
    /// the token it refused), then shortened: cut first, a long token's head would stay.
    var message: String

    private struct Body: Decodable {
        var error: String?
        var message: String?
    }

    package init(status: Int, body: Data) {
        let parsed = (try? JSONDecoder().decode(Body.self, from: body)) ?? Body()
        self.status = status
        code = parsed.error ?? ""
        message = String(SecretRedactor.shared.redact(parsed.message ?? "").prefix(200))
    }

    /// `withBearer`: the call carried an access token. Only then is a 401 `invalid_token`
    /// "refresh the access token and retry"; at sign-in it is the identity token refused.
    package func error(withBearer: Bool) -> BackendError {
        switch (status, code) {
        case (_, "invalid_grant"): .invalidGrant
        case (400, "authorization_pending"): .authorizationPending
        case (400, "slow_down"): .slowDown
        case (400, "expired_token"): .expiredToken
        case (400, "access_denied"): .accessDenied
        case (401, "invalid_token") where withBearer: .invalidToken
        case (403, "subscription_required"), (403, "quota_exceeded"), (403, "account_revoked"):
            .forbidden(code: code, message: message)
        case (500..., _), (429, _), (408, _): .transient("HTTP \(status)\(code.isEmpty ? "" : " \(code)")")
        default: .rejected(status: status, code: code.isEmpty ? "http_\(status)" : code, message: message)
        }
    }
}
