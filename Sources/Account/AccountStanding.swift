import Bucket
import Foundation
import PhotolalaCore

/// Where the account stands: which sign-in is in force, whether uploads may run now, and
/// what the status says of it. A pure value: the account service keeps one, tells it of
/// sign-ins, logouts and refused sign-ins, and asks it whether an access-token refresh's
/// answer still concerns the sign-in in force. The backend rotates refresh tokens, so a
/// refresh that a logout or another sign-in overtook must neither sign the NAS out nor
/// put the old sign-in's tokens back.
package struct AccountStanding: Sendable {
    /// What to do once the access-token refresh a caller joined has finished.
    package enum AfterRefresh: Sendable { case credentials, appleCheck }

    /// The sign-in in force; kept while `needsLogin`, so the status still says whose it was.
    private(set) var signIn: SignIn?
    /// The backend refused the sign-in: nothing is asked for with it until a new login.
    private(set) var needsLogin = false
    /// A device id found at start, or a sign-in since: the id alone is made when a first
    /// sign-in starts, and one under way (or refused) is no "not signed in any more".
    private(set) var signedInBefore: Bool
    private var refreshes = RefreshJoins<AfterRefresh>()

    package init(deviceIdAtStart: Bool) {
        signedInBefore = deviceIdAtStart
    }

    package var isSignedIn: Bool { signIn != nil && !needsLogin }

    /// The Photolala user id (a UUID), never the Apple one.
    package var userId: String? { isSignedIn ? signIn?.userId : nil }

    /// A sign-in from either way in (identity token, pairing) or from the disk.
    package mutating func adopt(_ result: SignIn) {
        signIn = result
        signedInBefore = true
        needsLogin = false
        refreshes.detach()   // a refresh of the old sign-in must not serve the new one
    }

    /// `logout`: answers the sign-in to revoke (nil: there was none).
    package mutating func drop() -> SignIn? {
        defer {
            signIn = nil
            needsLogin = false
            refreshes.detach()
        }
        return signIn
    }

    /// The backend refused the refresh token: a new login is needed.
    package mutating func refused() {
        needsLogin = true
    }

    /// `next` joins the access-token refresh under way, or starts one for the sign-in in
    /// force: its id and the sign-in it refreshes (nil: joined, or signed out).
    package mutating func joinRefresh(then next: AfterRefresh) -> (id: UUID, basedOn: SignIn)? {
        guard let id = refreshes.join(next, canStart: signIn != nil), let current = signIn else { return nil }
        return (id, current)
    }

    /// The refresh `id` ended: what its callers do now.
    package mutating func refreshEnded(_ id: UUID) -> [AfterRefresh] {
        refreshes.finish(id)
    }

    /// What a failed refresh of `old` means: `invalid_grant` only means "sign in again" if
    /// the refresh token it used is still the one in force; if a newer sign-in replaced it
    /// meanwhile, the access token in memory is already fresh (nil: nothing failed).
    package func refreshFailed(_ error: BackendError, basedOn old: SignIn) -> BackendError? {
        if error == .invalidGrant, let now = signIn, now.refreshToken != old.refreshToken {
            return nil
        }
        return error
    }

    /// A refresh of `old` answered: the sign-in to save and use now, or nil when another
    /// replaced `old` meanwhile (its tokens must not come back).
    package mutating func refreshed(_ fresh: RefreshedTokens, basedOn old: SignIn) -> SignIn? {
        guard signIn?.refreshToken == old.refreshToken else { return nil }
        let updated = old.refreshed(with: fresh)
        signIn = updated
        return updated
    }

    /// Why uploads must not run now, if they must not: a sign-in first, then the Apple ID,
    /// then the backend's grant.
    package func uploadBlock(apple: AppleCheckMachine, creds: CredentialsMachine) -> GrantUnavailable? {
        if signIn == nil || needsLogin { return .signedOut }
        if let r = apple.pauseReason { return .paused(r) }
        if case .paused(let r, _) = creds.phase { return .paused(r) }
        return nil
    }

    /// The pause that blocks uploads, if that is what blocks them.
    package func pauseReason(apple: AppleCheckMachine, creds: CredentialsMachine) -> DaemonStatus.PauseReason? {
        if case .paused(let r)? = uploadBlock(apple: apple, creds: creds) { return r }
        return nil
    }

    /// The account's part of status: sign-in, Apple check, credentials; and, while running,
    /// whether uploads wait for a login or a pause.
    package func contribute(to s: inout DaemonStatus, apple: AppleCheckMachine, creds: CredentialsMachine, now: Date) {
        s.account = DaemonStatus.Account(signedIn: isSignedIn, userId: signIn?.userId)
        s.appleCredential = apple.status
        s.credentials = creds.status(now: now)
        guard s.state == .running else { return }
        if !isSignedIn {
            s.state = .needsLogin
        } else if let r = pauseReason(apple: apple, creds: creds) {
            s.state = .paused
            s.pauseReason = r
        }
    }
}
