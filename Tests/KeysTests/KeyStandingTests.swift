import PhotolalaCore
import Testing
import Vault
@testable import Keys

/// What the key service's phase and key file answer the manifest, `recovery-key`, `login`
/// and the status.
@Suite struct KeyStandingTests {
    let confirmed = AccountKeyState(userId: "u", accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 1)

    func standing(_ phase: KeyStanding.Phase, _ local: AccountKeyState? = nil, outdated: Bool = false,
                  lastError: String? = nil) -> KeyStanding {
        KeyStanding(phase: phase, local: local, outdated: outdated, lastError: lastError)
    }

    func refusal(_ s: KeyStanding, signedIn: Bool = true) -> RecoveryKeyRefusal? {
        do throws(RecoveryKeyRefusal) {
            _ = try s.held(signedIn: signedIn)
            return nil
        } catch {
            return error
        }
    }

    @Test func theManifestGetsTheKeyOnlyOnceTheBucketConfirmedIt() {
        #expect(standing(.ready, confirmed).metadataKey == .ready(confirmed.accountKey))
        // Checking with a confirmed key file is not yet ready: the manifest waits.
        #expect(standing(.checking, confirmed).metadataKey == .none)
        #expect(standing(.ready).metadataKey == .none)
        #expect(standing(.needed).metadataKey == .needed)
        #expect(standing(.unreadable("why")).metadataKey == .unreadable("why"))
    }

    @Test func onlyASettledKeyIsShownOrRotated() throws {
        #expect(try standing(.ready, confirmed).held(signedIn: true) == confirmed)
        #expect(refusal(standing(.ready, confirmed), signedIn: false) == .notSignedIn)
        #expect(refusal(standing(.none)) == .notSignedIn)
        #expect(refusal(standing(.unreadable("the key file is unreadable"))) == .notHeld("the key file is unreadable"))
        #expect(refusal(standing(.needed))?.code == "not_held")
        #expect(refusal(standing(.checking, confirmed))?.code == "not_yet")
        var creating = confirmed
        creating.pending = .creating
        #expect(refusal(standing(.ready, creating))?.description.contains("being made") == true)
        var rotating = confirmed
        rotating.pending = .rotating(previous: .generate(), previousCreatedAt: 0)
        #expect(refusal(standing(.ready, rotating))?.description.contains("new recovery key") == true)
    }

    @Test func loginHearsOfAKeyMadeHereOnlyWhenItIsReady() {
        #expect(standing(.none).signInOutcome(madeHere: true) == nil)
        #expect(standing(.checking).signInOutcome(madeHere: true) == nil)
        // A failing bucket answers at once rather than when `login` gives up.
        #expect(standing(.checking, lastError: "down").signInOutcome(madeHere: true) == .init(created: false, state: .checking))
        #expect(standing(.ready, confirmed).signInOutcome(madeHere: true) == .init(created: true, state: .ready))
        #expect(standing(.ready, confirmed).signInOutcome(madeHere: false) == .init(created: false, state: .ready))
        #expect(standing(.needed).signInOutcome(madeHere: true) == .init(created: false, state: .needed))
    }

    @Test func theStatusSaysWhatEachStateAsksOfTheUser() {
        let ready = standing(.ready, confirmed).recovery
        #expect(ready.state == .ready && ready.fingerprint == confirmed.fingerprint && ready.message == nil && !ready.outdated)
        let outdated = standing(.ready, confirmed, outdated: true).recovery
        #expect(outdated.outdated && outdated.message == KeyLifecycle.outdatedSentence)
        #expect(standing(.needed).recovery.message == KeyLifecycle.neededSentence)
        #expect(standing(.unreadable("why")).recovery.message == "why")
        let checking = standing(.checking, confirmed, lastError: "down").recovery
        #expect(checking.state == .checking && checking.fingerprint == nil && checking.lastError == "down")
        #expect(standing(.none).recovery == DaemonStatus.Recovery(state: .none, lastError: nil))
    }
}
