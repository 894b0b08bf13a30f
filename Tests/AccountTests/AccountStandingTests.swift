@testable import Account
import Bucket
import Foundation
import PhotolalaCore
import Testing

/// Which sign-in is in force, what a refresh's answer means to it, and whether uploads may run.
@Suite struct AccountStandingTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let first = SignIn(userId: "U1", accessToken: "plt_1", accessTokenExpiresAt: nil, refreshToken: "plr_1")
    let second = SignIn(userId: "U2", accessToken: "plt_2", accessTokenExpiresAt: nil, refreshToken: "plr_2")
    let fresh = RefreshedTokens(accessToken: "plt_1b", accessTokenExpiresAt: nil, refreshToken: "plr_1b")

    var machines: (apple: AppleCheckMachine, creds: CredentialsMachine) {
        var apple = AppleCheckMachine(config: .init(interval: 21600))
        var creds = CredentialsMachine(config: .init(refreshBeforeExpiry: 300))
        _ = apple.handle(.signedIn, now: t0)
        _ = creds.handle(.signedIn, now: t0)
        return (apple, creds)
    }

    func signedIn(_ s: SignIn) -> AccountStanding {
        var standing = AccountStanding(deviceIdAtStart: false)
        standing.adopt(s)
        return standing
    }

    @Test func aRefreshOvertakenByAnotherSignInNeitherSignsOutNorBringsItsTokensBack() throws {
        var standing = signedIn(first)
        let started = standing.joinRefresh(then: .credentials)
        let (id, basedOn) = try #require(started)
        #expect(basedOn == first)
        standing.adopt(second)
        #expect(standing.refreshFailed(.invalidGrant, basedOn: first) == nil)
        let refreshed = standing.refreshed(fresh, basedOn: first)
        #expect(refreshed == nil && standing.signIn == second)
        // The refresh's callers still hear its end; a new refresh may start meanwhile.
        let another = standing.joinRefresh(then: .appleCheck)
        let ended = standing.refreshEnded(id)
        #expect(another != nil && ended == [.credentials])
    }

    @Test func aRefreshOfTheSignInInForceIsKeptOrRefused() {
        var standing = signedIn(first)
        #expect(standing.refreshFailed(.invalidGrant, basedOn: first) == .invalidGrant)
        #expect(standing.refreshFailed(.transient("down"), basedOn: first) == .transient("down"))
        let refreshed = standing.refreshed(fresh, basedOn: first)
        #expect(refreshed == first.refreshed(with: fresh) && standing.signIn?.refreshToken == "plr_1b")
    }

    @Test func callersJoinTheOneRefreshUnderWay() throws {
        var standing = AccountStanding(deviceIdAtStart: false)
        let signedOut = standing.joinRefresh(then: .credentials)
        #expect(signedOut == nil)
        standing.adopt(first)
        let started = standing.joinRefresh(then: .credentials), joined = standing.joinRefresh(then: .appleCheck)
        let id = try #require(started).id
        #expect(joined == nil)
        let ended = standing.refreshEnded(id)
        #expect(ended == [.credentials, .appleCheck])
        // A logout leaves the callers of the refresh under way answered, and nothing to join.
        let restarted = standing.joinRefresh(then: .credentials)
        let next = try #require(restarted).id
        let held = standing.drop(), afterLogout = standing.joinRefresh(then: .appleCheck)
        #expect(held == first && afterLogout == nil)
        let nextEnded = standing.refreshEnded(next)
        #expect(nextEnded == [.credentials])
    }

    @Test func aRefusedSignInBlocksUploadsButTheStatusStillSaysWhose() {
        let (apple, creds) = machines
        var standing = signedIn(first)
        #expect(standing.uploadBlock(apple: apple, creds: creds) == nil)
        standing.refused()
        #expect(!standing.isSignedIn && standing.userId == nil)
        #expect(standing.uploadBlock(apple: apple, creds: creds) == .signedOut)
        var s = DaemonStatus()
        s.state = .running
        standing.contribute(to: &s, apple: apple, creds: creds, now: t0)
        #expect(s.account == DaemonStatus.Account(signedIn: false, userId: "U1") && s.state == .needsLogin)
        standing.adopt(first)
        #expect(standing.isSignedIn && standing.userId == "U1")
    }

    @Test func theAppleIDIsAskedBeforeTheBackendsGrant() {
        var (apple, creds) = machines
        let standing = signedIn(first)
        _ = creds.handle(.needed, now: t0)
        _ = creds.handle(.stsFailed(.forbidden(code: "quota_exceeded", message: "")), now: t0)
        #expect(standing.uploadBlock(apple: apple, creds: creds) == .paused(.quotaExceeded))
        _ = apple.handle(.checked(.revoked), now: t0, random: 0.5)
        #expect(standing.pauseReason(apple: apple, creds: creds) == .appleRevoked)
        var s = DaemonStatus()
        s.state = .running
        standing.contribute(to: &s, apple: apple, creds: creds, now: t0)
        #expect(s.state == .paused && s.pauseReason == .appleRevoked && s.account.signedIn)
        // Only a running daemon's state says why it waits.
        var starting = DaemonStatus()
        starting.state = .starting
        standing.contribute(to: &starting, apple: apple, creds: creds, now: t0)
        #expect(starting.state == .starting && starting.pauseReason == nil)
    }

    @Test func aSignInBeforeIsADeviceIdAtStartOrASignInSince() {
        #expect(AccountStanding(deviceIdAtStart: true).signedInBefore)
        var standing = AccountStanding(deviceIdAtStart: false)
        #expect(!standing.signedInBefore)
        standing.adopt(first)
        _ = standing.drop()
        #expect(standing.signedInBefore && standing.signIn == nil)
        let again = standing.drop()
        #expect(again == nil)
    }
}

/// The account's one timer.
@Suite struct AccountWakesTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func theTimerAimsAtTheEarlierWakeAndHandsEachBackOnce() {
        var wakes = AccountWakes()
        #expect(wakes.next == nil)
        wakes.set(.credentials, at: t0.addingTimeInterval(60))
        wakes.set(.apple, at: t0.addingTimeInterval(30))
        #expect(wakes.next == t0.addingTimeInterval(30))
        let early = wakes.take(.apple, at: t0.addingTimeInterval(29))
        let due = wakes.take(.apple, at: t0.addingTimeInterval(30))
        let twice = wakes.take(.apple, at: t0.addingTimeInterval(30))
        #expect(!early && due && !twice)
        #expect(wakes.next == t0.addingTimeInterval(60))
        // A machine's new wake replaces its old one.
        wakes.set(.credentials, at: t0.addingTimeInterval(90))
        let replaced = wakes.take(.credentials, at: t0.addingTimeInterval(60))
        #expect(!replaced)
        wakes.set(.credentials, at: nil)
        #expect(wakes.next == nil)
    }
}
