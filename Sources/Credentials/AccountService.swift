import Backend
import Foundation
import Logging
import PhotolalaCore
import ServiceLifecycle

/// The account side of the daemon: the saved sign-in, login (pairing or identity token),
/// the STS credentials machine and the Apple credential-state schedule. The machines
/// decide; this actor only performs their actions and feeds the results back. Timers are
/// one sleeping task aimed at the next scheduled moment: nothing polls.
public actor AccountService: Service {
    public enum Unavailable: Error, Sendable, Equatable {
        case signedOut
        case paused(DaemonStatus.PauseReason)
        case cancelled
    }

    public struct Hooks: Sendable {
        /// The pause reasons this service imposes changed (credentials or Apple state).
        public var pausesChanged: @Sendable () async -> Void = {}
        /// Credentials were dropped: cancel in-flight uploads so nothing more reaches S3.
        public var credentialsDropped: @Sendable () async -> Void = {}
        public init() {}
    }

    let store: AccountStore
    var backend: BackendClient
    let logger: Logger
    var deviceName: String
    var hooks = Hooks()
    var creds: CredentialsMachine
    var apple: AppleCheckMachine
    var signIn: SignIn?
    var needsLogin = false
    var pairing: PairingSession?
    var pairingTask: Task<Void, Never>?
    var credsWake: Date?
    var appleWake: Date?
    var timer: Task<Void, Never>?
    var refreshInFlight: (id: UUID, task: Task<BackendError?, Never>)?
    var waiters: [UUID: CheckedContinuation<STSGrant?, Never>] = [:]
    var stopped = false

    public init(stateDir: String, backend: BackendClient, deviceName: String, refreshBeforeExpiry: Duration,
                appleCheckInterval: Duration, logger: Logger) {
        store = AccountStore(stateDir: stateDir)
        self.backend = backend
        self.deviceName = deviceName
        self.logger = logger
        creds = CredentialsMachine(config: .init(refreshBeforeExpiry: Units.seconds(refreshBeforeExpiry)))
        apple = AppleCheckMachine(config: .init(interval: Units.seconds(appleCheckInterval)))
    }

    public func setHooks(_ hooks: Hooks) {
        self.hooks = hooks
    }

    /// Settings that can change on reload.
    public func reconfigure(backend: BackendClient, deviceName: String, refreshBeforeExpiry: Duration, appleCheckInterval: Duration) {
        self.backend = backend
        self.deviceName = deviceName
        var credsConfig = creds.config
        credsConfig.refreshBeforeExpiry = Units.seconds(refreshBeforeExpiry)
        perform(creds.reconfigure(credsConfig, now: Date(), random: .random(in: 0..<1)))
        perform(apple.reconfigure(.init(interval: Units.seconds(appleCheckInterval)), now: Date()))
    }

    /// Restores the saved sign-in (before READY, so status is right from the first answer).
    public func restore() async {
        guard signIn == nil, let saved = store.load() else { return }
        logger.notice("restored the saved sign-in", metadata: ["user": "\(saved.userId)"])
        await adopt(saved, persist: false)
    }

    public func run() async throws {
        try? await gracefulShutdown()
        stopped = true
        timer?.cancel()
        pairingTask?.cancel()
        for (_, w) in waiters { w.resume(returning: nil) }
        waiters.removeAll()
    }

    // MARK: what uploaders ask

    /// Credentials to sign with: at once when valid (even while a refresh runs), otherwise
    /// after the one fetch in flight. Throws when uploads must not happen.
    public func credentials() async throws(Unavailable) -> STSGrant {
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

    private func wakeWaiters(_ grant: STSGrant?) {
        let all = waiters
        waiters.removeAll()
        for (_, w) in all { w.resume(returning: grant) }
    }

    /// S3 refused the session token (ExpiredToken, InvalidToken, TokenRefreshRequired).
    public func rejectedByS3(_ grant: STSGrant) {
        // Only the credentials that were refused: a newer grant may already be in place.
        guard creds.grant == grant else { return }
        logger.notice("S3 refused the storage credentials; fetching new ones")
        perform(creds.handle(.rejectedByS3, now: Date()))
    }

    /// Why uploads must not run now, if they must not.
    public var uploadBlock: Unavailable? {
        if signIn == nil || needsLogin { return .signedOut }
        if let r = apple.pauseReason { return .paused(r) }
        if case .paused(let r, _) = creds.phase { return .paused(r) }
        return nil
    }

    public var pauseReason: DaemonStatus.PauseReason? {
        if case .paused(let r)? = uploadBlock { return r }
        return nil
    }

    public var isSignedIn: Bool { signIn != nil && !needsLogin }

    /// The Photolala user id (a UUID), never the Apple one.
    public var userId: String? { isSignedIn ? signIn?.userId : nil }

    /// `photolalactl resume`: re-ask at once after a subscription/quota pause.
    public func resume() {
        perform(creds.handle(.resume, now: Date(), random: .random(in: 0..<1)))
        if apple.blocksUploads || apple.lastError != nil {
            perform(apple.handle(.wake, now: .distantFuture))
        }
    }

    // MARK: status

    public func contribute(to s: inout DaemonStatus) {
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

    // MARK: sign-in

    public func loginWithIdentityToken(_ token: String, authorizationCode: String?) async -> (userId: String?, error: String?) {
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

    public struct PairingView: Sendable {
        public var outcome: String
        public var userCode: String?
        public var verificationUri: String?
        public var verificationUriComplete: String?
        public var expiresAt: Date?
        public var userId: String?
        public var message: String?
    }

    public func startPairing() async -> PairingView {
        pairingTask?.cancel()
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

    public func pairingView() -> PairingView {
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

    public func cancelPairing() {
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

    /// `photolalactl logout`: stop uploads, drop every credential from memory, erase the secrets on disk.
    public func logout() async {
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
        await hooks.credentialsDropped()
        await hooks.pausesChanged()
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
        await hooks.pausesChanged()
    }

    // MARK: performing the machines' actions

    func perform(_ actions: [CredentialsMachine.Action]) {
        for action in actions {
            switch action {
            case .fetchSTS:
                guard let token = signIn?.accessToken else { continue }
                let backend = self.backend
                Task {
                    let result: Result<STSGrant, BackendError>
                    do throws(BackendError) { result = .success(try await backend.stsToken(accessToken: token)) } catch { result = .failure(error) }
                    await self.stsAnswered(result)
                }
            case .refreshAccessToken:
                refreshAccessToken { await self.accessTokenRefreshed($0) }
            case .wake(let at):
                credsWake = at
                rescheduleTimer()
            case .pause(let reason):
                logger.warning("uploads paused: \(reason.rawValue): \(reason.explanation)")
                wakeWaiters(nil)
                Task { await self.hooks.credentialsDropped(); await self.hooks.pausesChanged() }
            case .unpause:
                logger.notice("the backend grants storage again: uploads resume")
                Task { await self.hooks.pausesChanged() }
            case .needsLogin:
                logger.error("the sign-in is no longer valid: run `photolalactl login`")
                needsLogin = true
                store.erase()
                wakeWaiters(nil)
                Task { await self.hooks.pausesChanged() }
            }
        }
    }

    func perform(_ actions: [AppleCheckMachine.Action]) {
        for action in actions {
            switch action {
            case .check:
                guard let token = signIn?.accessToken else { continue }
                let backend = self.backend
                Task {
                    let result: Result<AppleCredentialState, BackendError>
                    do throws(BackendError) { result = .success(try await backend.appleCredentialState(accessToken: token)) } catch { result = .failure(error) }
                    await self.appleAnswered(result, retried: false)
                }
            case .wake(let at):
                appleWake = at
                rescheduleTimer()
            case .pause(let reason):
                logger.warning("uploads paused: \(reason.explanation)")
                Task { await self.hooks.pausesChanged() }
            case .dropCredentials:
                perform(creds.handle(.drop, now: Date()))
                wakeWaiters(nil)
                Task { await self.hooks.credentialsDropped() }
            case .lift:
                logger.notice("the Apple ID authorizes this NAS again: uploads resume")
                Task { await self.hooks.pausesChanged() }
            }
        }
    }

    private func stsAnswered(_ result: Result<STSGrant, BackendError>) {
        guard signIn != nil else { return }
        switch result {
        case .success(let grant):
            for secret in [grant.accessKeyId, grant.secretAccessKey, grant.sessionToken] { SecretRedactor.shared.register(secret) }
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

    private func appleAnswered(_ result: Result<AppleCredentialState, BackendError>, retried: Bool) {
        guard signIn != nil else { return }
        switch result {
        case .success(let answer):
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
            await self.appleAnswered(result, retried: true)
        }
    }

    /// Refreshes the access token; the rotated refresh token is saved before anything uses it.
    ///
    /// One refresh at a time: the STS fetch and the Apple check can both meet an expired
    /// access token at once, and the backend rotates refresh tokens, so a second refresh
    /// sent with the same (by then dead) refresh token would be answered `invalid_grant`
    /// and sign the NAS out although the first one succeeded. Every caller that asks while
    /// a refresh runs waits for that one and gets its result.
    private func refreshAccessToken(then: @escaping @Sendable (BackendError?) async -> Void) {
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
                    self.storeRefreshed(fresh, basedOn: current)
                    outcome = nil
                } catch {
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

    private func rescheduleTimer() {
        timer?.cancel()
        guard !stopped, let next = [credsWake, appleWake].compactMap({ $0 }).min() else { return }
        timer = Task {
            let delay = next.timeIntervalSinceNow
            if delay > 0 { try? await Task.sleep(for: .milliseconds(Int64(delay * 1000) + 5)) }
            guard !Task.isCancelled else { return }
            await self.fire()
        }
    }

    private func fire() {
        let now = Date()
        if let at = credsWake, at <= now {
            credsWake = nil
            perform(creds.handle(.wake, now: now, random: .random(in: 0..<1)))
        }
        if let at = appleWake, at <= now {
            appleWake = nil
            perform(apple.handle(.wake, now: now, random: .random(in: 0..<1)))
        }
        rescheduleTimer()
    }
}
