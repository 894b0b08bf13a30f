import Logging
import PhotolalaCore

/// What the account tells the audit trail (cli.md "audit"): sign-in attempts and who made
/// them, sign-outs and whether the backend heard them, the Apple credential state changing,
/// and storage credentials the backend refuses. It decides what is news (a refusal the
/// backend repeats at every recheck is not; the first "authorized" after a start is not a
/// change) and says it in the trail's words, with the journal's one line beside each
/// record (the actor only says what happened). Never a token: the trail's details are a
/// user id, a step, a code and the backend's words (already without any secret the daemon
/// knows, `BackendRefusal`).
struct AccountAudit: Sendable {
    private let recorder: (any AuditRecorder)?
    /// The journal's one line per event goes with the record.
    private let logger: Logger
    /// The last Apple credential state the backend answered, in this process.
    private var apple: AppleCredentialState.State?
    /// The backend's refusal of storage credentials already recorded (its code), until
    /// credentials are granted again.
    private var refusal: String?

    init(_ recorder: (any AuditRecorder)?, logger: Logger) {
        self.recorder = recorder
        self.logger = logger
    }

    // MARK: signing in and out

    /// `login --identity-token` accepted.
    func tokenAccepted(by actor: AuditActor, userId: String) {
        logger.notice("signed in with an identity token", metadata: ["user": "\(userId)"])
        record(.login, actor, .ok, ["method": "token", "step": "accepted", "userId": .string(userId)])
    }

    /// `login --identity-token` refused (`failed` when the backend could not be reached);
    /// answers what the command says.
    func tokenRefused(by actor: AuditActor, _ error: BackendError) -> String {
        let message = error.identityTokenRefusal
        logger.warning("sign-in with an identity token failed: \(message)")
        record(.login, actor, error.isTransient ? .failed : .refused, ["method": "token", "step": "refused", "why": .string(Self.why(error))])
        return message
    }

    /// A sign-in of either `method` could not begin: this NAS cannot save its device id.
    /// Answers what the command says.
    func deviceIdUnsaved(by actor: AuditActor, method: String, _ error: AccountStore.Failure) -> String {
        let why = "cannot save this NAS's device id in the state directory"
        logger.error("\(error)")
        let step = method == "token" ? "refused" : "started"
        record(.login, actor, .failed, ["method": .string(method), "step": .string(step), "why": .string(why)])
        return "\(why): \(error)"
    }

    /// A pairing began (`expiresIn` seconds to confirm it).
    func pairingStarted(by actor: AuditActor, expiresIn: Int) {
        logger.notice("pairing started: waiting for the user to confirm the code on their phone")
        record(.login, actor, .ok, ["method": "pairing", "step": "started", "expiresIn": .int(Int64(expiresIn))])
    }

    /// The backend would not begin a pairing.
    func pairingNotStarted(by actor: AuditActor, _ error: BackendError) {
        logger.warning("pairing could not start: \(error)")
        record(.login, actor, .failed, ["method": "pairing", "step": "started", "why": .string(error.description)])
    }

    /// How a pairing ended: approved, expired, refused on the phone, cancelled, failed.
    func pairingEnded(_ outcome: PairingSession.Outcome, by actor: AuditActor) {
        switch outcome {
        case .pending:
            return
        case .signedIn(let userId):
            logger.notice("paired: this NAS is signed in", metadata: ["user": "\(userId)"])
            record(.login, actor, .ok, ["method": "pairing", "step": "approved", "userId": .string(userId)])
        case .expired:
            logger.warning("pairing expired before it was confirmed")
            record(.login, actor, .failed, ["method": "pairing", "step": "expired"])
        case .denied:
            logger.warning("pairing was declined")
            record(.login, actor, .refused, ["method": "pairing", "step": "refused"])
        case .cancelled:
            logger.notice("pairing cancelled")
            record(.login, actor, .ok, ["method": "pairing", "step": "cancelled"])
        case .failed(let why):
            logger.warning("pairing failed: \(why)")
            record(.login, actor, .failed, ["method": "pairing", "step": "failed", "why": .string(why)])
        }
    }

