#if canImport(Glibc)
import Glibc
#endif
import Bucket
import BucketTesting
import Foundation
import Logging
import PhotolalaCore
import Synchronization
import Testing
@testable import Account

/// The account service run in-process against a backend in memory (backend-api.md's
/// answers) and a test clock: sign-in, STS credentials, their refresh, the access
/// token's refresh, the Apple check pausing uploads, pairing and logout, in seconds.
@Suite struct AccountServiceTests {
    /// backend-api.md's calls, answered from memory; what each test changes is `state`.
    final class FakeBackend: Sendable {
        struct State {
            var accessToken = "access-1"
            var refreshToken = "refresh-1"
            var rotations = 0
            var stsCalls = 0
            var refreshCalls = 0
            var appleCalls = 0
            var pairingPolls = 0
            /// Polls answered "pending" before the user confirms.
            var pendingPolls = 2
            var appleState: AppleCredentialState.State = .authorized
            var grantLifetime: TimeInterval = 3600
            /// The device id each call carried.
            var deviceIds: Set<String?> = []
            /// Refresh tokens revoked (backend-api.md section 6), in the order asked.
            var revoked: [String] = []
            /// nil: the backend answers; otherwise every call fails with this.
            var down: BackendError?
            /// What sts-token answers instead of credentials (a 403 reason).
            var stsRefusal: BackendError?
            /// The pairing's answer once the pending polls are over (nil: approved).
            var pairingEnd: BackendError?
        }

        let state = Mutex(State())
        let clock: TestClock

        init(clock: TestClock) { self.clock = clock }

        func read<T: Sendable>(_ body: (State) -> T) -> T { state.withLock { body($0) } }
        func change(_ body: (inout State) -> Void) { state.withLock { body(&$0) } }

        /// The access token in the NAS's hands stops working (it expired).
        func expireAccessToken() { change { $0.accessToken = "access-expired-\($0.rotations)" } }

        var client: Client { Client(fake: self) }

        struct Client: AccountBackend {
            var deviceId: String?
            let fake: FakeBackend

            init(fake: FakeBackend) { self.fake = fake }

            private func note() throws(BackendError) {
                let down = fake.state.withLock { s in
                    s.deviceIds.insert(deviceId)
                    return s.down
                }
                if let down { throw down }
            }

            func signInWithApple(identityToken: String, authorizationCode: String?, deviceName: String) async throws(BackendError) -> SignIn {
                try note()
                guard identityToken == "good-token" else {
                    throw .rejected(status: 401, code: "invalid_token", message: "bad signature")
                }
                return fake.read { SignIn(userId: "user-1", accessToken: $0.accessToken, accessTokenExpiresAt: nil, refreshToken: $0.refreshToken) }
            }

            func startPairing(deviceName: String) async throws(BackendError) -> DeviceAuthorization {
                try note()
                return DeviceAuthorization(deviceCode: "device-code", userCode: "ABCD-EFGH", verificationUri: "https://photolala.example/pair",
                                           verificationUriComplete: nil, expiresIn: 600, interval: 5)
            }

            func pollPairing(deviceCode: String) async throws(BackendError) -> SignIn {
                try note()
                let pending = fake.state.withLock { s -> Bool in
                    s.pairingPolls += 1
                    return s.pairingPolls <= s.pendingPolls
                }
                if pending { throw .authorizationPending }
                if let end = fake.read(\.pairingEnd) { throw end }
                return fake.read { SignIn(userId: "user-2", accessToken: $0.accessToken, accessTokenExpiresAt: nil, refreshToken: $0.refreshToken) }
            }

            func refresh(refreshToken: String) async throws(BackendError) -> RefreshedTokens {
                try note()
                let answer = fake.state.withLock { s -> RefreshedTokens? in
                    s.refreshCalls += 1
                    // Refresh tokens rotate: the old one is dead from here on; a revoked one too.
                    guard refreshToken == s.refreshToken, !s.revoked.contains(refreshToken) else { return nil }
                    s.rotations += 1
                    s.accessToken = "access-\(s.rotations + 1)"
                    s.refreshToken = "refresh-\(s.rotations + 1)"
                    return RefreshedTokens(accessToken: s.accessToken, accessTokenExpiresAt: nil, refreshToken: s.refreshToken)
                }
                guard let answer else { throw .invalidGrant }
                return answer
            }

