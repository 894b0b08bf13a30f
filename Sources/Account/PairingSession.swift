import Foundation
import PhotolalaCore

/// A device pairing in progress (backend-api.md section 2): what the user must see, and
/// how the daemon's polling stands. The account service polls; this value decides what
/// each answer means.
struct PairingSession: Sendable {
    var authorization: DeviceAuthorization
    var expiresAt: Date
    var interval: TimeInterval
    var outcome: Outcome = .pending
    var polls: Int = 0
    /// Who asked for it (the audit trail's actor of every step, the approval included).
    var startedBy: AuditActor

    enum Outcome: Sendable, Equatable {
        case pending
        case signedIn(userId: String)
        case denied
        case expired
        case failed(String)
        case cancelled
    }

    /// Started `now`: the backend says how long the code lives and how often to ask.
    init(authorization: DeviceAuthorization, now: Date, startedBy: AuditActor = .daemon) {
        self.authorization = authorization
        self.startedBy = startedBy
        expiresAt = now.addingTimeInterval(TimeInterval(authorization.expiresIn))
        interval = TimeInterval(max(1, authorization.interval ?? 5))
    }

    /// A poll the backend refused: true to poll again (still pending, or asked to slow
    /// down), false when the pairing ended (`outcome` says how).
    mutating func pollFailed(_ error: BackendError) -> Bool {
        switch error {
        case .authorizationPending, .transient: return true
        case .slowDown: interval += 5; return true
        case .expiredToken: outcome = .expired
        case .accessDenied: outcome = .denied
        default: outcome = .failed(error.description)
        }
        return false
    }

    /// A pending pairing in the status: the code to confirm and where.
    var status: DaemonStatus.Pairing {
        DaemonStatus.Pairing(userCode: authorization.userCode, verificationUri: authorization.verificationUri,
                             verificationUriComplete: authorization.verificationUriComplete,
                             expiresAt: Timestamp.string(expiresAt))
    }

    /// How it stands, as `photolalactl login` shows it.
    var view: AccountService.PairingView {
        var v = AccountService.PairingView(outcome: "pending", userCode: authorization.userCode,
                                           verificationUri: authorization.verificationUri,
                                           verificationUriComplete: authorization.verificationUriComplete, expiresAt: expiresAt)
        switch outcome {
        case .pending: break
        case .signedIn(let user): v.outcome = "signedIn"; v.userId = user
        case .denied: v.outcome = "denied"; v.message = BackendError.accessDenied.description
        case .expired: v.outcome = "expired"; v.message = BackendError.expiredToken.description
        case .failed(let why): v.outcome = "failed"; v.message = why
        case .cancelled: v.outcome = "cancelled"; v.message = "pairing cancelled"
        }
        return v
    }
}

extension AccountService {
    /// How a pairing stands, as `photolalactl login` shows it.
    package struct PairingView: Sendable {
        package var outcome: String
        package var userCode: String?
        package var verificationUri: String?
        package var verificationUriComplete: String?
        package var expiresAt: Date?
        package var userId: String?
        package var message: String?
    }
}
