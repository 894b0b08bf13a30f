import PhotolalaCore

/// What the account tells the audit trail (cli.md "audit"): sign-in attempts and who made
/// them, sign-outs and whether the backend heard them, the Apple credential state changing,
/// and storage credentials the backend refuses. It decides what is news (a refusal the
/// backend repeats at every recheck is not; the first "authorized" after a start is not a
/// change) and says it in the trail's words. Never a token: the trail's details are a
/// user id, a step, a code and the backend's words (already without any secret the daemon
/// knows, `BackendRefusal`).
struct AccountAudit: Sendable {
    private let recorder: (any AuditRecorder)?
    /// The last Apple credential state the backend answered, in this process.
    private var apple: AppleCredentialState.State?
    /// The backend's refusal of storage credentials already recorded (its code), until
    /// credentials are granted again.
    private var refusal: String?

    init(_ recorder: (any AuditRecorder)?) {
        self.recorder = recorder
    }

    // MARK: signing in and out

    /// `login --identity-token`: accepted (`userId`), or refused and why (`failed` when
    /// the backend could not be reached, or the NAS could not save what it needs).
    func tokenSignIn(by actor: AuditActor, userId: String?, failure: BackendError?, problem: String? = nil) {
        if let userId {
            record(.login, actor, .ok, ["method": "token", "step": "accepted", "userId": .string(userId)])
            return
        }
        let why = problem ?? failure.map(Self.why) ?? "unknown"
        let outcome: AuditOutcome = problem != nil || failure?.isTransient == true ? .failed : .refused
        record(.login, actor, outcome, ["method": "token", "step": "refused", "why": .string(why)])
    }

    /// A pairing began (`expiresIn` seconds to confirm it) or could not.
    func pairingStarted(by actor: AuditActor, expiresIn: Int?, failure: String?) {
        if let failure {
            record(.login, actor, .failed, ["method": "pairing", "step": "started", "why": .string(failure)])
        } else {
            record(.login, actor, .ok, ["method": "pairing", "step": "started", "expiresIn": .int(Int64(expiresIn ?? 0))])
        }
    }

    /// How a pairing ended: approved, expired, refused on the phone, cancelled, failed.
    func pairingEnded(_ outcome: PairingSession.Outcome, by actor: AuditActor) {
        switch outcome {
        case .pending:
            return
        case .signedIn(let userId):
            record(.login, actor, .ok, ["method": "pairing", "step": "approved", "userId": .string(userId)])
        case .expired:
            record(.login, actor, .failed, ["method": "pairing", "step": "expired"])
        case .denied:
            record(.login, actor, .refused, ["method": "pairing", "step": "refused"])
        case .cancelled:
            record(.login, actor, .ok, ["method": "pairing", "step": "cancelled"])
        case .failed(let why):
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
            details["backendHeard"] = true
            record(.logout, actor, .ok, details)
        case .notTold(let why):
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
        let before = apple
        apple = state
        guard state != before, before != nil || state != .authorized else { return }
        var details: AuditDetails = ["state": .string(state.rawValue)]
        if let before { details["was"] = .string(before.rawValue) }
        record(.appleState, .daemon, state == .authorized ? .ok : .refused, details)
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

    /// Credentials granted (or a new sign-in): the next refusal is news again.
    mutating func credentialsGranted() {
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
