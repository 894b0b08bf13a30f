import Backend
import Foundation
import Logging
import PhotolalaCore

/// Device pairing (backend-api.md section 2): start, poll no faster than the backend
/// allows, and report how it stands for `photolalactl login`.
extension AccountService {
    package func startPairing() async -> PairingView {
        pairingTask?.cancel()
        do {
            _ = try ensureDeviceId()
        } catch {
            logger.error("\(error)")
            return PairingView(outcome: "failed", message: "cannot save this NAS's device id in the state directory: \(error)")
        }
        do {
            let auth = try await backend.startPairing(deviceName: deviceName)
            let session = PairingSession(authorization: auth, expiresAt: Date().addingTimeInterval(TimeInterval(auth.expiresIn)),
                                         interval: TimeInterval(max(1, auth.interval ?? 5)))
            pairing = session
            logger.notice("pairing started: waiting for the user to confirm the code on their phone")
            pairingTask = Task { await self.pollPairing() }
            return pairingView()
        } catch {
            logger.warning("pairing could not start: \(error)")
            return PairingView(outcome: "failed", message: error.description)
        }
    }

    package func pairingView() -> PairingView {
        guard let p = pairing else { return PairingView(outcome: "none", message: "no pairing in progress") }
        var v = PairingView(outcome: "pending", userCode: p.authorization.userCode, verificationUri: p.authorization.verificationUri,
                            verificationUriComplete: p.authorization.verificationUriComplete, expiresAt: p.expiresAt)
        switch p.outcome {
        case .pending: break
        case .signedIn(let user): v.outcome = "signedIn"; v.userId = user
        case .denied: v.outcome = "denied"; v.message = BackendError.accessDenied.description
        case .expired: v.outcome = "expired"; v.message = BackendError.expiredToken.description
        case .failed(let why): v.outcome = "failed"; v.message = why
        case .cancelled: v.outcome = "cancelled"; v.message = "pairing cancelled"
        }
        return v
    }

    package func cancelPairing() {
        pairingTask?.cancel()
        if pairing?.outcome == .pending {
            pairing?.outcome = .cancelled
            logger.notice("pairing cancelled")
        }
    }

    private func pollPairing() async {
        while let p = pairing, p.outcome == .pending, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(Int64(p.interval * 1000)))
            guard !Task.isCancelled, let current = pairing, current.outcome == .pending else { return }
            if Date() >= current.expiresAt {
                pairing?.outcome = .expired
                logger.warning("pairing expired before it was confirmed")
                return
            }
            pairing?.polls += 1
            do {
                let result = try await backend.pollPairing(deviceCode: current.authorization.deviceCode)
                guard !Task.isCancelled else { return }
                await adopt(result, persist: true)
                pairing?.outcome = .signedIn(userId: result.userId)
                logger.notice("paired: this NAS is signed in", metadata: ["user": "\(result.userId)"])
                return
            } catch {
                switch error {
                case .authorizationPending: continue
                case .slowDown: pairing?.interval += 5
                case .expiredToken: pairing?.outcome = .expired; logger.warning("pairing expired"); return
                case .accessDenied: pairing?.outcome = .denied; logger.warning("pairing was declined"); return
                case .transient: continue
                default: pairing?.outcome = .failed(error.description); return
                }
            }
        }
    }
}
