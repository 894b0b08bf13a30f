import Backend
import Foundation
import Logging
import PhotolalaCore
import ServiceLifecycle

/// The account side of the daemon: the saved sign-in, login (pairing or identity token),
/// the STS credentials machine and the Apple credential-state schedule. The machines
/// decide; this actor only performs their actions and feeds the results back. Timers are
/// one sleeping task aimed at the next scheduled moment: nothing polls.
///
/// By aspect: `+SignIn` (identity token, logout), `+Pairing`, `+Credentials` (STS and the
/// access-token refresh), `+AppleCheck`, `+Status`.
package actor AccountService: Service {
    package enum Unavailable: Error, Sendable, Equatable {
        case signedOut
        case paused(DaemonStatus.PauseReason)
        case cancelled
    }

    /// Says when the pause reasons this service imposes changed (credentials or Apple
    /// state), and whatever else it shows in the status.
    package nonisolated let statusChanges: ChangeFeed
    /// Says when the credentials in hand were dropped (logout, Apple ID revoked, a
    /// subscription pause): whoever uses them stops what is under way.
    package nonisolated let credentialDrops = ChangeFeed()

    let store: AccountStore
    let deviceIdentity: DeviceIdentity
    /// This NAS's id, once made (at the first sign-in); every backend call carries it.
    package private(set) var deviceId: String?
    var backend: BackendClient
    let logger: Logger
    var deviceName: String
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

    package init(stateDir: String, backend: BackendClient, deviceName: String, refreshBeforeExpiry: Duration,
                appleCheckInterval: Duration, logger: Logger, statusChanges: ChangeFeed = ChangeFeed()) {
        store = AccountStore(stateDir: stateDir)
        deviceIdentity = DeviceIdentity(stateDir: stateDir)
        let deviceId = deviceIdentity.load()
        self.deviceId = deviceId
        self.statusChanges = statusChanges
        self.backend = backend
        self.backend.deviceId = deviceId
        self.deviceName = deviceName
        self.logger = logger
        creds = CredentialsMachine(config: .init(refreshBeforeExpiry: Units.seconds(refreshBeforeExpiry)))
        apple = AppleCheckMachine(config: .init(interval: Units.seconds(appleCheckInterval)))
    }

    /// Settings that can change on reload.
    package func reconfigure(backend: BackendClient, deviceName: String, refreshBeforeExpiry: Duration, appleCheckInterval: Duration) {
        self.backend = backend
        self.backend.deviceId = deviceId
        self.deviceName = deviceName
        var credsConfig = creds.config
        credsConfig.refreshBeforeExpiry = Units.seconds(refreshBeforeExpiry)
        perform(creds.reconfigure(credsConfig, now: Date(), random: .random(in: 0..<1)))
        perform(apple.reconfigure(.init(interval: Units.seconds(appleCheckInterval)), now: Date()))
    }

    /// Restores the saved sign-in (before READY, so status is right from the first answer).
    package func restore() async {
        guard signIn == nil, let saved = store.load() else { return }
        logger.notice("restored the saved sign-in", metadata: ["user": "\(saved.userId)"])
        // A sign-in saved by a version without device ids gets its id now: the NAS's
        // manifest needs one, and a signed-in NAS may never sign in again.
        do {
            _ = try ensureDeviceId()
        } catch {
            logger.error("cannot save this NAS's device id in the state directory: \(error)")
        }
        await adopt(saved, persist: false)
    }

    package func run() async throws {
        try? await gracefulShutdown()
        stopped = true
        timer?.cancel()
        pairingTask?.cancel()
        for (_, w) in waiters { w.resume(returning: nil) }
        waiters.removeAll()
    }

    // MARK: what the pipeline asks

    /// Why uploads must not run now, if they must not.
    package var uploadBlock: Unavailable? {
        if signIn == nil || needsLogin { return .signedOut }
        if let r = apple.pauseReason { return .paused(r) }
        if case .paused(let r, _) = creds.phase { return .paused(r) }
        return nil
    }

    package var pauseReason: DaemonStatus.PauseReason? {
        if case .paused(let r)? = uploadBlock { return r }
        return nil
    }

    package var isSignedIn: Bool { signIn != nil && !needsLogin }

    /// The Photolala user id (a UUID), never the Apple one.
    package var userId: String? { isSignedIn ? signIn?.userId : nil }

    /// `photolalactl resume`: re-ask at once after a subscription/quota pause.
    package func resume() {
        perform(creds.handle(.resume, now: Date(), random: .random(in: 0..<1)))
        if apple.blocksUploads || apple.lastError != nil {
            perform(apple.handle(.wake, now: .distantFuture))
        }
    }

    /// The device id, made and saved at the first sign-in; a sign-in without it would
    /// register a device the manifest could not be found under again.
    func ensureDeviceId() throws(AccountStore.Failure) -> String {
        if let deviceId { return deviceId }
        let id = try deviceIdentity.loadOrCreate()
        deviceId = id
        backend.deviceId = id
        logger.notice("this NAS's device id was made", metadata: ["device": "\(id)"])
        return id
    }

    // MARK: timers

    func rescheduleTimer() {
        timer?.cancel()
        guard !stopped, let next = [credsWake, appleWake].compactMap({ $0 }).min() else { return }
        timer = Task {
            let delay = next.timeIntervalSinceNow
            if delay > 0 { try? await Task.sleep(for: .milliseconds(Int64(delay * 1000) + 5)) }
            guard !Task.isCancelled else { return }
            self.fire()
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
