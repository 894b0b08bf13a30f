import Backend
import Foundation
import Logging
import PhotolalaCore

/// Signing in with an identity token, signing out, and adopting a sign-in from either
/// way in (pairing ends here too).
extension AccountService {
    package func loginWithIdentityToken(_ token: String, authorizationCode: String?) async -> (userId: String?, error: String?) {
        do {
            _ = try ensureDeviceId()
        } catch {
            logger.error("\(error)")
            return (nil, "cannot save this NAS's device id in the state directory: \(error)")
        }
        do {
            let result = try await backend.signInWithApple(identityToken: token, authorizationCode: authorizationCode, deviceName: deviceName)
            await adopt(result, persist: true)
            logger.notice("signed in with an identity token", metadata: ["user": "\(result.userId)"])
            return (result.userId, nil)
        } catch {
            let message: String
            switch error {
            case .rejected(401, _, let m): message = "the identity token was refused (bad signature, wrong audience or expired)\(m.isEmpty ? "" : ": \(m)")"
            case .rejected(_, _, let m): message = "the identity token was refused: \(m.isEmpty ? error.description : m)"
            default: message = error.description
            }
            logger.warning("sign-in with an identity token failed: \(message)")
            return (nil, message)
        }
    }

    /// `photolalactl logout`: stop uploads, drop every credential from memory, erase the secrets on disk.
    package func logout() async {
        pairingTask?.cancel()
        pairing = nil
        let had = signIn != nil
        signIn = nil
        refreshInFlight = nil
        needsLogin = false
        store.erase()
        perform(creds.handle(.signedOut, now: Date()))
        perform(apple.handle(.signedOut, now: Date()))
        credsWake = nil
        appleWake = nil
        rescheduleTimer()
        wakeWaiters(nil)
        credentialDrops.changed()
        statusChanges.changed()
        if had { logger.notice("signed out: the saved sign-in was erased") }
    }

    func adopt(_ result: SignIn, persist: Bool) async {
        for secret in [result.accessToken, result.refreshToken] { SecretRedactor.shared.register(secret) }
        if persist {
            do {
                try store.save(result)
            } catch {
                logger.error("\(error)")
            }
        }
        signIn = result
        refreshInFlight = nil   // a refresh of the old sign-in must not serve the new one
        needsLogin = false
        perform(creds.handle(.signedIn, now: Date()))
        perform(apple.handle(.signedIn, now: Date()))
        statusChanges.changed()
    }
}
