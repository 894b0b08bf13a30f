import Testing
import Vault
import Keys

@Suite struct KeyLifecycleTests {
    typealias Finding = KeyLifecycle.Finding
    static let locals: [KeyLifecycle.Local] = [.nothing, .confirmed, .creating, .rotating, .newAccountKey(resealing: false),
                                               .newAccountKey(resealing: true)]
    static let findings: [Finding] = [.missing(otherKeyMaterial: false), .missing(otherKeyMaterial: true), .opensWithCurrent(transition: false),
                                      .opensWithCurrent(transition: true), .opensWithPrevious, .proven(generation: 0),
                                      .proven(generation: 9), .successor, .unproven(ownRecord: .unknown), .unproven(ownRecord: .absent),
                                      .unproven(ownRecord: .opens), .unproven(ownRecord: .doesNotOpen), .damaged("damaged"), .newer("newer")]

    @Test func aKeyIsMadeOnlyWhenTheBucketHoldsNoTraceOfOne() {
        for local in Self.locals {
            for finding in Self.findings {
                let made = KeyLifecycle.decide(local: local, finding: finding).state == .create
                #expect(made == (local == .nothing && finding == .missing(otherKeyMaterial: false)), "\(local) \(finding)")
            }
        }
    }

    @Test func aKeyTheUserMayHaveSeenIsNeverDropped() {
        // Confirmed keys and rotations were shown (or are shown by `recovery-key`): they stay,
        // and the file is never erased, whatever the bucket holds.
        for local in [KeyLifecycle.Local.confirmed, .rotating, .newAccountKey(resealing: false), .newAccountKey(resealing: true)] {
            for finding in Self.findings {
                let d = KeyLifecycle.decide(local: local, finding: finding, generation: 3)
                #expect(d.local != .erase, "\(local) \(finding)")
            }
        }
    }