    /// `logout`: whether there was a sign-in, and whether the backend heard its end. A
    /// backend that could not be told makes the record `failed`: the NAS forgot its
    /// sign-in, but the refresh token stays valid wherever a copy of it exists.
    func logout(by actor: AuditActor, userId: String?, outcome: LogoutOutcome) {
        var details: AuditDetails = ["wasSignedIn": .bool(userId != nil)]
        if let userId { details["userId"] = .string(userId) }
        switch outcome {
        case .notSignedIn:
            record(.logout, actor, .ok, details)
        case .revoked:
            logger.notice("signed out: the backend revoked the sign-in and the saved sign-in was erased")
            details["backendHeard"] = true
            record(.logout, actor, .ok, details)
        case .notTold(let why):
            logger.warning("signed out: this NAS forgot its sign-in; the backend could not be told (\(why))")
            details["backendHeard"] = false
            details["why"] = .string(why)
            record(.logout, actor, .failed, details)
        }
    }

    // MARK: what the backend says on its own schedule (actor `daemon`)

    /// An Apple credential-state answer: recorded when it differs from the last one, and
    /// the first one after a start only when it is not `authorized` (every start would
    /// otherwise write a record, and an idle NAS writes nothing).
    mutating func appleChecked(_ state: AppleCredentialState.State) {
        if state != .authorized { logger.warning("Apple credential state: \(state.rawValue)") }
        let before = apple
        apple = state
        guard state != before, before != nil || state != .authorized else { return }
        var details: AuditDetails = ["state": .string(state.rawValue)]
        if let before { details["was"] = .string(before.rawValue) }
        record(.appleState, .daemon, state == .authorized ? .ok : .refused, details)
    }

    /// Storage credentials not granted: refused (a 403 reason, an expired access token),
    /// or the backend could not be reached (retried with backoff, not recorded).
    mutating func stsFailed(_ error: BackendError) {
        guard !error.isTransient || error == .invalidToken else {
            logger.warning("could not get storage credentials, retrying with backoff: \(error)")
            return
        }
        logger.info("storage credentials refused: \(error)")
        credentialsRefused(error)
    }

    /// The backend refused storage credentials (a 403 reason, or `invalid_grant`: the
    /// sign-in is gone). Recorded once per reason until credentials are granted again.
    mutating func credentialsRefused(_ error: BackendError) {
        let code: String
        var details: AuditDetails = [:]
        switch error {
        case let .forbidden(c, message):
            code = c
            if !message.isEmpty { details["message"] = .string(message) }
        case .invalidGrant:
            code = "invalid_grant"
            details["message"] = "the sign-in is no longer valid: the NAS needs a new login"
        default:
            return
        }
        guard code != refusal else { return }
        refusal = code
        details["reason"] = .string(code)
        record(.credentialsRefused, .daemon, .refused, details)
    }

    /// Credentials granted, a new sign-in or a sign-out: the next refusal is news again.
    mutating func forgetRefusal() {
        refusal = nil
    }

    // MARK: helpers

    private func record(_ kind: AuditEvent.Kind, _ actor: AuditActor, _ outcome: AuditOutcome, _ details: AuditDetails) {
        recorder?.record(AuditEvent(kind, by: actor, outcome, details))
    }

    /// Why the backend refused a sign-in, in a few words: its code and its own words.
    static func why(_ error: BackendError) -> String {
        switch error {
        case let .rejected(status, code, message): "HTTP \(status) \(code)" + (message.isEmpty ? "" : ": \(message)")
        case let .forbidden(code, message): "HTTP 403 \(code)" + (message.isEmpty ? "" : ": \(message)")
        case .invalidGrant: "invalid_grant"
        case .invalidToken: "invalid_token"
        default: error.description
        }
    }
}
