import Bucket
import Keys
import Testing
import Vault

/// What the recovery-key commands decide without the service's state.
@Suite struct RecoveryKeyFlowsTests {
    let uid = "u"

    func held(generation: UInt64 = 3) -> AccountKeyState {
        AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 1, generation: generation)
    }

    func replacing(_ before: AccountKeyState) -> AccountKeyState {
        let old = AccountKeyState.Replaced(accountKey: before.accountKey, recoveryKey: before.recoveryKey,
                                           recoveryCreatedAt: before.recoveryCreatedAt, generation: before.generation)
        return AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 5,
                               pending: .newAccountKey(old), generation: before.generation + 1)
    }

    @Test func anEnteredKeyGoesBackOverTheKeyObjectFoundAsASubstitution() {
        let over = RecoveryKeyFlows.repair(over: true)
        #expect(over.decision == .init(.ready(outdated: false), upload: .repair, replaced: true))
        #expect(over.finding == .unproven(ownRecord: .unknown))
        let none = RecoveryKeyFlows.repair(over: false)
        #expect(none.decision == .init(.ready(outdated: false), upload: .fresh, replaced: false))
        #expect(none.finding == .missing(otherKeyMaterial: true))
    }

    @Test func aChangeLostToAnotherNASIsToldFromOneWhoseOutcomeIsUnknown() {
        for kind: S3Error.Kind in [.preconditionFailed, .notFound] {
            #expect(RecoveryKeyFlows.put(failed: S3Error(kind: kind, code: "x", message: "x"), newAccountKey: false) == .lost)
        }
        let down = S3Error(kind: .transient, code: "SlowDown", message: "later")
        guard case .unknown(let rotation) = RecoveryKeyFlows.put(failed: down, newAccountKey: false),
              case .unknown(let newKey) = RecoveryKeyFlows.put(failed: down, newAccountKey: true) else {
            Issue.record("a transient failure leaves the outcome unknown")
            return
        }
        #expect(rotation.hasPrefix("the new recovery key may not have reached the bucket"))
        #expect(newKey.hasPrefix("the new account key may not have reached the bucket"))
    }

    @Test func aRotationOnceInTheBucketIsConfirmedAndShown() {
        let pending = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 9,
                                      pending: .rotating(previous: .generate(), previousCreatedAt: 1), generation: 2)
        let rotated = RecoveryKeyFlows.rotated(pending)
        #expect(rotated.pending == nil)
        #expect(rotated.recoveryShownAt == 9)
        #expect(rotated.recoveryKey == pending.recoveryKey && rotated.generation == 2)
    }

    @Test func onlyANewAccountKeyIsMarkedAsResealing() throws {
        let before = held()
        let state = replacing(before)
        let marked = try #require(RecoveryKeyFlows.resealing(state))
        guard case .newAccountKey(let old)? = marked.pending else {
            Issue.record("the previous account key is kept")
            return
        }
        #expect(old.resealing && old.accountKey == before.accountKey)
        #expect(marked.accountKey == state.accountKey)
        #expect(RecoveryKeyFlows.resealing(before) == nil)
    }

    @Test func theTransitionalKeyObjectCarriesThePreviousKeyOnlyWhileANewOneIsUnderWay() throws {
        let before = held()
        let state = replacing(before)
        let transitional = try #require(RecoveryKeyFlows.keyObject(state, uid: uid, transitional: true))
        #expect(KeyLifecycle.finding(transitional, holding: state, userId: uid) == .opensWithCurrent(transition: true))
        let own = try #require(RecoveryKeyFlows.keyObject(before, uid: uid, transitional: false))
        #expect(KeyLifecycle.finding(own, holding: before, userId: uid) == .opensWithCurrent(transition: false))
        #expect(RecoveryKeyFlows.keyObject(before, uid: uid, transitional: true) == nil)
    }
}