            func stsToken(accessToken: String) async throws(BackendError) -> STSGrant {
                try note()
                let now = fake.clock.now()
                if let refusal = fake.read(\.stsRefusal) {
                    fake.change { $0.stsCalls += 1 }
                    throw refusal
                }
                let answer = fake.state.withLock { s -> STSGrant? in
                    s.stsCalls += 1
                    guard accessToken == s.accessToken else { return nil }
                    return STSGrant(accessKeyId: "AKIA\(s.stsCalls)", secretAccessKey: "secret-\(s.stsCalls)", sessionToken: "session-\(s.stsCalls)",
                                    expiration: now.addingTimeInterval(s.grantLifetime), region: "us-east-1", bucket: "photolala",
                                    endpoint: nil)
                }
                guard let answer else { throw .invalidToken }
                return answer
            }

            func appleCredentialState(accessToken: String) async throws(BackendError) -> AppleCredentialState {
                try note()
                let answer = fake.state.withLock { s -> AppleCredentialState? in
                    s.appleCalls += 1
                    return accessToken == s.accessToken ? AppleCredentialState(state: s.appleState, checkedAt: nil) : nil
                }
                guard let answer else { throw .invalidToken }
                return answer
            }

            func revoke(refreshToken: String) async throws(BackendError) {
                try note()
                fake.change { $0.revoked.append(refreshToken) }
            }
        }
    }

    final class Fixture: Sendable {
        let stateDir: String
        let clock = TestClock()
        let fake: FakeBackend
        let service: AccountService
        let audit = CollectedAudit()
        static let root = AuditActor.caller(uid: 0)

        init() throws {
            stateDir = FileManager.default.temporaryDirectory.appendingPathComponent("account-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
            fake = FakeBackend(clock: clock)
            service = AccountService(stateDir: stateDir, backend: fake.client, deviceName: "test-nas", refreshBeforeExpiry: .seconds(300),
                                     appleCheckInterval: .seconds(86_400), clock: clock, logger: Logger(label: "account-tests"),
                                     audit: audit)
        }

        deinit { try? FileManager.default.removeItem(atPath: stateDir) }

        /// Runs the service while `body` runs, then stops it as a shutdown would.
        func running(_ body: () async throws -> Void) async throws {
            let service = self.service
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await body()
                group.cancelAll()
            }
        }

        func signIn() async throws {
            let (userId, error) = await service.loginWithIdentityToken("good-token", authorizationCode: nil, by: Self.root)
            try #require(userId == "user-1", "\(error ?? "")")
        }

        var savedSignIn: SignIn? { AccountStore(stateDir: stateDir).load() }
    }

