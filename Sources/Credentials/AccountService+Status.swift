import Foundation
import PhotolalaCore

extension AccountService {
    /// The account's part of status: sign-in, Apple check, credentials, a pairing under
    /// way; and, while running, whether uploads wait for a login or a pause.
    package func contribute(to s: inout DaemonStatus) {
        let now = Date()
        s.account = DaemonStatus.Account(signedIn: isSignedIn, userId: signIn?.userId)
        s.appleCredential = apple.status
        s.credentials = creds.status(now: now)
        if let p = pairing, p.outcome == .pending, now < p.expiresAt {
            s.pairing = DaemonStatus.Pairing(userCode: p.authorization.userCode, verificationUri: p.authorization.verificationUri,
                                             verificationUriComplete: p.authorization.verificationUriComplete,
                                             expiresAt: Timestamp.string(p.expiresAt))
        }
        if s.state == .running {
            if !isSignedIn {
                s.state = .needsLogin
            } else if let r = pauseReason {
                s.state = .paused
                s.pauseReason = r
            }
        }
    }
}
