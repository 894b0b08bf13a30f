import Foundation
import PhotolalaCore
import Testing
import Account

/// Every 2xx answer of backend-api.md, decoded from the bodies the backend sends.
@Suite struct BackendAnswerTests {
    func answer<T: Decodable>(_ type: T.Type, _ json: String, path: String = "/test") throws(BackendError) -> T {
        try BackendClient.decode(T.self, from: Data(json.utf8), path: path)
    }

    func date(_ text: String) throws -> Date {
        try #require(Timestamp.parse(text))
    }

    // MARK: sections 1 and 2: a sign-in

    @Test func signInWithAppleAnswer() throws {
        let s = try answer(SignIn.self, """
            {"userId": "550E8400-E29B-41D4-A716-446655440000",
             "accessToken": "plt_abc", "accessTokenExpiresAt": "2026-11-22T08:00:00Z",
             "refreshToken": "plr_def"}
            """)
        #expect(s == SignIn(userId: "550E8400-E29B-41D4-A716-446655440000", accessToken: "plt_abc",
                            accessTokenExpiresAt: "2026-11-22T08:00:00Z", refreshToken: "plr_def"))
        // The tokens never reach a log line through the value's description.
        #expect(!"\(s)".contains("plt_abc") && !"\(s)".contains("plr_def"))
    }

    @Test func signInWithoutAnExpiryStillSignsIn() throws {
        let s = try answer(SignIn.self, #"{"userId": "U", "accessToken": "plt_a", "refreshToken": "plr_b"}"#)
        #expect(s.accessTokenExpiresAt == nil && s.refreshToken == "plr_b")
    }

    @Test func signInWithoutARefreshTokenIsUnreadable() {
        // Without a refresh token the NAS would be signed out at the first expiry: refuse it.
        #expect(throws: BackendError.self) {
            try answer(SignIn.self, #"{"userId": "U", "accessToken": "plt_a"}"#, path: "/api/auth/apple")
        }
    }

    @Test func unreadableAnswersAreTransientAndNameTheCall() {
        #expect(throws: BackendError.transient("unexpected answer from /api/auth/apple (HTTP 200)")) {
            try answer(SignIn.self, "<html>gateway</html>", path: "/api/auth/apple")
        }
        #expect(throws: BackendError.transient("unexpected answer from /api/auth/refresh (HTTP 200)")) {
            try answer(RefreshedTokens.self, "", path: "/api/auth/refresh")
        }
    }

    @Test func unknownFieldsAreIgnored() throws {
        let s = try answer(SignIn.self, """
            {"userId": "U", "accessToken": "plt_a", "refreshToken": "plr_b", "accessTokenExpiresAt": null,
             "scope": ["photos"], "newFeature": {"nested": true}, "tier": 3}
            """)
        #expect(s.userId == "U")
        let d = try answer(DeviceAuthorization.self, """
            {"deviceCode": "dc", "userCode": "WDJB-MJHT", "verificationUri": "https://photolala.app/pair",
             "expiresIn": 600, "interval": 5, "qr": "data:image/png;base64,AAAA"}
            """)
        #expect(d.userCode == "WDJB-MJHT")
    }

    // MARK: section 2: pairing

    @Test func pairingStartAnswer() throws {
        let d = try answer(DeviceAuthorization.self, """
            {"deviceCode": "GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS", "userCode": "WDJB-MJHT",
             "verificationUri": "https://photolala.app/pair",
             "verificationUriComplete": "https://photolala.app/pair?code=WDJB-MJHT",
             "expiresIn": 600, "interval": 5}
            """)
        #expect(d.deviceCode == "GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS")
        #expect(d.verificationUriComplete == "https://photolala.app/pair?code=WDJB-MJHT")
        #expect(d.expiresIn == 600 && d.interval == 5)
    }

    @Test func pairingStartWithoutTheOptionalFields() throws {
        let d = try answer(DeviceAuthorization.self, """
            {"deviceCode": "dc", "userCode": "ABCD-EFGH", "verificationUri": "https://photolala.app/pair", "expiresIn": 300}
            """)
        #expect(d.verificationUriComplete == nil && d.interval == nil)
    }

    @Test func pairingPollThatSucceededIsASignIn() throws {
        let s = try answer(SignIn.self, """
            {"userId": "550E8400-E29B-41D4-A716-446655440000", "accessToken": "plt_x",
             "accessTokenExpiresAt": "2026-11-22T08:00:00.250Z", "refreshToken": "plr_y"}
            """, path: "/api/v1/auth/device/token")
        #expect(s.userId == "550E8400-E29B-41D4-A716-446655440000")
    }

    // MARK: section 3: refresh

    @Test func refreshThatRotatesTheRefreshToken() throws {
        let r = try answer(RefreshedTokens.self, """
            {"accessToken": "plt_new", "accessTokenExpiresAt": "2026-11-22T09:00:00Z", "refreshToken": "plr_rotated"}
            """)
        #expect(r.accessToken == "plt_new" && r.refreshToken == "plr_rotated")
        #expect(!"\(r)".contains("plt_new"))
    }

    @Test func refreshThatKeepsTheRefreshToken() throws {
        let r = try answer(RefreshedTokens.self, #"{"accessToken": "plt_new", "accessTokenExpiresAt": "2026-11-22T09:00:00Z"}"#)
        #expect(r.refreshToken == nil, "no rotation: the stored refresh token stays")
    }

    // MARK: section 4: STS credentials

    @Test func stsTokenWithAnEndpointIsPathStyleThere() throws {
        let g = try answer(BackendClient.STSAnswer.self, """
            {"credentials": {"accessKeyId": "ASIAEXAMPLE", "secretAccessKey": "secret/key+1",
                             "sessionToken": "FwoGZXIvYXdz", "expiration": "2026-11-22T08:00:00Z"},
             "region": "us-east-1", "bucket": "photolala", "endpoint": "http://127.0.0.1:5055"}
            """).grant()
        #expect(g.accessKeyId == "ASIAEXAMPLE" && g.secretAccessKey == "secret/key+1" && g.sessionToken == "FwoGZXIvYXdz")
        #expect(g.expiration == (try date("2026-11-22T08:00:00Z")))
        #expect(g.region == "us-east-1" && g.bucket == "photolala")
        #expect(g.endpoint == "http://127.0.0.1:5055")
        #expect(!"\(g)".contains("secret/key+1") && !"\(g)".contains("FwoGZXIvYXdz"))
    }

    @Test func stsTokenWithoutAnEndpointIsAWS() throws {
        let g = try answer(BackendClient.STSAnswer.self, """
            {"credentials": {"accessKeyId": "ASIA", "secretAccessKey": "s", "sessionToken": "t",
                             "expiration": "2026-11-22T08:00:00Z"},
             "region": "eu-central-1", "bucket": "photolala-eu"}
            """).grant()
        #expect(g.endpoint == nil && g.region == "eu-central-1")
    }

    @Test func anEmptyEndpointMeansAWSToo() throws {
        let g = try answer(BackendClient.STSAnswer.self, """
            {"credentials": {"accessKeyId": "ASIA", "secretAccessKey": "s", "sessionToken": "t",
                             "expiration": "2026-11-22T08:00:00Z"},
             "region": "us-east-1", "bucket": "photolala", "endpoint": ""}
            """).grant()
        #expect(g.endpoint == nil)
    }

    @Test func fractionalSecondExpirationsAreRead() throws {
        let g = try answer(BackendClient.STSAnswer.self, """
            {"credentials": {"accessKeyId": "ASIA", "secretAccessKey": "s", "sessionToken": "t",
                             "expiration": "2026-11-22T08:00:00.123Z"},
             "region": "us-east-1", "bucket": "photolala", "extra": 1}
            """).grant()
        let whole = try date("2026-11-22T08:00:00Z")
        #expect(abs(g.expiration.timeIntervalSince(whole) - 0.123) < 0.001)
    }

    @Test func anUnreadableExpirationIsTransient() {
        #expect(throws: BackendError.transient("sts-token answered an unreadable expiration")) {
            try answer(BackendClient.STSAnswer.self, """
                {"credentials": {"accessKeyId": "ASIA", "secretAccessKey": "s", "sessionToken": "t",
                                 "expiration": "tomorrow"},
                 "region": "us-east-1", "bucket": "photolala"}
                """).grant()
        }
    }

    // MARK: section 5: Apple credential state

    @Test(arguments: [("authorized", AppleCredentialState.State.authorized), ("revoked", .revoked),
                      ("notFound", .notFound), ("transferred", .transferred)])
    func everyAppleCredentialState(wire: String, state: AppleCredentialState.State) throws {
        let a = try answer(BackendClient.StateAnswer.self, """
            {"state": "\(wire)", "checkedAt": "2026-11-22T07:00:00Z", "source": "notification"}
            """).credentialState()
        #expect(a == AppleCredentialState(state: state, checkedAt: try date("2026-11-22T07:00:00Z")))
    }

    @Test func appleStateWithFractionalOrMissingCheckedAt() throws {
        let a = try answer(BackendClient.StateAnswer.self, #"{"state": "authorized", "checkedAt": "2026-11-22T07:00:00.5Z"}"#)
            .credentialState()
        #expect(a.checkedAt == (try date("2026-11-22T07:00:00Z")).addingTimeInterval(0.5))
        let b = try answer(BackendClient.StateAnswer.self, #"{"state": "revoked"}"#).credentialState()
        #expect(b.state == .revoked && b.checkedAt == nil)
    }

    @Test func anUnknownAppleStateChangesNothing() {
        // Transient: the check is retried with backoff, and never read as a revocation.
        #expect(throws: BackendError.transient("credential-state answered an unknown state 'suspended'")) {
            try answer(BackendClient.StateAnswer.self, #"{"state": "suspended"}"#).credentialState()
        }
    }
}
