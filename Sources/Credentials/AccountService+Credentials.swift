import Backend
import Foundation
import Logging
import PhotolalaCore

/// The STS side: handing credentials to uploaders (one fetch in flight however many ask),
/// performing the credentials machine's actions, and refreshing the access token once
/// however many callers meet an expired one.
extension AccountService {
    /// Credentials to sign with: at once when valid (even while a refresh runs), otherwise
    /// after the one fetch in flight. Throws when uploads must not happen.
    package func credentials() async throws(Unavailable) -> STSGrant {
        while true {
            if let block = uploadBlock { throw block }
            if let g = creds.usable(now: Date()) { return g }
            perform(creds.handle(.needed, now: Date(), random: .random(in: 0..<1)))
            let id = UUID()
            let got: STSGrant? = await withTaskCancellationHandler {
                await withCheckedContinuation { c in
                    if Task.isCancelled || stopped { c.resume(returning: nil) } else { waiters[id] = c }
                }
            } onCancel: {
                Task { await self.cancelWaiter(id) }
            }
            if Task.isCancelled || stopped { throw .cancelled }
            if let got { return got }
        }
    }

    private func cancelWaiter(_ id: UUID) {
        waiters.removeValue(forKey: id)?.resume(returning: nil)
    }

    func wakeWaiters(_ grant: STSGrant?) {
        let all = waiters
        waiters.removeAll()
        for (_, w) in all { w.resume(returning: grant) }
    }

    /// S3 refused the session token (ExpiredToken, InvalidToken, TokenRefreshRequired).
    package func rejectedByS3(_ grant: STSGrant) {
        // Only the credentials that were refused: a newer grant may already be in place.
        guard creds.grant == grant else { return }
        logger.notice("S3 refused the storage credentials; fetching new ones")
        perform(creds.handle(.rejectedByS3, now: Date()))
    }

    func perform(_ actions: [CredentialsMachine.Action]) {
        for action in actions {
            switch action {
            case .fetchSTS:
                guard let token = signIn?.accessToken else { continue }
                let backend = self.backend
                Task {
                    let result: Result<STSGrant, BackendError>
                    do throws(BackendError) { result = .success(try await backend.stsToken(accessToken: token)) } catch { result = .failure(error) }
                    self.stsAnswered(result)
                }
            case .refreshAccessToken:
                refreshAccessToken { await self.accessTokenRefreshed($0) }
            case .wake(let at):
                credsWake = at
                rescheduleTimer()
            case .pause(let reason):
                logger.warning("uploads paused: \(reason.rawValue): \(reason.explanation)")
                wakeWaiters(nil)
                credentialDrops.changed()
                statusChanges.changed()
            case .unpause:
                logger.notice("the backend grants storage again: uploads resume")
                statusChanges.changed()
            case .needsLogin:
                logger.error("the sign-in is no longer valid: run `photolalactl login`")
                needsLogin = true
                store.erase()
                wakeWaiters(nil)
                statusChanges.changed()
            }
        }
    }

    private func stsAnswered(_ result: Result<STSGrant, BackendError>) {
        guard signIn != nil else { return }
        switch result {
        case .success(let grant):
            for secret in [grant.accessKeyId, grant.secretAccessKey, grant.sessionToken] { SecretRedactor.shared.register(secret) }
            DaemonCounter.stsFetches.increment()
            if let held = creds.grant, held.expiration > Date() { DaemonCounter.stsRefreshes.increment() }
            let blocked = apple.blocksUploads
            perform(creds.handle(.stsSucceeded(grant), now: Date(), random: .random(in: 0..<1)))
            if blocked {
                perform(creds.handle(.drop, now: Date()))
                wakeWaiters(nil)
            } else {
                logger.debug("storage credentials received", metadata: ["expires": "\(Timestamp.string(grant.expiration))"])
                wakeWaiters(creds.usable(now: Date()))
            }
        case .failure(let error):
            DaemonCounter.stsFailures.increment()
            if !error.isTransient || error == .invalidToken {
                logger.info("storage credentials refused: \(error)")
            } else {
                logger.warning("could not get storage credentials, retrying with backoff: \(error)")
            }
            perform(creds.handle(.stsFailed(error), now: Date(), random: .random(in: 0..<1)))
        }
    }

    private func accessTokenRefreshed(_ error: BackendError?) {
        if let error {
            perform(creds.handle(.accessTokenRefreshFailed(error), now: Date(), random: .random(in: 0..<1)))
        } else {
            perform(creds.handle(.accessTokenRefreshed, now: Date()))
        }
    }

    /// Refreshes the access token; the rotated refresh token is saved before anything uses it.
    ///
    /// One refresh at a time: the STS fetch and the Apple check can both meet an expired
    /// access token at once, and the backend rotates refresh tokens, so a second refresh
    /// sent with the same (by then dead) refresh token would be answered `invalid_grant`
    /// and sign the NAS out although the first one succeeded. Every caller that asks while
    /// a refresh runs waits for that one and gets its result.
    func refreshAccessToken(then: @escaping @Sendable (BackendError?) async -> Void) {
        let task: Task<BackendError?, Never>
        if let running = refreshInFlight {
            task = running.task
        } else {
            guard let current = signIn else { return }
            let backend = self.backend
            let id = UUID()
            task = Task {
                let outcome: BackendError?
                do throws(BackendError) {
                    let fresh = try await backend.refresh(refreshToken: current.refreshToken)
                    DaemonCounter.accessTokenRefreshes.increment("ok")
                    self.storeRefreshed(fresh, basedOn: current)
                    outcome = nil
                } catch {
                    DaemonCounter.accessTokenRefreshes.increment("error")
                    outcome = self.refreshFailed(error, basedOn: current)
                }
                self.refreshFinished(id)
                return outcome
            }
            refreshInFlight = (id, task)
        }
        Task {
            let error = await task.value
            await then(error)
        }
    }

    private func refreshFinished(_ id: UUID) {
        if refreshInFlight?.id == id { refreshInFlight = nil }
    }

    /// A refresh refused with `invalid_grant` only means "sign in again" if the refresh
    /// token it used is still the one in force: if a newer sign-in replaced it meanwhile,
    /// the access token in memory is already fresh.
    private func refreshFailed(_ error: BackendError, basedOn old: SignIn) -> BackendError? {
        if error == .invalidGrant, let now = signIn, now.refreshToken != old.refreshToken {
            return nil
        }
        return error
    }

    private func storeRefreshed(_ fresh: RefreshedTokens, basedOn old: SignIn) {
        guard signIn?.refreshToken == old.refreshToken else { return }
        var updated = old
        updated.accessToken = fresh.accessToken
        updated.accessTokenExpiresAt = fresh.accessTokenExpiresAt
        if let rotated = fresh.refreshToken { updated.refreshToken = rotated }
        for secret in [updated.accessToken, updated.refreshToken] { SecretRedactor.shared.register(secret) }
        do {
            try store.save(updated)
        } catch {
            logger.error("\(error)")
        }
        signIn = updated
        logger.info("access token refreshed")
    }
}
