import Account
import Foundation
import PhotolalaCore
import Testing

/// Every transition of the STS machine, driven by plain dates (the test clock).
@Suite struct CredentialsMachineTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func grant(expiresIn seconds: TimeInterval, from now: Date) -> STSGrant {
        STSGrant(accessKeyId: "ASIA", secretAccessKey: "s", sessionToken: "t", expiration: now.addingTimeInterval(seconds),
                 region: "us-east-1", bucket: "photolala", endpoint: nil)
    }

    func signedIn(refresh: TimeInterval = 300) -> CredentialsMachine {
        var m = CredentialsMachine(config: .init(refreshBeforeExpiry: refresh))
        _ = m.handle(.signedIn, now: t0)
        return m
    }

    @Test func fetchesOnDemandOnlyOnce() {
        var m = signedIn()
        #expect(m.handle(.needed, now: t0) == [.fetchSTS])
        // Ten uploaders asking while the fetch runs start nothing more.
        for _ in 0..<10 { #expect(m.handle(.needed, now: t0).isEmpty) }
        #expect(m.status(now: t0).state == .fetching)
    }

    @Test func refreshesBeforeExpiryWhileOldCredentialsStayUsable() {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        let g = grant(expiresIn: 3600, from: t0)
        let actions = m.handle(.stsSucceeded(g), now: t0, random: 0)
        #expect(actions == [.wake(at: t0.addingTimeInterval(3300))])
        #expect(m.status(now: t0).state == .valid)
        #expect(m.handle(.wake, now: t0.addingTimeInterval(3000)).isEmpty)
        let refresh = t0.addingTimeInterval(3300)
        #expect(m.handle(.wake, now: refresh) == [.fetchSTS])
        #expect(m.usable(now: refresh) == g)
        #expect(m.status(now: refresh).state == .refreshing)
        #expect(m.handle(.needed, now: refresh).isEmpty)
    }

    @Test func jitterMovesTheRefreshEarlierALittle() {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        let actions = m.handle(.stsSucceeded(grant(expiresIn: 3600, from: t0)), now: t0, random: 1)
        #expect(actions == [.wake(at: t0.addingTimeInterval(3600 - 300 - 30))])
    }

    @Test func shortLivedCredentialsRefreshBeforeTheyExpire() {
        var m = signedIn(refresh: 5)
        _ = m.handle(.needed, now: t0)
        let actions = m.handle(.stsSucceeded(grant(expiresIn: 15, from: t0)), now: t0, random: 0)
        #expect(actions == [.wake(at: t0.addingTimeInterval(10))])
    }

    @Test func aNewRefreshLeadOnReloadMovesTheRefreshOfTheCredentialsInHand() {
        var m = signedIn(refresh: 300)
        _ = m.handle(.needed, now: t0)
        _ = m.handle(.stsSucceeded(grant(expiresIn: 3600, from: t0)), now: t0, random: 0)
        #expect(m.refreshAt == t0.addingTimeInterval(3300))
        // Ten minutes before expiry instead of five.
        let later = t0.addingTimeInterval(1000)
        #expect(m.reconfigure(.init(refreshBeforeExpiry: 600), now: later, random: 0) == [.wake(at: t0.addingTimeInterval(3000))])
        #expect(m.refreshAt == t0.addingTimeInterval(3000))
        // A lead that has already begun: refresh now (a second from now), not in the past.
        let late = t0.addingTimeInterval(3100)
        #expect(m.reconfigure(.init(refreshBeforeExpiry: 900), now: late, random: 0) == [.wake(at: late.addingTimeInterval(1))])
        #expect(m.handle(.wake, now: late.addingTimeInterval(1)) == [.fetchSTS])
        // The same settings again change nothing.
        #expect(m.reconfigure(.init(refreshBeforeExpiry: 900), now: late).isEmpty)
    }

    @Test func aNewRefreshLeadWithoutCredentialsOnlyRecordsIt() {
        var m = signedIn(refresh: 300)
        #expect(m.reconfigure(.init(refreshBeforeExpiry: 60), now: t0).isEmpty)
        _ = m.handle(.needed, now: t0)
        #expect(m.handle(.stsSucceeded(grant(expiresIn: 3600, from: t0)), now: t0, random: 0) == [.wake(at: t0.addingTimeInterval(3540))])
    }

    @Test func credentialsDeadOnArrivalBackOffInsteadOfLooping() {
        // A NAS clock hours ahead: every grant is already past its expiration here.
        var m = signedIn()
        #expect(m.handle(.needed, now: t0) == [.fetchSTS])
        let dead = grant(expiresIn: -7200, from: t0)
        let actions = m.handle(.stsSucceeded(dead), now: t0, random: 1)
        #expect(actions == [.wake(at: t0.addingTimeInterval(2))])
        #expect(m.usable(now: t0) == nil)
        #expect(m.handle(.needed, now: t0).isEmpty, "no new fetch before the backoff is over")
        let s = m.status(now: t0)
        #expect(s.state == .backoff && (s.lastError ?? "").contains("clock"))
        // One that expires within the margin is no better.
        #expect(m.handle(.wake, now: t0.addingTimeInterval(2)) == [.fetchSTS])
        guard case .wake(let at)? = m.handle(.stsSucceeded(grant(expiresIn: 3, from: t0.addingTimeInterval(2))),
                                              now: t0.addingTimeInterval(2), random: 1).first else {
            Issue.record("no backoff"); return
        }
        #expect(at == t0.addingTimeInterval(6))
    }

    @Test func failedRefreshBacksOffAndKeepsValidCredentials() {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        let g = grant(expiresIn: 600, from: t0)
        _ = m.handle(.stsSucceeded(g), now: t0, random: 0)
        var now = t0.addingTimeInterval(300)
        #expect(m.handle(.wake, now: now) == [.fetchSTS])
        var delays: [TimeInterval] = []
        for _ in 0..<5 {
            let a = m.handle(.stsFailed(.transient("503")), now: now, random: 1)
            guard case .wake(let at)? = a.first else { Issue.record("no wake"); return }
            delays.append(at.timeIntervalSince(now))
            #expect(m.usable(now: now) == g)
            #expect(m.status(now: now).state == .backoff)
            now = at
            #expect(m.handle(.wake, now: now) == [.fetchSTS])
        }
        #expect(delays == [2, 4, 8, 16, 32])
        // Past the real expiry the old credentials are no longer handed out.
        #expect(m.usable(now: t0.addingTimeInterval(600)) == nil)
    }

    @Test func backoffIsCapped() {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        var last: TimeInterval = 0
        var now = t0
        for _ in 0..<20 {
            if case .wake(let at)? = m.handle(.stsFailed(.transient("x")), now: now, random: 1).first {
                last = at.timeIntervalSince(now)
                now = at
            }
            _ = m.handle(.wake, now: now)
        }
        #expect(last == 300)
    }

    @Test func invalidTokenRefreshesTheAccessTokenOnceThenRetries() {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        #expect(m.handle(.stsFailed(.invalidToken), now: t0) == [.refreshAccessToken])
        #expect(m.handle(.accessTokenRefreshed, now: t0) == [.fetchSTS])
        // A second 401 right after a refresh is not looped on: it backs off.
        let a = m.handle(.stsFailed(.invalidToken), now: t0, random: 0)
        #expect(a == [.wake(at: t0.addingTimeInterval(1))])
    }

    @Test func invalidGrantNeedsLogin() {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        _ = m.handle(.stsFailed(.invalidToken), now: t0)
        #expect(m.handle(.accessTokenRefreshFailed(.invalidGrant), now: t0) == [.needsLogin])
        #expect(m.phase == .needsLogin)
        #expect(m.handle(.needed, now: t0).isEmpty)
        #expect(m.status(now: t0).state == .none)
    }

    @Test(arguments: [("subscription_required", DaemonStatus.PauseReason.subscriptionRequired),
                      ("quota_exceeded", .quotaExceeded), ("account_revoked", .accountRevoked)])
    func forbiddenPausesAndReasksEvery15Minutes(code: String, reason: DaemonStatus.PauseReason) {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        let a = m.handle(.stsFailed(.forbidden(code: code, message: "")), now: t0)
        #expect(a == [.pause(reason), .wake(at: t0.addingTimeInterval(900))])
        #expect(m.usable(now: t0) == nil)
        #expect(m.handle(.needed, now: t0.addingTimeInterval(10)).isEmpty)
        #expect(m.handle(.wake, now: t0.addingTimeInterval(899)).isEmpty)
        #expect(m.handle(.wake, now: t0.addingTimeInterval(900)) == [.fetchSTS])
        // Still refused: paused again for another 15 minutes.
        #expect(m.handle(.stsFailed(.forbidden(code: code, message: "")), now: t0.addingTimeInterval(900)).first == .pause(reason))
        // Lifted at the backend, noticed at the next ask: unpaused.
        _ = m.handle(.wake, now: t0.addingTimeInterval(1800))
        #expect(m.handle(.stsSucceeded(grant(expiresIn: 3600, from: t0)), now: t0.addingTimeInterval(1800)).first == .unpause)
    }

    @Test func resumeReasksAtOnce() {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        _ = m.handle(.stsFailed(.forbidden(code: "quota_exceeded", message: "")), now: t0)
        #expect(m.handle(.resume, now: t0.addingTimeInterval(5)) == [.fetchSTS])
    }

    @Test func s3RejectionInvalidatesAndRefetchesOnce() {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        _ = m.handle(.stsSucceeded(grant(expiresIn: 3600, from: t0)), now: t0)
        #expect(m.handle(.rejectedByS3, now: t0) == [.fetchSTS])
        #expect(m.usable(now: t0) == nil)
        #expect(m.handle(.rejectedByS3, now: t0).isEmpty)
    }

    @Test func signOutDropsEverything() {
        var m = signedIn()
        _ = m.handle(.needed, now: t0)
        _ = m.handle(.stsSucceeded(grant(expiresIn: 3600, from: t0)), now: t0)
        _ = m.handle(.signedOut, now: t0)
        #expect(m.usable(now: t0) == nil && m.grant == nil)
        #expect(m.handle(.needed, now: t0).isEmpty)
    }
}

