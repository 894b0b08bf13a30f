/// Credentials: the saved sign-in, the STS refresh state machine and the Apple credential-state schedule.
import Foundation
import PhotolalaCore

/// The STS credentials lifecycle as a pure value: `(state, event, now) -> actions`.
/// No I/O and no clock of its own, so every transition is tested with plain dates.
///
/// Fetch on demand; refresh at `expiration − refreshBeforeExpiry` (minus a little jitter)
/// while uploads go on with the old credentials; one fetch in flight however many ask;
/// failures back off exponentially and keep valid credentials until they truly expire;
/// a 401 refreshes the access token once; `invalid_grant` needs a login; a 403 with a
/// pause code pauses and re-asks every 15 minutes (or on resume).
package struct CredentialsMachine: Sendable, Equatable {
    package struct Config: Sendable, Equatable {
        package var refreshBeforeExpiry: TimeInterval
        /// Failed fetches and refreshes: 2 s doubling to 5 minutes, never under half a step
        /// (a jitter that spreads many NASes apart without ever retrying in a tight loop).
        package var retry = Backoff(base: 2, cap: 300, jitter: .equal)
        package var pauseRecheck: TimeInterval = 900
        /// Credentials are not handed out this close to their expiry.
        package var expiryMargin: TimeInterval = 5
        package init(refreshBeforeExpiry: TimeInterval) {
            self.refreshBeforeExpiry = refreshBeforeExpiry
        }
    }

    package enum Phase: Sendable, Equatable {
        case signedOut
        case idle
        case fetching
        case refreshingAccessToken
        case backoff(until: Date)
        case paused(DaemonStatus.PauseReason, until: Date)
        case needsLogin
    }

    package enum Event: Sendable {
        case signedIn
        case signedOut
        case needed
        case wake
        case stsSucceeded(STSGrant)
        case stsFailed(BackendError)
        case accessTokenRefreshed
        case accessTokenRefreshFailed(BackendError)
        /// S3 said ExpiredToken / InvalidToken / TokenRefreshRequired.
        case rejectedByS3
        /// Forget the credentials without fetching new ones (the Apple ID was revoked).
        case drop
        case resume
    }

    package enum Action: Sendable, Equatable {
        case fetchSTS
        case refreshAccessToken
        case wake(at: Date)
        case pause(DaemonStatus.PauseReason)
        case unpause
        case needsLogin
    }

    package private(set) var config: Config
    package private(set) var phase: Phase = .signedOut
    package private(set) var grant: STSGrant?
    package private(set) var failures = 0
    package private(set) var refreshAt: Date?
    /// When the credentials in hand arrived: their lifetime, which bounds the refresh lead.
    private var grantReceivedAt: Date?
    package private(set) var lastError: String?
    private var triedAccessTokenRefresh = false
    /// The fetch under way is a re-ask during a pause: success lifts it.
    private var pausedBeforeFetch = false

    package init(config: Config) {
        self.config = config
    }

    /// Credentials an uploader may use right now (possibly while a refresh runs).
    package func usable(now: Date) -> STSGrant? {
        guard let grant, now.addingTimeInterval(config.expiryMargin) < grant.expiration else { return nil }
        switch phase {
        case .paused, .needsLogin, .signedOut: return nil
        default: return grant
        }
    }

    /// `random` in [0, 1) spreads refreshes and retries of many NASes apart.
    package mutating func handle(_ event: Event, now: Date, random: Double = 0.5) -> [Action] {
        switch event {
        case .signedIn:
            phase = .idle
            grant = nil
            failures = 0
            lastError = nil
            return []

        case .signedOut:
            phase = .signedOut
            grant = nil
            refreshAt = nil
            lastError = nil
            return []

        case .needed:
            guard phase == .idle, usable(now: now) == nil else { return [] }
            return startFetch()

        case .wake:
            switch phase {
            case .backoff(let until) where now >= until:
                return startFetch()
            case .paused(_, let until) where now >= until:
                return startFetch()
            case .idle:
                if let refreshAt, now >= refreshAt { return startFetch() }
                return []
            default:
                return []
            }

        case .stsSucceeded(let fresh):
            // An answer nobody waits for any more (dropped, signed out) is not kept.
            guard phase == .fetching else { return [] }
            guard now.addingTimeInterval(config.expiryMargin) < fresh.expiration else {
                // Dead on arrival by this machine's clock (a NAS clock hours ahead, typically):
                // they could not be used, and fetching again at once looped as fast as the
                // backend answered (the network suite counted 100 sts-token calls a second).
                pausedBeforeFetch = false
                return backOff(message: "the storage credentials received expire at \(Timestamp.string(fresh.expiration)), "
                                   + "which this NAS's clock says is already past: check the clock (timedatectl)", now: now, random: random)
            }
            let wasPaused = pausedBeforeFetch
            pausedBeforeFetch = false
            grant = fresh
            failures = 0
            lastError = nil
            triedAccessTokenRefresh = false
            phase = .idle
            grantReceivedAt = now
            let at = refreshTime(for: fresh, receivedAt: now, now: now, random: random)
            refreshAt = at
            return (wasPaused ? [.unpause] : []) + [.wake(at: at)]

        case .stsFailed(let error):
            guard phase == .fetching else { return [] }
            switch error {
            case .invalidToken where !triedAccessTokenRefresh:
                triedAccessTokenRefresh = true
                phase = .refreshingAccessToken
                return [.refreshAccessToken]
            case .invalidGrant:
                return loginNeeded()
            case .forbidden(let code, _):
                let reason = Self.pauseReason(code)
                let until = now.addingTimeInterval(config.pauseRecheck)
                phase = .paused(reason, until: until)
                pausedBeforeFetch = false
                grant = nil
                lastError = error.description
                triedAccessTokenRefresh = false
                return [.pause(reason), .wake(at: until)]
            default:
                return backOff(error, now: now, random: random)
            }

        case .accessTokenRefreshed:
            guard phase == .refreshingAccessToken else { return [] }
            phase = .fetching
            return [.fetchSTS]

        case .accessTokenRefreshFailed(let error):
            if error == .invalidGrant || error == .invalidToken { return loginNeeded() }
            return backOff(error, now: now, random: random)

        case .rejectedByS3:
            grant = nil
            refreshAt = nil
            if phase == .idle { return startFetch() }
            return []

        case .drop:
            grant = nil
            refreshAt = nil
            if phase == .fetching || phase == .refreshingAccessToken { phase = .idle }
            return []

        case .resume:
            if case .paused = phase { return startFetch() }
            if case .backoff = phase { return startFetch() }
            return []
        }
    }

    /// New settings on reload. A different `refreshBeforeExpiry` moves the refresh of the
    /// credentials in hand at once (to now, if the new lead has already begun).
    package mutating func reconfigure(_ new: Config, now: Date, random: Double = 0.5) -> [Action] {
        guard new != config else { return [] }
        config = new
        guard phase == .idle, let grant, let receivedAt = grantReceivedAt, refreshAt != nil else { return [] }
        let at = refreshTime(for: grant, receivedAt: receivedAt, now: now, random: random)
        refreshAt = at
        return [.wake(at: at)]
    }

    /// Refresh early by the configured lead, but use at least half of a short lifetime.
    private func refreshTime(for grant: STSGrant, receivedAt: Date, now: Date, random: Double) -> Date {
        let lifetime = grant.expiration.timeIntervalSince(receivedAt)
        let lead = min(config.refreshBeforeExpiry, lifetime / 2)
        let jitter = min(30, lead * 0.1) * random
        return max(now.addingTimeInterval(1), grant.expiration.addingTimeInterval(-lead - jitter))
    }

    private mutating func startFetch() -> [Action] {
        let wasPaused: Bool
        if case .paused = phase { wasPaused = true } else { wasPaused = false }
        pausedBeforeFetch = wasPaused || pausedBeforeFetch
        phase = .fetching
        triedAccessTokenRefresh = false
        return [.fetchSTS]
    }

    private mutating func loginNeeded() -> [Action] {
        phase = .needsLogin
        grant = nil
        refreshAt = nil
        lastError = BackendError.invalidGrant.description
        return [.needsLogin]
    }

    private mutating func backOff(_ error: BackendError, now: Date, random: Double) -> [Action] {
        backOff(message: error.description, now: now, random: random)
    }

    private mutating func backOff(message: String, now: Date, random: Double) -> [Action] {
        failures += 1
        triedAccessTokenRefresh = false
        lastError = message
        let until = now.addingTimeInterval(config.retry.delay(after: failures, random: random))
        phase = .backoff(until: until)
        return [.wake(at: until)]
    }

    static func pauseReason(_ code: String) -> DaemonStatus.PauseReason {
        switch code {
        case "quota_exceeded": .quotaExceeded
        case "account_revoked": .accountRevoked
        default: .subscriptionRequired
        }
    }

    /// The `credentials` block of status.
    package func status(now: Date) -> DaemonStatus.Credentials {
        let state: DaemonStatus.Credentials.State
        var next: Date?
        switch phase {
        case .signedOut, .needsLogin: state = .none
        case .idle: state = usable(now: now) != nil ? .valid : .none
        case .fetching, .refreshingAccessToken: state = grant == nil ? .fetching : .refreshing
        case .backoff(let until): state = .backoff; next = until
        case .paused(_, let until): state = .failed; next = until
        }
        return DaemonStatus.Credentials(state: state, expiresAt: grant.map { Timestamp.string($0.expiration) },
                                        lastError: lastError, nextAttemptAt: next.map(Timestamp.string))
    }
}
