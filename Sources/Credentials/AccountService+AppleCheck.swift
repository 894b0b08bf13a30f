import Backend
import Foundation
import Logging
import PhotolalaCore

/// The Apple credential-state side: performing the schedule's actions and feeding the
/// backend's answers back, with one access-token refresh when the token has expired.
extension AccountService {
    func perform(_ actions: [AppleCheckMachine.Action]) {
        for action in actions {
            switch action {
            case .check:
                guard let token = signIn?.accessToken else { continue }
                let backend = self.backend
                Task {
                    let result: Result<AppleCredentialState, BackendError>
                    do throws(BackendError) { result = .success(try await backend.appleCredentialState(accessToken: token)) } catch { result = .failure(error) }
                    self.appleAnswered(result, retried: false)
                }
            case .wake(let at):
                appleWake = at
                rescheduleTimer()
            case .pause(let reason):
                logger.warning("uploads paused: \(reason.explanation)")
                statusChanges.changed()
            case .dropCredentials:
                perform(creds.handle(.drop, now: Date()))
                wakeWaiters(nil)
                credentialDrops.changed()
            case .lift:
                logger.notice("the Apple ID authorizes this NAS again: uploads resume")
                statusChanges.changed()
            }
        }
    }

    private func appleAnswered(_ result: Result<AppleCredentialState, BackendError>, retried: Bool) {
        guard signIn != nil else { return }
        switch result {
        case .success(let answer):
            DaemonCounter.appleChecks.increment(answer.state.rawValue)
            if answer.state != .authorized { logger.warning("Apple credential state: \(answer.state.rawValue)") }
            perform(apple.handle(.checked(answer.state), now: Date(), random: .random(in: 0..<1)))
        case .failure(.invalidToken) where !retried:
            refreshAccessToken { error in
                if let error {
                    await self.appleCheckFailed(error)
                } else {
                    await self.retryAppleCheck()
                }
            }
        case .failure(let error):
            appleCheckFailed(error)
        }
    }

    private func appleCheckFailed(_ error: BackendError) {
        DaemonCounter.appleChecks.increment("error")
        if error == .invalidGrant {
            perform(creds.handle(.accessTokenRefreshFailed(.invalidGrant), now: Date()))
            return
        }
        logger.warning("the Apple credential check failed (nothing changes; retrying with backoff): \(error)")
        perform(apple.handle(.checkFailed(error.description), now: Date(), random: .random(in: 0..<1)))
    }

    private func retryAppleCheck() {
        guard let token = signIn?.accessToken else { return }
        let backend = self.backend
        Task {
            let result: Result<AppleCredentialState, BackendError>
            do throws(BackendError) { result = .success(try await backend.appleCredentialState(accessToken: token)) } catch { result = .failure(error) }
            self.appleAnswered(result, retried: true)
        }
    }
}