    @Test func aHolderNeverTakesAKeyObjectItCannotProveForARotation() {
        // privacy.md "No side doors": a key object that proves nothing is written over, unless
        // this NAS's own record no longer opens either (a new account key made while away).
        for local in [KeyLifecycle.Local.confirmed, .rotating] {
            for own in [KeyLifecycle.OwnRecord.unknown, .absent, .opens] {
                let d = KeyLifecycle.decide(local: local, finding: .unproven(ownRecord: own), generation: 1)
                #expect(d.upload == .repair && d.replaced && d.state == .ready(outdated: false), "\(local) \(own)")
            }
            let away = KeyLifecycle.decide(local: local, finding: .unproven(ownRecord: .doesNotOpen), generation: 1)
            #expect(away.upload == .none && away.state == .needed(KeyLifecycle.keyChangedSentence), "\(local)")
            // A new account key endorsed by this one: asked for, never written over.
            let successor = KeyLifecycle.decide(local: local, finding: .successor)
            #expect(successor.upload == .none && successor.state == .needed(KeyLifecycle.successorSentence))
        }
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .damaged("x")) == .init(.ready(outdated: false), upload: .repair, replaced: true))
    }

    @Test func aRotationElsewhereIsAHigherGenerationAndAnOlderCopyIsPutRight() {
        // Proven under this account key: a higher generation is a rotation elsewhere.
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .proven(generation: 4), generation: 3) == .init(.ready(outdated: true)))
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .proven(generation: 4), generation: 3, seen: 4) == .init(.ready(outdated: true)))
        // The same or a lower one, under another recovery key: an old copy put back.
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .proven(generation: 3), generation: 3)
                == .init(.ready(outdated: false), upload: .repair, replaced: true))
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .proven(generation: 2), generation: 1, seen: 4)
                == .init(.ready(outdated: true), upload: .repair, replaced: true))
    }

    @Test func aKeyBeingMadeIsKeptOnlyIfTheBucketTakesOrHoldsIt() {
        #expect(KeyLifecycle.decide(local: .creating, finding: .missing(otherKeyMaterial: false))
                == .init(.ready(outdated: false), local: .confirm, upload: .fresh))
        #expect(KeyLifecycle.decide(local: .creating, finding: .opensWithCurrent(transition: false)) == .init(.ready(outdated: false), local: .confirm))
        #expect(KeyLifecycle.decide(local: .creating, finding: .unproven(ownRecord: .unknown)) == .init(.needed(nil), local: .erase))
        #expect(KeyLifecycle.decide(local: .creating, finding: .missing(otherKeyMaterial: true))
                == .init(.unreadable(KeyLifecycle.missingKeyObject), local: .erase))
        #expect(KeyLifecycle.decide(local: .creating, finding: .damaged("x")).local == .erase)
    }

    @Test func withNothingHeldAnExistingKeyIsAskedFor() {
        #expect(KeyLifecycle.decide(local: .nothing, finding: .unproven(ownRecord: .unknown)) == .init(.needed(nil)))
        #expect(KeyLifecycle.decide(local: .nothing, finding: .missing(otherKeyMaterial: true)) == .init(.unreadable(KeyLifecycle.missingKeyObject)))
        guard case .unreadable(let why) = KeyLifecycle.decide(local: .nothing, finding: .damaged("it is short")).state else {
            Issue.record("a damaged key object is unreadable")
            return
        }
        #expect(why.contains("it is short") && why.contains("no new key"))
    }

    @Test func aConfirmedKeyRepairsTheBucket() {
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .missing(otherKeyMaterial: true)) == .init(.ready(outdated: false), upload: .fresh))
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .opensWithCurrent(transition: false)) == .init(.ready(outdated: false)))
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .newer("x")) == .init(.ready(outdated: false)))
    }

    @Test func aRotationKeepsTheRecoveryKeyTheBucketOpensWith() {
        #expect(KeyLifecycle.decide(local: .rotating, finding: .opensWithCurrent(transition: false)) == .init(.ready(outdated: false), local: .confirm))
        #expect(KeyLifecycle.decide(local: .rotating, finding: .opensWithPrevious) == .init(.ready(outdated: false), local: .revert))
        #expect(KeyLifecycle.decide(local: .rotating, finding: .missing(otherKeyMaterial: false))
                == .init(.ready(outdated: false), local: .revert, upload: .fresh))
        #expect(KeyLifecycle.decide(local: .rotating, finding: .proven(generation: 9), generation: 2) == .init(.ready(outdated: true), local: .revert))
    }

    @Test func aNewAccountKeyOnlyGoesForwardOnceItsTransitionalObjectIsThere() {
        // Before: whatever the bucket holds of the previous key wins (nothing was sealed again).
        #expect(KeyLifecycle.decide(local: .newAccountKey(resealing: false), finding: .opensWithPrevious)
                == .init(.reseal, upload: .transition))
        #expect(KeyLifecycle.decide(local: .newAccountKey(resealing: false), finding: .opensWithCurrent(transition: true)) == .init(.reseal))
        #expect(KeyLifecycle.decide(local: .newAccountKey(resealing: true), finding: .opensWithCurrent(transition: false))
                == .init(.ready(outdated: false), local: .confirm))
        for finding in [Finding.proven(generation: 1), .successor, .unproven(ownRecord: .unknown), .missing(otherKeyMaterial: true), .damaged("x")] {
            #expect(KeyLifecycle.decide(local: .newAccountKey(resealing: false), finding: finding) == .init(.ready(outdated: false), local: .revert))
        }
        // After: never undone; a key object that is not ours is written again.
        for finding in Self.findings {
            let d = KeyLifecycle.decide(local: .newAccountKey(resealing: true), finding: finding)
            #expect(d.local != .revert, "\(finding)")
            if case .newer = finding { continue }
            if finding == .opensWithCurrent(transition: false) { continue }
            #expect(d.state == .reseal, "\(finding)")
        }
    }

    @Test func whatAKeyObjectSaysToTheKeysHeld() {
        let uid = "8F1E2D3C-0000-4000-8000-00000000000A"
        let (k, r, previous) = (AccountKey.generate(), RecoveryKey.generate(), RecoveryKey.generate())
        let held = AccountKeyState(userId: uid, accountKey: k, recoveryKey: r, recoveryCreatedAt: 1, generation: 1)
        let rotating = AccountKeyState(userId: uid, accountKey: k, recoveryKey: r, recoveryCreatedAt: 2,
                                       pending: .rotating(previous: previous, previousCreatedAt: 1))
        let mine = KeyObject.wrap(k, recoveryCreatedAt: 1, recovery: r, userId: uid, extras: .init(generation: 1))
        let old = KeyObject.wrap(k, recoveryCreatedAt: 1, recovery: previous, userId: uid, extras: .init(generation: 0))
        let rotatedElsewhere = KeyObject.wrap(k, recoveryCreatedAt: 3, recovery: .generate(), userId: uid, extras: .init(generation: 2))
        let anotherKey = KeyObject.wrap(.generate(), recoveryCreatedAt: 1, recovery: r, userId: uid, extras: .init(generation: 5))
        #expect(KeyLifecycle.finding(mine, holding: held, userId: uid) == .opensWithCurrent(transition: false))
        #expect(KeyLifecycle.finding(KeyObject.wrapV1(k, recoveryCreatedAt: 1, recovery: r, userId: uid), holding: held, userId: uid)
                == .opensWithCurrent(transition: false))
        #expect(KeyLifecycle.finding(old, holding: held, userId: uid) == .proven(generation: 0))
        #expect(KeyLifecycle.finding(rotatedElsewhere, holding: held, userId: uid) == .proven(generation: 2))
        #expect(KeyLifecycle.finding(old, holding: rotating, userId: uid) == .opensWithPrevious)
        // The attack of issue 31: an attacker's key under the attacker's recovery key (or under
        // this NAS's own: it still holds another account key) proves nothing.
        #expect(KeyLifecycle.finding(anotherKey, holding: held, userId: uid) == .unproven(ownRecord: .unknown))
        #expect(KeyLifecycle.finding(KeyObject.wrapV1(.generate(), recoveryCreatedAt: 1, recovery: .generate(), userId: uid), holding: held,
                                     userId: uid) == .unproven(ownRecord: .unknown))
        // A new account key endorsed by this one.
        let successor = KeyObject.wrap(.generate(), recoveryCreatedAt: 1, recovery: .generate(), userId: uid,
                                       extras: .init(generation: 2, previous: k, endorsedBy: k))
        #expect(KeyLifecycle.finding(successor, holding: held, userId: uid) == .successor)
        // Nothing held: a key object is someone's key; anything else is judged by its header.
        #expect(KeyLifecycle.finding(mine, holding: nil, userId: uid) == .unproven(ownRecord: .unknown))
        // Copied from another account's key: it does not open under this one's object key.
        #expect(KeyLifecycle.finding(KeyObject.wrap(k, recoveryCreatedAt: 1, recovery: r, userId: "other", extras: .init(generation: 1)),
                                     holding: held, userId: uid) == .unproven(ownRecord: .unknown))
        guard case .damaged = KeyLifecycle.finding(Array("not a key".utf8), holding: held, userId: uid) else {
            Issue.record("a short object is damaged")
            return
        }
        var newer = mine
        newer[7] = 3
        guard case .newer(let why) = KeyLifecycle.finding(newer, holding: nil, userId: uid) else {
            Issue.record("a later version is newer")
            return
        }
        #expect(why.contains("3"))
    }

    @Test func anEnteredRecoveryKeyIsKeptOnlyIfItOpensTheBucketsKeyObject() throws {
        let uid = "8F1E2D3C-0000-4000-8000-00000000000A"
        let (k, r) = (AccountKey.generate(), RecoveryKey.generate())
        let object = KeyObject.wrap(k, recoveryCreatedAt: 7, recovery: r, userId: uid, extras: .init(generation: 3))
        #expect(try KeyLifecycle.entered(r, opening: object, userId: uid)
                == AccountKeyState(userId: uid, accountKey: k, recoveryKey: r, recoveryCreatedAt: 7, generation: 3))
        #expect(throws: RecoveryKeyRefusal.wrongKey) { try KeyLifecycle.entered(.generate(), opening: object, userId: uid) }
        // Another account's object does not open under this one's.
        #expect(throws: RecoveryKeyRefusal.wrongKey) { try KeyLifecycle.entered(r, opening: object, userId: "other") }
        do throws(RecoveryKeyRefusal) {
            _ = try KeyLifecycle.entered(r, opening: Array("not a key".utf8), userId: uid)
            Issue.record("a damaged key object opens nothing")
        } catch {
            guard case .notHeld(let why) = error else { Issue.record("\(error)"); return }
            #expect(why.hasSuffix("Nothing was changed."))
        }
    }

    @Test func theUsersKeyOpensTheAccountThroughAnyRecordAfterASubstitution() throws {
        let uid = "8F1E2D3C-0000-4000-8000-00000000000A"
        let (k, r) = (AccountKey.generate(), RecoveryKey.generate())
        let recordKey = "metadata/\(uid)/devices/d1/device.json"
        let record = KeyLifecycle.Record(objectKey: recordKey, bytes: SealedRecord.seal(Array("{}".utf8), key: k,
                                                                                       wrap: .init(recovery: r, createdAt: 7), userId: uid,
                                                                                       objectKey: recordKey))
        let (evilKey, evilRecovery) = (AccountKey.generate(), RecoveryKey.generate())
        let substituted = KeyObject.wrap(evilKey, recoveryCreatedAt: 1, recovery: evilRecovery, userId: uid, extras: .init(generation: 9))
        // The user's key: through the record, and the key object is to be written over.
        let entered = try KeyLifecycle.entered(r, keyObject: substituted, records: [record], holding: nil, userId: uid)
        #expect(entered.state.accountKey == k && entered.repairKeyObject && !entered.outdated)
        // The attacker's key opens the key object, but no record of the account: refused.
        #expect(throws: RecoveryKeyRefusal.keyObjectReplaced) {
            try KeyLifecycle.entered(evilRecovery, keyObject: substituted, records: [record], holding: nil, userId: uid)
        }
        // On a NAS that holds the key, a key that opens another account key is refused.
        let held = AccountKeyState(userId: uid, accountKey: k, recoveryKey: r, recoveryCreatedAt: 7)
        #expect(throws: RecoveryKeyRefusal.otherAccountKey(k.fingerprint)) {
            try KeyLifecycle.entered(evilRecovery, keyObject: substituted, records: [], holding: held, userId: uid)
        }
        #expect(RecoveryKeyRefusal.otherAccountKey(k.fingerprint).description.contains(
            "this NAS already holds the account's key (fingerprint \(k.fingerprint)); the key entered opens another one; nothing was changed"))
        // Unless the key object is that key's endorsed successor (a new account key made elsewhere).
        let (k2, r2) = (AccountKey.generate(), RecoveryKey.generate())
        let successor = KeyObject.wrap(k2, recoveryCreatedAt: 8, recovery: r2, userId: uid, extras: .init(generation: 2, endorsedBy: k))
        #expect(try KeyLifecycle.entered(r2, keyObject: successor, records: [], holding: held, userId: uid).state.accountKey == k2)
        // And the replaced key, found through a record, is refused as superseded.
        #expect(throws: RecoveryKeyRefusal.superseded) {
            try KeyLifecycle.entered(r, keyObject: successor, records: [record], holding: nil, userId: uid)
        }
    }
}