    /// Polls `condition` until it holds (a few seconds at most): the service's jobs run concurrently.
    static func eventually(_ what: Comment, _ condition: () async -> Bool) async throws {
        for _ in 0..<500 {
            if await condition() { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("never happened: \(what)")
    }

    @Test func signInFetchesStorageCredentialsOnceForManyCallers() async throws {
        let f = try Fixture()
        try await f.running {
            #expect(await f.service.uploadBlock == .signedOut)
            let (none, error) = await f.service.loginWithIdentityToken("forged-token", authorizationCode: nil, by: Fixture.root)
            #expect(none == nil && error?.contains("the identity token was refused (bad signature") == true)
            // A refused first sign-in made a device id, but backups never ran: no "not signed in any more".
            let madeId = await f.service.deviceId, before = await f.service.signedInBefore
            #expect(madeId != nil && !before)
            try await f.signIn()
            #expect(await f.service.userId == "user-1")
            #expect(await f.service.signedInBefore)
            // Saved 0600, and a device id made and sent with every call.
            #expect(f.savedSignIn?.refreshToken == "refresh-1")
            var st = stat()
            #expect(stat(f.stateDir + "/account.json", &st) == 0 && st.st_mode & 0o777 == 0o600)
            let deviceId = await f.service.deviceId
            #expect(deviceId != nil && f.fake.read(\.deviceIds) == [deviceId])

            let grants = try await withThrowingTaskGroup(of: STSGrant.self) { group in
                for _ in 0..<8 { group.addTask { try await f.service.credentials() } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(grants.map(\.accessKeyId)) == ["AKIA1"])
            #expect(f.fake.read(\.stsCalls) == 1)
            // The bucket session's view of the same grant.
            #expect(try await f.service.grant() == grants[0].bucketGrant)
        }
    }

    @Test func aGrantIsRefreshedBeforeItExpiresOnTheInjectedClock() async throws {
        let f = try Fixture()
        try await f.running {
            try await f.signIn()
            let first = try await f.service.credentials()
            // Lifetime 3600 s, refreshed 300 s (less up to 30 s of jitter) before it ends.
            f.clock.advance(by: 3200)
            try await Task.sleep(for: .milliseconds(50))
            #expect(f.fake.read(\.stsCalls) == 1)
            f.clock.advance(by: 100)
            try await Self.eventually("the timer fetched new credentials") { f.fake.read(\.stsCalls) == 2 }
            try await Self.eventually("the new grant is handed out") {
                (try? await f.service.credentials().accessKeyId) == "AKIA2"
            }
            #expect(first.accessKeyId == "AKIA1")
        }
    }

    @Test func anExpiredAccessTokenIsRefreshedOnceAndTheRotatedTokenSaved() async throws {
        let f = try Fixture()
        try await f.running {
            try await f.signIn()
            _ = try await f.service.credentials()
            f.fake.expireAccessToken()
            // S3 refuses the grant in hand: the service fetches another, meets the expired
            // access token, refreshes it once and fetches again.
            let drops = f.service.credentialDrops.generation
            await f.service.rejected(try await f.service.grant())
            let fresh = try await f.service.credentials()
            #expect(fresh.accessKeyId == "AKIA3")
            #expect(f.fake.read(\.refreshCalls) == 1 && f.fake.read(\.stsCalls) == 3)
            #expect(f.savedSignIn?.refreshToken == "refresh-2" && f.savedSignIn?.accessToken == "access-2")
            #expect(f.service.credentialDrops.generation == drops)
            #expect(await f.service.uploadBlock == nil)
        }
    }

    @Test func aDeadRefreshTokenAsksForALogin() async throws {
        let f = try Fixture()
        try await f.running {
            try await f.signIn()
            _ = try await f.service.credentials()
            // Signed in elsewhere with the same refresh token, which rotated there.
            f.fake.change { $0.refreshToken = "rotated-elsewhere" }
            f.fake.expireAccessToken()
            await f.service.rejected(try await f.service.grant())
            try await Self.eventually("the service gave up the sign-in") { await f.service.uploadBlock == .signedOut }
            await #expect(throws: GrantUnavailable.signedOut) { try await f.service.credentials() }
            #expect(f.savedSignIn == nil)
            var status = DaemonStatus()
            status.state = .running
            await f.service.contribute(to: &status)
            #expect(status.state == .needsLogin)
        }
    }

    @Test func aRevokedAppleIDPausesUploadsAndDropsTheCredentials() async throws {
        let f = try Fixture()
        f.fake.change { $0.appleState = .revoked }
        try await f.running {
            let drops = f.service.credentialDrops.generation
            try await f.signIn()
            try await Self.eventually("the Apple check paused uploads") { await f.service.uploadBlock == .paused(.appleRevoked) }
            await #expect(throws: GrantUnavailable.paused(.appleRevoked)) { try await f.service.credentials() }
            #expect(f.service.credentialDrops.generation > drops)
            #expect(f.fake.read(\.stsCalls) == 0)
            var status = DaemonStatus()
            status.state = .running
            await f.service.contribute(to: &status)
            #expect(status.state == .paused && status.pauseReason == .appleRevoked)

            // Authorized again at the next check (a day later): uploads resume.
            f.fake.change { $0.appleState = .authorized }
            f.clock.advance(by: 86_400 * 1.2)
            try await Self.eventually("the next check lifted the pause") { await f.service.uploadBlock == nil }
            #expect(try await f.service.credentials().accessKeyId == "AKIA1")
        }
    }

    @Test func pairingPollsUntilConfirmedAndSignsIn() async throws {
        let f = try Fixture()
        try await f.running {
            let started = await f.service.startPairing(by: .caller(uid: 34))
            #expect(started.outcome == "pending" && started.userCode == "ABCD-EFGH")
            var status = DaemonStatus()
            await f.service.contribute(to: &status)
            #expect(status.pairing?.userCode == "ABCD-EFGH")
            // Two "pending" answers, then confirmed: one poll per interval (5 s) of the clock.
            try await Self.eventually("paired") {
                f.clock.advance(by: 5)
                return await f.service.pairingView().outcome == "signedIn"
            }
            #expect(f.fake.read(\.pairingPolls) == 3)
            #expect(await f.service.userId == "user-2")
            #expect(f.savedSignIn?.userId == "user-2")
            // Both steps are the caller's who asked, the approval that came from the poll loop too.
            #expect(f.audit.of(.login) == [
                AuditEvent(.login, by: .caller(uid: 34), .ok, ["method": "pairing", "step": "started", "expiresIn": 600]),
                AuditEvent(.login, by: .caller(uid: 34), .ok, ["method": "pairing", "step": "approved", "userId": "user-2"]),
            ])
        }
    }

    @Test func logoutRevokesThenDropsEverythingAndErasesTheSavedSignIn() async throws {
        let f = try Fixture()
        try await f.running {
            try await f.signIn()
            _ = try await f.service.credentials()
            let deviceId = await f.service.deviceId
            let drops = f.service.credentialDrops.generation
            #expect(await f.service.logout(by: .caller(uid: 34)) == .revoked)
            // The backend heard it, with the refresh token in force: from now on it is refused.
            #expect(f.fake.read(\.revoked) == ["refresh-1"])
            await #expect(throws: BackendError.invalidGrant) { try await f.fake.client.refresh(refreshToken: "refresh-1") }
            #expect(f.service.credentialDrops.generation > drops)
            #expect(await f.service.uploadBlock == .signedOut)
            #expect(await f.service.userId == nil)
            await #expect(throws: GrantUnavailable.signedOut) { try await f.service.credentials() }
            #expect(!FileManager.default.fileExists(atPath: f.stateDir + "/account.json"))
            // The device id outlives a logout (the NAS's manifest is found under it again).
            #expect(await f.service.deviceId == deviceId)
            #expect(DeviceIdentity(stateDir: f.stateDir).load() == deviceId)
            #expect(f.audit.of(.logout) == [
                AuditEvent(.logout, by: .caller(uid: 34), .ok, ["wasSignedIn": true, "userId": "user-1", "backendHeard": true]),
            ])
            // Nothing left to forget the second time: nothing sent.
            #expect(await f.service.logout(by: Fixture.root) == .notSignedIn)
            #expect(f.fake.read(\.revoked).count == 1)
            #expect(f.audit.of(.logout).last == AuditEvent(.logout, by: Fixture.root, .ok, ["wasSignedIn": false]))
        }
    }

    @Test func logoutWithTheBackendDownStillErasesAndNeverAsksAgain() async throws {
        let f = try Fixture()
        try await f.running {
            try await f.signIn()
            _ = try await f.service.credentials()
            f.fake.change { $0.down = .transient("connection refused") }
            let outcome = await f.service.logout(by: Fixture.root)
            #expect(outcome == .notTold("it could not be reached: connection refused"))
            #expect(outcome.message.contains("this NAS forgot its sign-in; the backend could not be told"))
            #expect(!FileManager.default.fileExists(atPath: f.stateDir + "/account.json"))
            #expect(await f.service.uploadBlock == .signedOut)
            #expect(f.audit.of(.logout) == [
                AuditEvent(.logout, by: Fixture.root, .failed, ["wasSignedIn": true, "userId": "user-1", "backendHeard": false,
                                                                "why": "it could not be reached: connection refused"]),
            ])
            // The backend comes back: nothing is sent again (the token is gone from this NAS).
            f.fake.change { $0.down = nil }
            f.clock.advance(by: 86_400)
            try await Task.sleep(for: .milliseconds(100))
            #expect(f.fake.read(\.revoked).isEmpty)
        }
    }

    @Test func aSignInIsRecordedAsTheCallersWithWhyAndNoToken() async throws {
        let f = try Fixture()
        try await f.running {
            _ = await f.service.loginWithIdentityToken("forged-token", authorizationCode: "code-1", by: .caller(uid: 1000))
            try await f.signIn()
            f.fake.change { $0.down = .transient("timed out") }
            _ = await f.service.loginWithIdentityToken("good-token", authorizationCode: nil, by: Fixture.root)
        }
        #expect(f.audit.of(.login) == [
            AuditEvent(.login, by: .caller(uid: 1000), .refused,
                       ["method": "token", "step": "refused", "why": "HTTP 401 invalid_token: bad signature"]),
            AuditEvent(.login, by: Fixture.root, .ok, ["method": "token", "step": "accepted", "userId": "user-1"]),
            AuditEvent(.login, by: Fixture.root, .failed,
                       ["method": "token", "step": "refused", "why": "the backend could not be reached: timed out"]),
        ])
        let text = "\(f.audit.all)"
        for secret in ["forged-token", "good-token", "code-1", "access-1", "refresh-1"] { #expect(!text.contains(secret)) }
    }

    @Test(arguments: [(BackendError.accessDenied, "refused", AuditOutcome.refused), (.expiredToken, "expired", .failed)])
    func aPairingRefusedOrExpiredIsRecorded(_ end: BackendError, _ step: String, _ outcome: AuditOutcome) async throws {
        let f = try Fixture()
        f.fake.change { $0.pairingEnd = end }
        try await f.running {
            _ = await f.service.startPairing(by: Fixture.root)
            try await Self.eventually("the pairing ended") {
                f.clock.advance(by: 5)
                return await f.service.pairingView().outcome != "pending"
            }
        }
        #expect(f.audit.of(.login).map(\.details["step"]) == ["started", .string(step)])
        #expect(f.audit.of(.login).last == AuditEvent(.login, by: Fixture.root, outcome, ["method": "pairing", "step": .string(step)]))
        #expect(await f.service.userId == nil)
    }

    @Test func theAppleStateIsRecordedWhenItChanges() async throws {
        let f = try Fixture()
        try await f.running {
            // The first answer after a start, authorized: no news.
            try await f.signIn()
            try await Self.eventually("checked") { f.fake.read(\.appleCalls) == 1 }
            try await Task.sleep(for: .milliseconds(20))
            #expect(f.audit.of(.appleState).isEmpty)
            f.fake.change { $0.appleState = .revoked }
            f.clock.advance(by: 86_400 * 1.2)
            try await Self.eventually("the revocation paused uploads") { await f.service.uploadBlock == .paused(.appleRevoked) }
            // Still revoked at the next check: nothing new.
            f.clock.advance(by: 86_400 * 1.2)
            try await Self.eventually("checked again") { f.fake.read(\.appleCalls) == 3 }
            f.fake.change { $0.appleState = .authorized }
            f.clock.advance(by: 86_400 * 1.2)
            try await Self.eventually("the pause lifted") { await f.service.uploadBlock == nil }
        }
        #expect(f.audit.of(.appleState) == [
            AuditEvent(.appleState, by: .daemon, .refused, ["state": "revoked", "was": "authorized"]),
            AuditEvent(.appleState, by: .daemon, .ok, ["state": "authorized", "was": "revoked"]),
        ])
    }

    @Test func aRefusalOfCredentialsIsRecordedOncePerReason() async throws {
        let f = try Fixture()
        f.fake.change { $0.stsRefusal = .forbidden(code: "quota_exceeded", message: "storage full") }
        try await f.running {
            try await f.signIn()
            await #expect(throws: GrantUnavailable.paused(.quotaExceeded)) { try await f.service.credentials() }
            // The daemon asks again on its own schedule (and at `resume`): the same refusal is no news.
            await f.service.resume()
            try await Self.eventually("asked again") { f.fake.read(\.stsCalls) >= 2 }
            f.fake.change { $0.stsRefusal = .forbidden(code: "subscription_required", message: "") }
            await f.service.resume()
            try await Self.eventually("asked a third time") { f.fake.read(\.stsCalls) >= 3 }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(f.audit.of(.credentialsRefused) == [
            AuditEvent(.credentialsRefused, by: .daemon, .refused, ["reason": "quota_exceeded", "message": "storage full"]),
            AuditEvent(.credentialsRefused, by: .daemon, .refused, ["reason": "subscription_required"]),
        ])
    }

    @Test func aSavedSignInIsRestoredAndACancelledCallerIsAnswered() async throws {
        let f = try Fixture()
        try await f.running { try await f.signIn() }
        // The next start of the daemon, on the same state directory.
        let again = AccountService(stateDir: f.stateDir, backend: f.fake.client, deviceName: "test-nas",
                                   refreshBeforeExpiry: .seconds(300), appleCheckInterval: .seconds(86_400),
                                   clock: f.clock, logger: Logger(label: "account-tests"))
        await again.restore()
        #expect(await again.userId == "user-1")
        // Not running yet: the fetch waits for `run()`, and a caller that gives up is answered at once.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await #expect(throws: GrantUnavailable.cancelled) { try await again.credentials() }
            }
            try await Task.sleep(for: .milliseconds(50))
            group.cancelAll()
        }
    }
}