@Suite struct AppleCheckMachineTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func started(interval: TimeInterval = 21600) -> AppleCheckMachine {
        var m = AppleCheckMachine(config: .init(interval: interval))
        #expect(m.handle(.signedIn, now: t0) == [.check])
        return m
    }

    @Test func checksAtStartAndEveryIntervalWithJitter() {
        var m = started()
        #expect(m.handle(.checked(.authorized), now: t0, random: 0.5) == [.wake(at: t0.addingTimeInterval(21600))])
        #expect(m.status.state == .authorized && m.status.checkedAt != nil)
        #expect(m.handle(.wake, now: t0.addingTimeInterval(100)).isEmpty)
        #expect(m.handle(.wake, now: t0.addingTimeInterval(21600)) == [.check])
        // Only one check at a time.
        #expect(m.handle(.wake, now: t0.addingTimeInterval(21601)).isEmpty)
        let early = m.handle(.checked(.authorized), now: t0.addingTimeInterval(21600), random: 0)
        #expect(early == [.wake(at: t0.addingTimeInterval(21600 + 21600 * 0.9))])
    }

    @Test(arguments: [(AppleCredentialState.State.revoked, DaemonStatus.PauseReason.appleRevoked),
                      (.notFound, .appleNotFound), (.transferred, .appleTransferred)])
    func revocationPausesAtOnceAndDropsCredentials(answer: AppleCredentialState.State, reason: DaemonStatus.PauseReason) {
        var m = started(interval: 60)
        let a = m.handle(.checked(answer), now: t0)
        #expect(a.prefix(2) == [.pause(reason), .dropCredentials])
        #expect(m.blocksUploads)
        // Authorized again at a later check: the pause lifts by itself.
        _ = m.handle(.wake, now: t0.addingTimeInterval(60))
        #expect(m.handle(.checked(.authorized), now: t0.addingTimeInterval(60)).first == .lift)
        #expect(!m.blocksUploads)
    }

    @Test func failedCheckChangesNothingAndBacksOff() {
        var m = started(interval: 3600)
        _ = m.handle(.checked(.authorized), now: t0)
        _ = m.handle(.wake, now: t0.addingTimeInterval(3600))
        let a = m.handle(.checkFailed("HTTP 500"), now: t0.addingTimeInterval(3600), random: 1)
        #expect(a == [.wake(at: t0.addingTimeInterval(3600 + 30))])
        #expect(m.status.state == .authorized)
        #expect(m.status.lastError == "HTTP 500")
        #expect(!m.blocksUploads)
        _ = m.handle(.wake, now: t0.addingTimeInterval(3630))
        let b = m.handle(.checkFailed("timeout"), now: t0.addingTimeInterval(3630), random: 1)
        #expect(b == [.wake(at: t0.addingTimeInterval(3630 + 60))])
    }

    @Test func failureWhileRevokedKeepsThePause() {
        var m = started(interval: 60)
        _ = m.handle(.checked(.revoked), now: t0)
        _ = m.handle(.wake, now: t0.addingTimeInterval(60))
        #expect(!m.handle(.checkFailed("down"), now: t0.addingTimeInterval(60)).contains(.lift))
        #expect(m.blocksUploads)
    }

    @Test func aShorterIntervalOnReloadBringsTheNextCheckForward() {
        var m = started(interval: 21600)
        _ = m.handle(.checked(.authorized), now: t0, random: 0.5)
        // Ten seconds now: due ten seconds after the last check, which has passed: at once.
        let later = t0.addingTimeInterval(30)
        #expect(m.reconfigure(.init(interval: 10), now: later) == [.wake(at: later)])
        #expect(m.handle(.wake, now: later) == [.check])
        #expect(m.handle(.checked(.revoked), now: later, random: 0.5).prefix(2) == [.pause(.appleRevoked), .dropCredentials])
        #expect(m.status.nextCheckAt == Timestamp.string(later.addingTimeInterval(10)))
    }

    @Test func aShorterIntervalNotYetRunOutCountsFromTheLastCheck() {
        var m = started(interval: 21600)
        _ = m.handle(.checked(.authorized), now: t0, random: 0.5)
        #expect(m.reconfigure(.init(interval: 600), now: t0.addingTimeInterval(100)) == [.wake(at: t0.addingTimeInterval(600))])
    }

    @Test func aLongerIntervalOrAFailedCheckKeepsTheScheduleOnReload() {
        var m = started(interval: 600)
        _ = m.handle(.checked(.authorized), now: t0, random: 0.5)
        #expect(m.reconfigure(.init(interval: 3600), now: t0.addingTimeInterval(10)).isEmpty)
        #expect(m.status.nextCheckAt == Timestamp.string(t0.addingTimeInterval(600)))
        // The interval applies from the next check on.
        _ = m.handle(.wake, now: t0.addingTimeInterval(600))
        #expect(m.handle(.checked(.authorized), now: t0.addingTimeInterval(600), random: 0.5) == [.wake(at: t0.addingTimeInterval(4200))])
        // While a failed check waits out its backoff, a reload does not cut it short.
        _ = m.handle(.wake, now: t0.addingTimeInterval(4200))
        _ = m.handle(.checkFailed("down"), now: t0.addingTimeInterval(4200), random: 1)
        #expect(m.reconfigure(.init(interval: 5), now: t0.addingTimeInterval(4201)).isEmpty)
        // Nor one that is under way, nor a machine signed out.
        var n = started(interval: 600)
        #expect(n.reconfigure(.init(interval: 5), now: t0).isEmpty)
        _ = n.handle(.signedOut, now: t0)
        #expect(n.reconfigure(.init(interval: 60), now: t0).isEmpty)
    }

    @Test func signedOutStopsChecking() {
        var m = started()
        _ = m.handle(.checked(.revoked), now: t0)
        #expect(m.handle(.signedOut, now: t0) == [.lift])
        #expect(m.handle(.wake, now: t0.addingTimeInterval(1e6)).isEmpty)
    }
}
