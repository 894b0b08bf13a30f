/// How a sign-out went (backend-api.md section 6), and what `photolalactl logout` says.
package enum LogoutOutcome: Sendable, Equatable {
    /// There was no sign-in to forget.
    case notSignedIn
    /// The backend revoked the sign-in, then it was erased here.
    case revoked
    /// Erased here, but the backend could not be told (why): the refresh token stays
    /// valid wherever a copy of it exists, until it expires.
    case notTold(String)

    /// Asks `backend` to revoke `held`'s refresh token (nil: there is nothing to tell),
    /// once: the caller erases the sign-in whatever the answer.
    static func revoking(_ held: SignIn?, with backend: any AccountBackend) async -> LogoutOutcome {
        guard let held else { return .notSignedIn }
        do throws(BackendError) {
            try await backend.revoke(refreshToken: held.refreshToken)
            return .revoked
        } catch {
            return LogoutOutcome(refused: error)
        }
    }

    /// The revocation was not answered 200.
    init(refused error: BackendError) {
        switch error {
        case .invalidGrant:
            // The backend no longer knows the sign-in: nothing is left to revoke.
            self = .revoked
        case .transient(let why):
            self = .notTold("it could not be reached: \(why)")
        case let .rejected(status, code, message):
            self = .notTold("it answered HTTP \(status) \(code)" + (message.isEmpty ? "" : ": \(message)"))
        default:
            self = .notTold("it answered: \(error.description)")
        }
    }

    /// The command's one line.
    package var message: String {
        switch self {
        case .notSignedIn:
            "Not signed in: there was no sign-in to forget. Run `photolalactl login` to sign in."
        case .revoked:
            "Signed out. The backend revoked this NAS's sign-in, the saved sign-in was erased and uploads stopped; run `photolalactl login` to sign in again."
        case .notTold(let why):
            "Signed out, but this NAS forgot its sign-in; the backend could not be told (\(why)), so the sign-in stays valid there until it expires. Uploads stopped; run `photolalactl login` to sign in again."
        }
    }
}
