import Testing
import Vault
@testable import Keys

@Suite struct KeyLifecycleTests {
    typealias Finding = KeyLifecycle.Finding
    static let locals: [KeyLifecycle.Local] = [.nothing, .confirmed, .creating, .rotating]
    static let findings: [Finding] = [.missing(otherKeyMaterial: false), .missing(otherKeyMaterial: true), .opensWithCurrent,
                                      .opensWithPrevious, .foreign, .damaged("damaged"), .newer("newer")]

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
        // and the account key serves whatever the bucket holds.
        for local in [KeyLifecycle.Local.confirmed, .rotating] {
            for finding in Self.findings {
                let d = KeyLifecycle.decide(local: local, finding: finding)
                #expect(d.local != .erase, "\(local) \(finding)")
                guard case .ready = d.state else { Issue.record("\(local) \(finding): \(d.state)"); continue }
            }
        }
    }

    @Test func aKeyBeingMadeIsKeptOnlyIfTheBucketTakesOrHoldsIt() {
        #expect(KeyLifecycle.decide(local: .creating, finding: .missing(otherKeyMaterial: false))
                == .init(.ready(outdated: false), local: .confirm, upload: .fresh))
        #expect(KeyLifecycle.decide(local: .creating, finding: .opensWithCurrent) == .init(.ready(outdated: false), local: .confirm))
        #expect(KeyLifecycle.decide(local: .creating, finding: .foreign) == .init(.needed, local: .erase))
        #expect(KeyLifecycle.decide(local: .creating, finding: .missing(otherKeyMaterial: true))
                == .init(.unreadable(KeyLifecycle.missingKeyObject), local: .erase))
        #expect(KeyLifecycle.decide(local: .creating, finding: .damaged("x")).local == .erase)
    }

    @Test func withNothingHeldAnExistingKeyIsAskedFor() {
        #expect(KeyLifecycle.decide(local: .nothing, finding: .foreign) == .init(.needed))
        #expect(KeyLifecycle.decide(local: .nothing, finding: .missing(otherKeyMaterial: true)) == .init(.unreadable(KeyLifecycle.missingKeyObject)))
        guard case .unreadable(let why) = KeyLifecycle.decide(local: .nothing, finding: .damaged("it is short")).state else {
            Issue.record("a damaged key object is unreadable")
            return
        }
        #expect(why.contains("it is short") && why.contains("no new key"))
    }

    @Test func aConfirmedKeyRepairsTheBucketAndNoticesARotationElsewhere() {
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .missing(otherKeyMaterial: true)) == .init(.ready(outdated: false), upload: .fresh))
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .damaged("x")) == .init(.ready(outdated: false), upload: .repair))
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .foreign) == .init(.ready(outdated: true)))
        #expect(KeyLifecycle.decide(local: .confirmed, finding: .opensWithCurrent) == .init(.ready(outdated: false)))
    }

    @Test func aRotationKeepsTheRecoveryKeyTheBucketOpensWith() {
        #expect(KeyLifecycle.decide(local: .rotating, finding: .opensWithCurrent) == .init(.ready(outdated: false), local: .confirm))
        #expect(KeyLifecycle.decide(local: .rotating, finding: .opensWithPrevious) == .init(.ready(outdated: false), local: .revert))
        #expect(KeyLifecycle.decide(local: .rotating, finding: .missing(otherKeyMaterial: false))
                == .init(.ready(outdated: false), local: .revert, upload: .fresh))
        #expect(KeyLifecycle.decide(local: .rotating, finding: .foreign) == .init(.ready(outdated: true), local: .revert))
    }

    @Test func whatAKeyObjectSaysToTheKeysHeld() {
        let uid = "8F1E2D3C-0000-4000-8000-00000000000A"
        let (k, r, previous) = (AccountKey.generate(), RecoveryKey.generate(), RecoveryKey.generate())
        let held = AccountKeyState(userId: uid, accountKey: k, recoveryKey: r, recoveryCreatedAt: 1)
        let rotating = AccountKeyState(userId: uid, accountKey: k, recoveryKey: r, recoveryCreatedAt: 2,
                                       pending: .rotating(previous: previous, previousCreatedAt: 1))
        let mine = KeyObject.wrap(k, recoveryCreatedAt: 1, recovery: r, userId: uid)
        let old = KeyObject.wrap(k, recoveryCreatedAt: 1, recovery: previous, userId: uid)
        let anotherKey = KeyObject.wrap(.generate(), recoveryCreatedAt: 1, recovery: r, userId: uid)
        #expect(KeyLifecycle.finding(mine, holding: held, userId: uid) == .opensWithCurrent)
        #expect(KeyLifecycle.finding(old, holding: held, userId: uid) == .foreign)
        #expect(KeyLifecycle.finding(old, holding: rotating, userId: uid) == .opensWithPrevious)
        #expect(KeyLifecycle.finding(anotherKey, holding: held, userId: uid) == .foreign)
        // Nothing held: a key object is someone's key; anything else is judged by its header.
        #expect(KeyLifecycle.finding(mine, holding: nil, userId: uid) == .foreign)
        // Copied from another account's key: it does not open under this one's object key.
        #expect(KeyLifecycle.finding(KeyObject.wrap(k, recoveryCreatedAt: 1, recovery: r, userId: "other"), holding: held, userId: uid)
                == .foreign)
        guard case .damaged = KeyLifecycle.finding(Array("not a key".utf8), holding: held, userId: uid) else {
            Issue.record("a short object is damaged")
            return
        }
        var newer = mine
        newer[7] = 2
        guard case .newer(let why) = KeyLifecycle.finding(newer, holding: nil, userId: uid) else {
            Issue.record("a later version is newer")
            return
        }
        #expect(why.contains("2"))
    }

    @Test func anEnteredRecoveryKeyIsKeptOnlyIfItOpensTheBucketsKeyObject() throws {
        let uid = "8F1E2D3C-0000-4000-8000-00000000000A"
        let (k, r) = (AccountKey.generate(), RecoveryKey.generate())
        let object = KeyObject.wrap(k, recoveryCreatedAt: 7, recovery: r, userId: uid)
        #expect(try KeyLifecycle.entered(r, opening: object, userId: uid)
                == AccountKeyState(userId: uid, accountKey: k, recoveryKey: r, recoveryCreatedAt: 7))
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
}
