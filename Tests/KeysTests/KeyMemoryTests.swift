import Keys
import Logging
import Testing
import Vault

/// What the key service remembers of the account's key, and the rules on it alone.
@Suite struct KeyMemoryTests {
    @Test func anotherSignInForgetsThePreviousAccountsKeyState() {
        var memory = KeyMemory()
        memory.follow("a")
        _ = memory.set(.ready)
        _ = memory.setError("down")
        memory.follow("b")
        #expect(memory.metadataKey(signedIn: "a") == .none)
        let errorChanged = memory.setError(nil)
        #expect(errorChanged == false)
    }

    @Test func thePhaseAndTheErrorAreNewsOnlyWhenTheyChange() {
        var memory = KeyMemory()
        let changes = [memory.set(.checking), memory.set(.checking), memory.setError("down"), memory.setError("down")]
        #expect(changes == [true, false, true, false])
    }

    @Test func aKeyNeededIsSaidOnceForTheSameReason() {
        var memory = KeyMemory()
        memory.follow("u")
        let first = memory.reach(.needed(nil))
        #expect(first.say?.level == .notice)
        #expect(first.phaseChanged && first.needed)
        let again = memory.reach(.needed(nil))
        #expect(again.say == nil)
        #expect(!again.phaseChanged && again.needed)
        let other = memory.reach(.needed("lost"))
        #expect(other.say?.line == "lost")
    }

    @Test func anOutdatedRecoveryKeyIsWarnedOfOnce() {
        var memory = KeyMemory()
        let first = memory.reach(.ready(outdated: true))
        #expect(first.say?.level == .warning)
        #expect(first.phaseChanged)
        let again = memory.reach(.ready(outdated: true))
        #expect(again.say == nil)
    }

    @Test func aRotationCutShortGoesBackToThePreviousRecoveryKey() {
        let previous = RecoveryKey.generate()
        let state = AccountKeyState(userId: "u", accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 2,
                                    pending: .rotating(previous: previous, previousCreatedAt: 1), generation: 3)
        let reverted = KeyMemory.reverted(state, uid: "u")
        #expect(reverted?.state.recoveryKey == previous)
        #expect(reverted?.state.recoveryCreatedAt == 1)
        #expect(reverted?.state.generation == 2)
        #expect(reverted?.state.pending == nil)
        #expect(reverted?.state.accountKey == state.accountKey)
        var settled = state
        settled.pending = nil
        #expect(KeyMemory.reverted(settled, uid: "u") == nil)
    }
}
