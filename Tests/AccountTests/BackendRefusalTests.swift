import Foundation
import Testing
import Account
import PhotolalaCore

/// Every error answer of backend-api.md (a status and `{"error", "message"}`) mapped to the
/// case the daemon branches on.
@Suite struct BackendRefusalTests {
    func error(_ status: Int, _ code: String?, message: String = "why", withBearer: Bool = true) -> BackendError {
        var body: [String: String] = ["message": message]
        if let code { body["error"] = code }
        let data = try! JSONEncoder().encode(body)
        return BackendRefusal(status: status, body: data).error(withBearer: withBearer)
    }

    func error(_ status: Int, raw: String, withBearer: Bool = true) -> BackendError {
        BackendRefusal(status: status, body: Data(raw.utf8)).error(withBearer: withBearer)
    }

    @Test(arguments: [("authorization_pending", BackendError.authorizationPending), ("slow_down", .slowDown),
                      ("expired_token", .expiredToken), ("access_denied", .accessDenied)])
    func pairingAnswers(code: String, expected: BackendError) {
        #expect(error(400, code, withBearer: false) == expected)
    }

    @Test func pairingCodesOnlyCountWith400() {
        #expect(error(500, "authorization_pending") == .transient("HTTP 500 authorization_pending"))
        #expect(error(401, "slow_down") == .rejected(status: 401, code: "slow_down", message: "why"))
    }

    @Test func invalidGrantMeansLoginWhateverTheStatus() {
        #expect(error(400, "invalid_grant") == .invalidGrant)
        #expect(error(401, "invalid_grant") == .invalidGrant)
        #expect(error(401, "invalid_grant", withBearer: false) == .invalidGrant)
        #expect(BackendError.invalidGrant.description.contains("photolalactl login"))
    }

    @Test func invalidTokenWithAnAccessTokenMeansRefresh() {
        #expect(error(401, "invalid_token") == .invalidToken)
        #expect(!BackendError.invalidToken.isTransient)
    }

    @Test func invalidTokenAtSignInIsTheIdentityTokenRefused() {
        // Nothing to refresh at sign-in: the Apple identity token itself was refused.
        #expect(error(401, "invalid_token", message: "bad audience", withBearer: false)
            == .rejected(status: 401, code: "invalid_token", message: "bad audience"))
    }

    @Test(arguments: ["subscription_required", "quota_exceeded", "account_revoked"])
    func forbiddenCodesPause(code: String) {
        #expect(error(403, code, message: "renew") == .forbidden(code: code, message: "renew"))
    }

    @Test func otherForbiddenAnswersAreRefusals() {
        #expect(error(403, "forbidden") == .rejected(status: 403, code: "forbidden", message: "why"))
        #expect(error(400, "subscription_required") == .rejected(status: 400, code: "subscription_required", message: "why"))
    }

    @Test(arguments: [500, 502, 503, 504, 429, 408])
    func serverTroubleIsTransient(status: Int) {
        let e = error(status, raw: "<html>Bad Gateway</html>")
        #expect(e == .transient("HTTP \(status)"))
        #expect(e.isTransient)
    }

    @Test func transientKeepsTheCodeWhenThereIsOne() {
        #expect(error(503, "maintenance") == .transient("HTTP 503 maintenance"))
    }

    @Test func invalidRequestIsRejected() {
        #expect(error(400, "invalid_request", message: "deviceName missing", withBearer: false)
            == .rejected(status: 400, code: "invalid_request", message: "deviceName missing"))
    }

    @Test func aBodyWithoutACodeIsNamedByItsStatus() {
        #expect(error(404, raw: "not json") == .rejected(status: 404, code: "http_404", message: ""))
        #expect(error(418, raw: #"{"message": "teapot"}"#) == .rejected(status: 418, code: "http_418", message: "teapot"))
        #expect(error(400, raw: "") == .rejected(status: 400, code: "http_400", message: ""))
    }

    @Test func theBackendsMessageIsShortened() {
        let long = String(repeating: "x", count: 5000)
        guard case .rejected(_, _, let message) = error(400, "invalid_request", message: long) else {
            Issue.record("not a refusal"); return
        }
        #expect(message.count == 200)
    }

    /// A refusal quoting a token longer than the 200 characters kept: redacted before it is
    /// cut, or the token's head would reach the log.
    @Test func aQuotedSecretIsRedactedBeforeTheMessageIsShortened() {
        let token = "eyJ" + String(repeating: UUID().uuidString, count: 12)
        SecretRedactor.shared.register(token)
        guard case .rejected(401, "invalid_token", let message) = error(401, "invalid_token", message: "refused: \(token)", withBearer: false) else {
            Issue.record("not a refusal"); return
        }
        #expect(message == "refused: [redacted]")
        #expect(!message.contains(token.prefix(12)))
    }

    @Test func unknownFieldsInAnErrorBodyAreIgnored() {
        #expect(error(400, raw: #"{"error": "slow_down", "message": "easy", "interval": 10, "retryAfter": [1]}"#) == .slowDown)
    }

    @Test func descriptionsSayWhatToDoAndCarryNoToken() {
        #expect(BackendError.expiredToken.description.contains("photolalactl login"))
        #expect(BackendError.accessDenied.description.contains("declined"))
        #expect(BackendError.forbidden(code: "quota_exceeded", message: "full").description == "the backend refused: quota_exceeded (full)")
        #expect(BackendError.transient("timed out").description == "the backend could not be reached: timed out")
    }
}
