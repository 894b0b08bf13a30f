import Foundation
import PhotolalaCore

/// The Apple credential-state schedule as a pure value: asks at start-up and every
/// `interval` (with jitter); revoked / notFound / transferred pause at once, authorized
/// lifts that pause by itself; a failed check changes nothing but is retried with backoff.
package struct AppleCheckMachine: Sendable, Equatable {
    package struct Config: Sendable, Equatable {
        package var interval: TimeInterval
        package var jitter: Double = 0.1
        /// Failed checks: from a quarter of the interval (at most 30 s) doubling up to the
        /// interval (at most 30 minutes), so a short test interval retries quickly too.
        package var retry: Backoff
        package init(interval: TimeInterval) {
            self.interval = interval
            let base = min(30, max(1, interval / 4))
            retry = Backoff(base: base, cap: min(1800, max(base, interval)), jitter: .equal)
        }
    }

    package enum Event: Sendable {
        case signedIn
        case signedOut
        case wake
        case checked(AppleCredentialState.State)
        case checkFailed(String)
    }

    package enum Action: Sendable, Equatable {
        case check
        case wake(at: Date)
        case pause(DaemonStatus.PauseReason)
        case lift
        /// Drop STS credentials and cancel in-flight uploads: nothing may reach S3 now.
        case dropCredentials
    }

    package private(set) var config: Config
    package private(set) var state: DaemonStatus.AppleCredential.State = .unknown
    package private(set) var checkedAt: Date?
    package private(set) var nextCheckAt: Date?
    package private(set) var failures = 0
    package private(set) var lastError: String?
    package private(set) var signedIn = false
    package private(set) var inFlight = false

    package init(config: Config) {
        self.config = config
    }

    package var blocksUploads: Bool { [.revoked, .notFound, .transferred].contains(state) }

    package mutating func handle(_ event: Event, now: Date, random: Double = 0.5) -> [Action] {
        switch event {
        case .signedIn:
            signedIn = true
            failures = 0
            lastError = nil
            let wasBlocking = blocksUploads
            state = .unknown
            inFlight = true
            nextCheckAt = nil
            return (wasBlocking ? [.lift] : []) + [.check]

        case .signedOut:
            let wasBlocking = blocksUploads
            signedIn = false
            inFlight = false
            state = .unknown
            nextCheckAt = nil
            return wasBlocking ? [.lift] : []

        case .wake:
            guard signedIn, !inFlight, let next = nextCheckAt, now >= next else { return [] }
            inFlight = true
            return [.check]

        case .checked(let answer):
            guard signedIn else { return [] }
            inFlight = false
            failures = 0
            lastError = nil
            checkedAt = now
            let before = blocksUploads
            let reasonBefore = pauseReason
            state = Self.publicState(answer)
            let spread = config.interval * config.jitter * (random * 2 - 1)
            let next = now.addingTimeInterval(max(1, config.interval + spread))
            nextCheckAt = next
            var actions: [Action] = []
            if let reason = pauseReason {
                // Once per change: a still-revoked answer every interval is not news.
                if reason != reasonBefore { actions += [.pause(reason), .dropCredentials] }
            } else if before {
                actions.append(.lift)
            }
            return actions + [.wake(at: next)]

        case .checkFailed(let why):
            guard signedIn else { return [] }
            inFlight = false
            failures += 1
            lastError = why
            let next = now.addingTimeInterval(config.retry.delay(after: failures, random: random))
            nextCheckAt = next
            return [.wake(at: next)]
        }
    }

    /// New settings on reload. A check planned further out than the new interval allows
    /// comes forward to `interval` after the last one (now, if that has passed): a user
    /// who shortens the interval wants it to count now, not after the old one ran out.
    /// A longer interval takes effect from the next check; a retry after a failure keeps
    /// its backoff.
    package mutating func reconfigure(_ new: Config, now: Date) -> [Action] {
        guard new != config else { return [] }
        config = new
        guard signedIn, !inFlight, failures == 0, let next = nextCheckAt else { return [] }
        let due = max(now, (checkedAt ?? now).addingTimeInterval(new.interval))
        guard due < next else { return [] }
        nextCheckAt = due
        return [.wake(at: due)]
    }

    package var pauseReason: DaemonStatus.PauseReason? {
        switch state {
        case .revoked: .appleRevoked
        case .notFound: .appleNotFound
        case .transferred: .appleTransferred
        default: nil
        }
    }

    static func publicState(_ s: AppleCredentialState.State) -> DaemonStatus.AppleCredential.State {
        switch s {
        case .authorized: .authorized
        case .revoked: .revoked
        case .notFound: .notFound
        case .transferred: .transferred
        }
    }

    package var status: DaemonStatus.AppleCredential {
        DaemonStatus.AppleCredential(state: state, checkedAt: checkedAt.map(Timestamp.string),
                                     nextCheckAt: nextCheckAt.map(Timestamp.string), lastError: lastError)
    }
}
