import Bucket
import Foundation
import Logging
import PhotolalaCore
import ServiceLifecycle

/// The account side of the daemon: the saved sign-in, login (pairing or identity token),
/// the STS credentials machine and the Apple credential-state schedule. The machines
/// decide; this actor only performs their actions and feeds the results back.
///
/// Every backend call the machines ask for, and a pairing's polling, runs as a child of
/// `run()`'s task group: nothing outlives the service, and a stop cancels what is under
/// way. Timers are one `StageLoop` aimed at the next scheduled moment on the injected
/// clock: nothing polls. The backend is a protocol (`AccountBackend`), so a Swift test
/// runs this actor against a fake one.
package actor AccountService: Service, GrantSource {
    /// What the account service takes from the settings: the one mapping, used at start
    /// and on reload.
    package struct Options: Sendable, Equatable {
        package var apiURL: String
        /// Resolved when used, so a renamed NAS shows its new name.
        package var deviceName: String
        package var refreshBeforeExpiry: Duration
        package var appleCheckInterval: Duration
        /// The system's CA store plus `tls.ca_file`, read now (so a reload re-reads it).
        package var trust: TLSTrust

        package init(_ settings: Settings) {
            apiURL = settings.account.apiURL
            deviceName = settings.account.deviceName ?? HostName.current()
            refreshBeforeExpiry = settings.credentials.refreshBeforeExpiry
            appleCheckInterval = settings.credentials.appleCheckInterval
            trust = TLSTrust(caFile: settings.tls.caFile)
        }

        func backend(logger: Logger) -> BackendClient {
            BackendClient(baseURL: apiURL, trust: trust, logger: logger)
        }
    }

    /// Says when the pause reasons this service imposes changed (credentials or Apple
    /// state), and whatever else it shows in the status.
    package nonisolated var statusChanges: ChangeFeed { changes }
    /// Says when the credentials in hand were dropped (logout, Apple ID revoked, a
    /// subscription pause): whoever uses them stops what is under way.
    package nonisolated var credentialDrops: ChangeFeed { drops }

    private let changes: ChangeFeed
    private let drops = ChangeFeed()
    private let store: AccountStore
    private let deviceIdentity: DeviceIdentity
    private let clock: any DaemonClock
    private let logger: Logger
    private var backend: any AccountBackend
    /// This NAS's id, once made (at the first sign-in); every backend call carries it.
    private var device: String?
    private var deviceName: String
    private var creds: CredentialsMachine
    private var apple: AppleCheckMachine
    private var standing: AccountStanding
    private var pairing: PairingSession?
    /// Changed by every new, cancelled or abandoned pairing: a poll loop of an older one
    /// sees it and stops.
    private var pairingRun = UUID()
    private var wakes = AccountWakes()
    /// Set while `fire()` runs: the wakes it schedules are picked up by its answer.
    private var firing = false
    private let waiters = GrantWaiters()
    private var stopped = false
    /// Backend calls and pairing polls, run by `run()` as children of its task group.
    private let tasks = ServiceTasks()
    /// Wakes at the next scheduled moment (an STS refresh, an Apple check).
    private let timers: StageLoop
    /// Who signed in or out, and what the backend refused (cli.md "audit").
    private var audit: AccountAudit

    package init(stateDir: String, backend: any AccountBackend, deviceName: String, refreshBeforeExpiry: Duration,
                 appleCheckInterval: Duration, clock: any DaemonClock = SystemClock(), logger: Logger,
                 statusChanges: ChangeFeed = ChangeFeed(), audit: (any AuditRecorder)? = nil) {
        store = AccountStore(stateDir: stateDir)
        deviceIdentity = DeviceIdentity(stateDir: stateDir)
        let deviceId = deviceIdentity.load()
        device = deviceId
        standing = AccountStanding(deviceIdAtStart: deviceId != nil)
        changes = statusChanges
        self.backend = backend
        self.backend.deviceId = deviceId
        self.deviceName = deviceName
        self.clock = clock
        self.logger = logger
        creds = CredentialsMachine(config: .init(refreshBeforeExpiry: Units.seconds(refreshBeforeExpiry)))
        apple = AppleCheckMachine(config: .init(interval: Units.seconds(appleCheckInterval)))
        timers = StageLoop(clock: clock)
        self.audit = AccountAudit(audit, logger: logger)
    }

    package init(stateDir: String, options: Options, clock: any DaemonClock = SystemClock(), logger: Logger,
                 statusChanges: ChangeFeed = ChangeFeed(), audit: (any AuditRecorder)? = nil) {
        self.init(stateDir: stateDir, backend: options.backend(logger: logger), deviceName: options.deviceName,
                  refreshBeforeExpiry: options.refreshBeforeExpiry, appleCheckInterval: options.appleCheckInterval,
                  clock: clock, logger: logger, statusChanges: statusChanges, audit: audit)
    }

    /// New settings on reload: a new backend client, device name and timings.
    package func reconfigure(_ options: Options) {
        reconfigure(backend: options.backend(logger: logger), deviceName: options.deviceName,
                    refreshBeforeExpiry: options.refreshBeforeExpiry, appleCheckInterval: options.appleCheckInterval)
    }

    /// Settings that can change on reload.
    package func reconfigure(backend: any AccountBackend, deviceName: String, refreshBeforeExpiry: Duration,
                             appleCheckInterval: Duration) {
        self.backend = backend
        self.backend.deviceId = device
        self.deviceName = deviceName
        var credsConfig = creds.config
        credsConfig.refreshBeforeExpiry = Units.seconds(refreshBeforeExpiry)
        perform(creds.reconfigure(credsConfig, now: clock.now(), random: .random(in: 0..<1)))
        perform(apple.reconfigure(.init(interval: Units.seconds(appleCheckInterval)), now: clock.now()))
    }

    /// Restores the saved sign-in (before READY, so status is right from the first answer).
    package func restore() async {
        guard standing.signIn == nil, let saved = store.load() else { return }
        logger.notice("restored the saved sign-in", metadata: ["user": "\(saved.userId)"])
        // A sign-in saved by a version without device ids gets its id now: the NAS's
        // manifest needs one, and a signed-in NAS may never sign in again.
        do {
            _ = try ensureDeviceId()
        } catch {
            logger.error("cannot save this NAS's device id in the state directory: \(error)")
        }
        adopt(saved, persist: false)
    }

    /// Performs the backend calls and the timers until graceful shutdown (or
    /// cancellation), which cancels whatever is under way.
    package func run() async throws {
        let tasks = self.tasks
        let timers = self.timers
        _ = await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await timers.run { _ in await self.fire() } }
                group.addTask { await tasks.run() }
            }
        }
        stopped = true
        waiters.resumeAll(with: nil)
    }

    // MARK: what the pipeline asks

    /// Why uploads must not run now, if they must not.
    package var uploadBlock: GrantUnavailable? { standing.uploadBlock(apple: apple, creds: creds) }

    package var pauseReason: DaemonStatus.PauseReason? { standing.pauseReason(apple: apple, creds: creds) }

    package var isSignedIn: Bool { standing.isSignedIn }

    /// The Photolala user id (a UUID), never the Apple one.
    package var userId: String? { standing.userId }

    /// This NAS's id, once made (at the first sign-in).
    package var deviceId: String? { device }

    /// A device id found at start, or a sign-in since.
    package var signedInBefore: Bool { standing.signedInBefore }

    /// `photolalactl resume`: re-ask at once after a subscription/quota pause.
    package func resume() {
        perform(creds.handle(.resume, now: clock.now(), random: .random(in: 0..<1)))
        if apple.blocksUploads || apple.lastError != nil {
            perform(apple.handle(.wake, now: .distantFuture))
        }
    }

    /// Credentials to sign with: at once when valid (even while a refresh runs), otherwise
    /// after the one fetch in flight. Throws when uploads must not happen.
    package func credentials() async throws(GrantUnavailable) -> STSGrant {
        while true {
            if let block = uploadBlock { throw block }
            if let g = creds.usable(now: clock.now()) { return g }
            perform(creds.handle(.needed, now: clock.now(), random: .random(in: 0..<1)))
            let id = UUID()
            let waiters = self.waiters
            let got: STSGrant? = await withTaskCancellationHandler {
                await withCheckedContinuation { c in
                    if stopped || !waiters.add(id, c) { c.resume(returning: nil) }
                }
            } onCancel: {
                waiters.remove(id)?.resume(returning: nil)
            }
            if Task.isCancelled || stopped { throw .cancelled }
            if let got { return got }
        }
    }

    /// The grant as a bucket session signs with it (`GrantSource`).
    package func grant() async throws(GrantUnavailable) -> BucketGrant {
        try await credentials().bucketGrant
    }

    /// S3 refused `grant` (`GrantSource`).
    package func rejected(_ grant: BucketGrant) async {
        // Only the credentials that were refused: a newer grant may already be in place.
        guard let held = creds.grant, held.bucketGrant == grant else { return }
        rejectedByS3(held)
    }

    /// S3 refused the session token (ExpiredToken, InvalidToken, TokenRefreshRequired).
    package func rejectedByS3(_ grant: STSGrant) {
        guard creds.grant == grant else { return }
        logger.notice("S3 refused the storage credentials; fetching new ones")
        perform(creds.handle(.rejectedByS3, now: clock.now()))
    }

    // MARK: signing in and out

    /// `by`: who asked (the socket's caller), for the audit trail.
    package func loginWithIdentityToken(_ token: String, authorizationCode: String?, by actor: AuditActor) async -> (userId: String?, error: String?) {
        do {
            _ = try ensureDeviceId()
        } catch {
            return (nil, audit.deviceIdUnsaved(by: actor, method: "token", error))
        }
        do {
            let result = try await backend.signInWithApple(identityToken: token, authorizationCode: authorizationCode, deviceName: deviceName)
            adopt(result, persist: true)
            audit.tokenAccepted(by: actor, userId: result.userId)
            return (result.userId, nil)
        } catch {
            return (nil, audit.tokenRefused(by: actor, error))
        }
    }

    /// `photolalactl logout`: stop uploads, drop every credential from memory, tell the
    /// backend to revoke the sign-in, then erase the secrets on disk whatever it answered.
    /// The revocation is never retried: once erased, the token is gone from this NAS.
    /// `by`: who asked, for the audit trail.
    package func logout(by actor: AuditActor) async -> LogoutOutcome {
        pairingRun = UUID()
        pairing = nil
        let held = standing.drop()
        audit.forgetRefusal()
        perform(creds.handle(.signedOut, now: clock.now()))
        perform(apple.handle(.signedOut, now: clock.now()))
        wakes = AccountWakes()
        rescheduleTimer()
        waiters.resumeAll(with: nil)
        credentialDrops.changed()
        statusChanges.changed()
        let outcome = await LogoutOutcome.revoking(held, with: backend)
        // A sign-in made while the backend was asked is the one on disk now: it stays.
        if standing.signIn == nil { store.erase() }
        audit.logout(by: actor, userId: held?.userId, outcome: outcome)
        return outcome
    }

    /// A sign-in from either way in (identity token, pairing) or from the disk.
    private func adopt(_ result: SignIn, persist: Bool) {
        for secret in [result.accessToken, result.refreshToken] { SecretRedactor.shared.register(secret) }
        if persist {
            do {
                try store.save(result)
            } catch {
                logger.error("\(error)")
            }
        }
        standing.adopt(result)
        audit.forgetRefusal()
        perform(creds.handle(.signedIn, now: clock.now()))
        perform(apple.handle(.signedIn, now: clock.now()))
        statusChanges.changed()
    }

    /// The device id, made and saved at the first sign-in; a sign-in without it would
    /// register a device the manifest could not be found under again.
    private func ensureDeviceId() throws(AccountStore.Failure) -> String {
        if let device { return device }
        let id = try deviceIdentity.loadOrCreate()
        device = id
        backend.deviceId = id
        logger.notice("this NAS's device id was made", metadata: ["device": "\(id)"])
        return id
    }

    // MARK: pairing (backend-api.md section 2)

    /// `by`: who asked (the socket's caller): every step of this pairing is recorded as theirs.
    package func startPairing(by actor: AuditActor) async -> PairingView {
        pairingRun = UUID()
        do {
            _ = try ensureDeviceId()
        } catch {
            return PairingView(outcome: "failed", message: audit.deviceIdUnsaved(by: actor, method: "pairing", error))
        }
        do {
            let auth = try await backend.startPairing(deviceName: deviceName)
            // The device code is what a poll trades for tokens: a secret, like them.
            SecretRedactor.shared.register(auth.deviceCode)
            pairing = PairingSession(authorization: auth, now: clock.now(), startedBy: actor)
            let run = UUID()
            pairingRun = run
            audit.pairingStarted(by: actor, expiresIn: auth.expiresIn)
            spawn { await self.pollPairing(run) }
            return pairingView()
        } catch {
            audit.pairingNotStarted(by: actor, error)
            return PairingView(outcome: "failed", message: error.description)
        }
    }

    package func pairingView() -> PairingView {
        pairing?.view ?? PairingView(outcome: "none", message: "no pairing in progress")
    }

    package func cancelPairing(by actor: AuditActor) {
        pairingRun = UUID()
        if pairing?.outcome == .pending {
            pairing?.outcome = .cancelled
            audit.pairingEnded(.cancelled, by: actor)
        }
    }

    /// Polls no faster than the backend allows, until the pairing ends or another replaces it.
    private func pollPairing(_ run: UUID) async {
        while pairingRun == run, let p = pairing, p.outcome == .pending, !Task.isCancelled {
            try? await clock.sleep(seconds: p.interval)
            guard !Task.isCancelled, pairingRun == run, let current = pairing, current.outcome == .pending else { return }
            if clock.now() >= current.expiresAt {
                pairing?.outcome = .expired
                audit.pairingEnded(.expired, by: current.startedBy)
                return
            }
            pairing?.polls += 1
            do {
                let result = try await backend.pollPairing(deviceCode: current.authorization.deviceCode)
                guard !Task.isCancelled, pairingRun == run else { return }
                adopt(result, persist: true)
                pairing?.outcome = .signedIn(userId: result.userId)
                audit.pairingEnded(.signedIn(userId: result.userId), by: current.startedBy)
                return
            } catch {
                guard pairingRun == run, pairing?.pollFailed(error) == false else { continue }
                if let outcome = pairing?.outcome { audit.pairingEnded(outcome, by: current.startedBy) }
                return
            }
        }
    }

    // MARK: the machines' actions

    private func perform(_ actions: [CredentialsMachine.Action]) {
        for action in actions {
            switch action {
            case .fetchSTS:
                guard let token = standing.signIn?.accessToken else { continue }
                let backend = self.backend
                spawn {
                    let result: Result<STSGrant, BackendError>
                    do throws(BackendError) { result = .success(try await backend.stsToken(accessToken: token)) } catch { result = .failure(error) }
                    await self.stsAnswered(result)
                }
            case .refreshAccessToken:
                refreshAccessToken(then: .credentials)
            case .wake(let at):
                wakes.set(.credentials, at: at)
                rescheduleTimer()
            case .pause(let reason):
                logger.warning("uploads paused: \(reason.rawValue): \(reason.explanation)")
                waiters.resumeAll(with: nil)
                credentialDrops.changed()
                statusChanges.changed()
            case .unpause:
                logger.notice("the backend grants storage again: uploads resume")
                statusChanges.changed()
            case .needsLogin:
                logger.error("the sign-in is no longer valid: run `photolalactl login`")
                audit.credentialsRefused(.invalidGrant)
                standing.refused()
                store.erase()
                waiters.resumeAll(with: nil)
                statusChanges.changed()
            }
        }
    }

    private func perform(_ actions: [AppleCheckMachine.Action]) {
        for action in actions {
            switch action {
            case .check:
                checkApple(retried: false)
            case .wake(let at):
                wakes.set(.apple, at: at)
                rescheduleTimer()
            case .pause(let reason):
                logger.warning("uploads paused: \(reason.explanation)")
                statusChanges.changed()
            case .dropCredentials:
                perform(creds.handle(.drop, now: clock.now()))
                waiters.resumeAll(with: nil)
                credentialDrops.changed()
            case .lift:
                logger.notice("the Apple ID authorizes this NAS again: uploads resume")
                statusChanges.changed()
            }
        }
    }

    private func stsAnswered(_ result: Result<STSGrant, BackendError>) {
        guard standing.signIn != nil else { return }
        let now = clock.now()
        switch result {
        case .success(let grant):
            for secret in [grant.accessKeyId, grant.secretAccessKey, grant.sessionToken] { SecretRedactor.shared.register(secret) }
            audit.forgetRefusal()
            DaemonCounter.stsFetches.increment()
            if let held = creds.grant, held.expiration > now { DaemonCounter.stsRefreshes.increment() }
            let blocked = apple.blocksUploads
            perform(creds.handle(.stsSucceeded(grant), now: now, random: .random(in: 0..<1)))
            if blocked {
                perform(creds.handle(.drop, now: now))
                waiters.resumeAll(with: nil)
            } else {
                logger.debug("storage credentials received", metadata: ["expires": "\(Timestamp.string(grant.expiration))"])
                waiters.resumeAll(with: creds.usable(now: now))
            }
        case .failure(let error):
            DaemonCounter.stsFailures.increment()
            audit.stsFailed(error)
            perform(creds.handle(.stsFailed(error), now: now, random: .random(in: 0..<1)))
        }
    }

    private func checkApple(retried: Bool) {
        guard let token = standing.signIn?.accessToken else { return }
        let backend = self.backend
        spawn {
            let result: Result<AppleCredentialState, BackendError>
            do throws(BackendError) { result = .success(try await backend.appleCredentialState(accessToken: token)) } catch { result = .failure(error) }
            await self.appleAnswered(result, retried: retried)
        }
    }

    private func appleAnswered(_ result: Result<AppleCredentialState, BackendError>, retried: Bool) {
        guard standing.signIn != nil else { return }
        switch result {
        case .success(let answer):
            DaemonCounter.appleChecks.increment(answer.state.rawValue)
            audit.appleChecked(answer.state)
            perform(apple.handle(.checked(answer.state), now: clock.now(), random: .random(in: 0..<1)))
        case .failure(.invalidToken) where !retried:
            refreshAccessToken(then: .appleCheck)
        case .failure(let error):
            appleCheckFailed(error)
        }
    }

    private func appleCheckFailed(_ error: BackendError) {
        DaemonCounter.appleChecks.increment("error")
        if error == .invalidGrant {
            perform(creds.handle(.accessTokenRefreshFailed(.invalidGrant), now: clock.now()))
            return
        }
        logger.warning("the Apple credential check failed (nothing changes; retrying with backoff): \(error)")
        perform(apple.handle(.checkFailed(error.description), now: clock.now(), random: .random(in: 0..<1)))
    }

    // MARK: the access token

    /// Refreshes the access token, one refresh at a time (`RefreshJoins`); the rotated
    /// refresh token is saved before anything uses it.
    private func refreshAccessToken(then next: AccountStanding.AfterRefresh) {
        guard case let (id, current)? = standing.joinRefresh(then: next) else { return }
        let backend = self.backend
        spawn {
            let outcome: BackendError?
            do throws(BackendError) {
                let fresh = try await backend.refresh(refreshToken: current.refreshToken)
                DaemonCounter.accessTokenRefreshes.increment("ok")
                await self.storeRefreshed(fresh, basedOn: current)
                outcome = nil
            } catch {
                DaemonCounter.accessTokenRefreshes.increment("error")
                outcome = await self.standing.refreshFailed(error, basedOn: current)
            }
            await self.refreshFinished(id, outcome)
        }
    }

    private func refreshFinished(_ id: UUID, _ error: BackendError?) {
        for next in standing.refreshEnded(id) {
            switch next {
            case .credentials:
                if let error {
                    perform(creds.handle(.accessTokenRefreshFailed(error), now: clock.now(), random: .random(in: 0..<1)))
                } else {
                    perform(creds.handle(.accessTokenRefreshed, now: clock.now()))
                }
            case .appleCheck:
                if let error { appleCheckFailed(error) } else { checkApple(retried: true) }
            }
        }
    }

    private func storeRefreshed(_ fresh: RefreshedTokens, basedOn old: SignIn) {
        guard let updated = standing.refreshed(fresh, basedOn: old) else { return }
        for secret in [updated.accessToken, updated.refreshToken] { SecretRedactor.shared.register(secret) }
        do {
            try store.save(updated)
        } catch {
            logger.error("\(error)")
        }
        logger.info("access token refreshed")
    }

    // MARK: timers and jobs

    /// Runs `job` as a child of `run()`'s task group (queued until `run()` starts).
    private func spawn(_ job: @escaping ServiceTasks.Job) {
        tasks.spawn(job)
    }

    private func rescheduleTimer() {
        guard !stopped, !firing else { return }
        timers.wake()
    }

    /// The timers' step: performs what is due, answers when to look again.
    private func fire() -> StageLoop.Next {
        firing = true
        defer { firing = false }
        let now = clock.now()
        if wakes.take(.credentials, at: now) { perform(creds.handle(.wake, now: now, random: .random(in: 0..<1))) }
        if wakes.take(.apple, at: now) { perform(apple.handle(.wake, now: now, random: .random(in: 0..<1))) }
        return .wait(until: wakes.next)
    }

    // MARK: status

    /// The account's part of status, and a pairing under way.
    package func contribute(to s: inout DaemonStatus) {
        let now = clock.now()
        standing.contribute(to: &s, apple: apple, creds: creds, now: now)
        if let p = pairing, p.outcome == .pending, now < p.expiresAt { s.pairing = p.status }
    }
}
