import Bucket
import BucketTesting
import Foundation
import PhotolalaCore
import Testing
import Vault
@testable import Keys

@Suite struct KeyServiceTests {
    let world: KeyWorld
    init() throws { world = try KeyWorld() }

    var uid: String { KeyWorld.user }

    /// The key object opens with `recovery` and holds `key`.
    func opens(with recovery: RecoveryKey, key: AccountKey) -> Bool {
        guard let bytes = world.keyObject, let opened = try? KeyObject.unwrap(bytes, recovery: recovery, userId: uid) else { return false }
        return opened.key == key
    }

    // MARK: made, asked for

    @Test func theFirstSignInMakesTheKeyAndItsKeyObject() async throws {
        let a = try world.nas("a")
        #expect(await a.status().state == .none)
        let r = await a.settle()
        #expect(r.state == .ready && !r.outdated)
        let saved = try #require(try a.saved())
        #expect(saved.pending == nil && saved.userId == uid && r.fingerprint == saved.fingerprint)
        #expect(world.keyObjects == [world.keyObjectKey])
        #expect(opens(with: saved.recoveryKey, key: saved.accountKey))
        #expect(await a.keys.metadataKeyState() == .ready(saved.accountKey))
        let shown = try await a.keys.recoveryKey(by: .caller(uid: 0))
        #expect(shown.recoveryKey == saved.recoveryKey && shown.fingerprint == saved.fingerprint && !shown.outdated)
        #expect(Int64(shown.createdAt.timeIntervalSince1970 * 1000) == saved.recoveryCreatedAt)
        #expect(a.audit.all.map(\.kind) == [.recoveryKeyShown])
        // The sign-in made it: `login` tells the user to keep it.
        #expect(await a.keys.settled(for: uid, within: 600) == .init(created: true, state: .ready))
    }

    @Test func aSecondNASOfTheAccountAsksForTheKey() async throws {
        let a = try world.nas("a")
        await a.settle()
        let b = try world.nas("b")
        let r = await b.settle()
        #expect(r.state == .needed && r.fingerprint == nil && r.message?.contains("recovery-key --enter") == true)
        #expect(try b.saved() == nil)
        #expect(await b.keys.metadataKeyState() == .needed)
        #expect(world.keyObjects.count == 1)
        await #expect(throws: RecoveryKeyRefusal.self) { try await b.keys.recoveryKey(by: .caller(uid: 0)) }
        #expect(b.audit.all.map(\.kind) == [.recoveryKeyRefused])
        #expect(await b.keys.settled(for: uid, within: 600) == .init(created: false, state: .needed))
        // The status says what to do, in the "Action needed" source of truth.
        var s = DaemonStatus(state: .running)
        await b.keys.contribute(to: &s)
        let item = try #require(AttentionRules().items(for: s, facts: .init(), now: Date()).first)
        #expect(item.reason == .recoveryKeyNeeded && item.run == "sudo photolalactl recovery-key --enter")
        #expect(item.sentence.lowercased().contains("enter this account's recovery key: sudo photolalactl recovery-key --enter"))
    }

    @Test func twoNASesAtOnceMakeOneKeyAndTheOtherAsks() async throws {
        let a = try world.nas("a")
        let b = try world.nas("b")
        async let ra = a.settle()
        async let rb = b.settle()
        let states = await [ra.state, rb.state]
        #expect(states.sorted { $0.rawValue < $1.rawValue } == [.needed, .ready])
        #expect(world.keyObjects == [world.keyObjectKey])
        let winner = states[0] == .ready ? a : b
        let loser = states[0] == .ready ? b : a
        let saved = try #require(try winner.saved())
        #expect(opens(with: saved.recoveryKey, key: saved.accountKey))
        #expect(try loser.saved() == nil)
    }

    @Test func theLoserOfAConditionalWriteDropsItsKey() async throws {
        // B made its key and saved it as pending, then A's key object reached the bucket
        // first: B's If-None-Match write is refused, and B asks for the account's key.
        let a = try world.nas("a")
        let b = try world.nas("b")
        let mine = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 1, pending: .creating)
        try b.store.save(mine)
        await a.settle()
        #expect(await b.settle().state == .needed)
        #expect(try b.saved() == nil)
        let theirs = try #require(try a.saved())
        #expect(opens(with: theirs.recoveryKey, key: theirs.accountKey))
    }

    @Test func aConditionalWriteLostToAnotherNASDropsTheKeyMadeHere() async throws {
        // B found no key and made its own; A's key object lands between B's look and B's
        // write: B's If-None-Match write is refused (412), and B asks for A's key.
        let a = try world.nas("a")
        let b = try world.nas("b")
        let bucket = world.bucket
        let key = world.keyObjectKey
        bucket.beforeWriting(key) {
            bucket.beforeWriting(key, nil)
            await a.settle()
        }
        let rb = await b.settle()
        #expect(rb.state == .needed)
        #expect(bucket.writes(to: key) == [.ifNoneMatch, .ifNoneMatch])
        #expect(try b.saved() == nil)
        let theirs = try #require(try a.saved())
        #expect(await a.status().state == .ready && opens(with: theirs.recoveryKey, key: theirs.accountKey))
        #expect(await b.keys.settled(for: uid, within: 600) == .init(created: false, state: .needed))
        #expect(await a.keys.settled(for: uid, within: 600) == .init(created: true, state: .ready))
    }

    // MARK: entered

    @Test func enteringAKeyChecksItFirst() async throws {
        let a = try world.nas("a")
        await a.settle()
        let key = try #require(try a.saved()).recoveryKey
        let b = try world.nas("b")
        await b.settle()

        // A typo: refused before the bucket is asked.
        var typed = Array(key.formatted)
        typed[5] = typed[5] == "A" ? "B" : "A"
        let gets = world.bucket.requests("GetObject")
        await #expect(throws: RecoveryKeyRefusal.malformed(.typo)) { try await b.keys.enter(String(typed), by: .caller(uid: 0)) }
        #expect(world.bucket.requests("GetObject") == gets)
        // Another key, well formed: the key object does not open with it.
        await #expect(throws: RecoveryKeyRefusal.wrongKey) { try await b.keys.enter(RecoveryKey.generate().formatted, by: .caller(uid: 0)) }
        #expect(try b.saved() == nil)
        #expect(await b.status().state == .needed)

        // The right one, typed as a person might.
        let fingerprint = try await b.keys.enter(key.formatted.lowercased().replacingOccurrences(of: "-", with: " "), by: .caller(uid: 0))
        let held = try #require(try b.saved())
        let made = try #require(try a.saved())
        #expect(fingerprint == held.fingerprint && held.accountKey == made.accountKey && held.pending == nil)
        #expect(await b.status().state == .ready)
        #expect(await b.keys.metadataKeyState() == .ready(held.accountKey))
        #expect(b.audit.all.map(\.kind) == [.recoveryKeyRefused, .recoveryKeyRefused, .recoveryKeyEntered])
        #expect(b.audit.all.map { $0.details["reason"] } == [.string("typo"), .string("wrong_key"), nil])
    }

    // MARK: rotated

    @Test func rotatingWrapsTheSameKeyUnderANewRecoveryKey() async throws {
        let a = try world.nas("a")
        await a.settle()
        let before = try #require(try a.saved())
        let b = try world.nas("b")
        await b.settle()
        _ = try await b.keys.enter(before.recoveryKey.formatted, by: .caller(uid: 0))

        let shown = try await a.keys.rotate(by: .caller(uid: 0))
        let after = try #require(try a.saved())
        #expect(shown.recoveryKey != before.recoveryKey && shown.recoveryKey == after.recoveryKey)
        #expect(shown.fingerprint == before.fingerprint && after.accountKey == before.accountKey && after.pending == nil)
        #expect(opens(with: after.recoveryKey, key: before.accountKey))
        #expect(!opens(with: before.recoveryKey, key: before.accountKey))
        #expect(a.audit.all.last?.kind == .recoveryKeyRotated)

        // B sees it at its next look: its copy is outdated, the account key still serves.
        world.clock.advance(by: KeyService.recheck + 1)
        let rb = await b.settle()
        #expect(rb.state == .ready && rb.outdated && rb.fingerprint == before.fingerprint)
        #expect(try await b.keys.recoveryKey(by: .caller(uid: 0)).outdated)
        #expect(await b.keys.metadataKeyState() == .ready(before.accountKey))

        // A third NAS: the old key opens nothing, the new one does.
        let c = try world.nas("c")
        await c.settle()
        await #expect(throws: RecoveryKeyRefusal.wrongKey) { try await c.keys.enter(before.recoveryKey.formatted, by: .caller(uid: 0)) }
        #expect(try await c.keys.enter(shown.recoveryKey.formatted, by: .caller(uid: 0)) == before.fingerprint)
        // Entering the new key on B makes its copy current again.
        _ = try await b.keys.enter(shown.recoveryKey.formatted, by: .caller(uid: 0))
        #expect(await b.status().outdated == false)
    }

    @Test func rotatingOnAStoreThatRefusesTheQuotedETagAsksAgainWithTheBareOne() async throws {
        // Ceph Pacific: 412 to the quoted ETag although the key object is unchanged.
        let a = try world.nas("a")
        await a.settle()
        let before = try #require(try a.saved())
        let etag = try #require(world.bucket.object(world.keyObjectKey)?.etag)
        world.bucket.refuseQuotedIfMatch(true)
        let shown = try await a.keys.rotate(by: .caller(uid: 0))
        #expect(world.bucket.writes(to: world.keyObjectKey).suffix(2) == [.ifMatch(etag), .ifMatch(etag)])
        let after = try #require(try a.saved())
        #expect(shown.recoveryKey == after.recoveryKey && after.pending == nil)
        let held = try #require(world.bucket.object(world.keyObjectKey)?.bytes)
        #expect(try KeyObject.unwrap(held, recovery: shown.recoveryKey, userId: uid).key == before.accountKey)
        #expect(throws: (any Error).self) { try KeyObject.unwrap(held, recovery: before.recoveryKey, userId: uid) }
    }

    @Test func aRotationThatLostARaceOnSuchAStoreIsStillRefused() async throws {
        // Another writer replaced the key object between the read and the write: the 412
        // is a lost race, and no bare retry may write over what it wrote.
        let a = try world.nas("a")
        await a.settle()
        let before = try #require(try a.saved())
        let bucket = world.bucket
        let key = world.keyObjectKey
        let theirs = KeyObject.wrap(before.accountKey, recoveryCreatedAt: 7, recovery: RecoveryKey.generate(), userId: uid)
        bucket.refuseQuotedIfMatch(true)
        bucket.beforeWriting(key) {
            bucket.beforeWriting(key, nil)
            bucket.store(key, bytes: theirs)
        }
        await #expect(throws: (any Error).self) { try await a.keys.rotate(by: .caller(uid: 0)) }
        #expect(bucket.object(key)?.bytes == theirs)
        #expect(bucket.writes(to: key).last.map { if case .ifMatch = $0 { true } else { false } } == true)
    }

    // MARK: repaired, never remade

    @Test func aNASThatHoldsTheKeyWritesAMissingKeyObjectAgain() async throws {
        let a = try world.nas("a")
        await a.settle()
        let saved = try #require(try a.saved())
        world.bucket.remove(world.keyObjectKey)
        // At the next look …
        world.clock.advance(by: KeyService.recheck + 1)
        #expect(await a.settle().state == .ready)
        #expect(opens(with: saved.recoveryKey, key: saved.accountKey))
        // … and at a start.
        world.bucket.remove(world.keyObjectKey)
        let restarted = try world.nas("a")
        #expect(await restarted.settle().state == .ready)
        #expect(opens(with: saved.recoveryKey, key: saved.accountKey))
        #expect(try restarted.saved() == saved)
    }

    @Test func aDamagedKeyObjectIsWrittenAgainByANASThatHoldsTheKey() async throws {
        let a = try world.nas("a")
        await a.settle()
        let saved = try #require(try a.saved())
        world.bucket.store(world.keyObjectKey, bytes: Array("not a key".utf8))
        // A NAS without the key can only say so.
        let b = try world.nas("b")
        let rb = await b.settle()
        #expect(rb.state == .unreadable && rb.message?.contains("not a Photolala key object") == true)
        world.clock.advance(by: KeyService.recheck + 1)
        #expect(await a.settle().state == .ready)
        #expect(opens(with: saved.recoveryKey, key: saved.accountKey))
    }

    @Test func aStoreThatRefusesEveryConditionalWriteIsRetriedWithBackoffNotInALoop() async throws {
        let a = try world.nas("a")
        await a.settle()
        world.bucket.store(world.keyObjectKey, bytes: Array("not a key".utf8))
        world.bucket.refuseConditionalWrites(true)
        world.clock.advance(by: KeyService.recheck + 1)
        var steps = 0
        var next = StageLoop.Next.now
        while next == .now && steps < 10 {
            next = await a.keys.step()
            steps += 1
        }
        #expect(steps == KeyService.conflictsInARow)
        guard case .wait(let at?) = next else { Issue.record("expected a retry time, got \(next)"); return }
        #expect(at > world.clock.now())
        let r = await a.status()
        #expect(r.state == .ready && r.lastError?.contains("If-Match") == true)
        // A store that honours conditions again: the next try repairs it.
        world.bucket.refuseConditionalWrites(false)
        world.clock.advance(by: 400)
        #expect(await a.settle().lastError == nil)
        #expect(opens(with: try #require(try a.saved()).recoveryKey, key: try #require(try a.saved()).accountKey))
    }

    @Test(arguments: ["devices/d1/log/000000000001.pls", "devices/d1/device.json"])
    func sealedObjectsWithoutAKeyObjectAreUnreadableAndNoKeyIsMade(_ name: String) async throws {
        world.bucket.store("metadata/\(uid)/\(name)", bytes: SealedObject.magic + Array(repeating: 7, count: 40))
        // A plaintext device record (format 1) says nothing about a key.
        world.bucket.store("metadata/\(uid)/devices/d0/device.json", bytes: Array("{\"format\":1}".utf8))
        let b = try world.nas("b")
        let r = await b.settle()
        #expect(r.state == .unreadable && r.message?.contains("no NAS can open them") == true)
        #expect(world.keyObjects.isEmpty)
        #expect(try b.saved() == nil)
        #expect(world.bucket.requests("PutObject") == 0)
        var s = DaemonStatus(state: .running)
        await b.keys.contribute(to: &s)
        #expect(AttentionRules().items(for: s, facts: .init(), now: Date()).map(\.reason) == [.recoveryKeyUnreadable])
        // A NAS that was making its own key drops it.
        let c = try world.nas("c")
        try c.store.save(AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 1, pending: .creating))
        #expect(await c.settle().state == .unreadable)
        #expect(try c.saved() == nil && world.keyObjects.isEmpty)
    }

    @Test func plaintextManifestsAloneLetTheFirstNASMakeTheKey() async throws {
        world.bucket.store("metadata/\(uid)/devices/d0/device.json", bytes: Array("{\"format\":1}".utf8))
        world.bucket.store("metadata/\(uid)/devices/d0/log/000000000001.plm", bytes: Array("PLMANIF\u{1}".utf8))
        #expect(await (try world.nas("a")).settle().state == .ready)
        #expect(world.keyObjects.count == 1)
    }

    // MARK: kill -9 at any step

    @Test func aKeyMadeButNotSentIsSentAtTheNextStart() async throws {
        let a = try world.nas("a")
        let made = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 5, pending: .creating)
        try a.store.save(made)
        // Not shown while it may still lose.
        await #expect(throws: RecoveryKeyRefusal.self) { try await a.keys.recoveryKey(by: .caller(uid: 0)) }
        #expect(await a.settle().state == .ready)
        #expect(try a.saved() == AccountKeyState(userId: uid, accountKey: made.accountKey, recoveryKey: made.recoveryKey, recoveryCreatedAt: 5))
        #expect(opens(with: made.recoveryKey, key: made.accountKey))
    }

    @Test func aKeySentButNotConfirmedIsConfirmedAtTheNextStart() async throws {
        let a = try world.nas("a")
        let made = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 5, pending: .creating)
        try a.store.save(made)
        world.bucket.store(world.keyObjectKey, bytes: KeyObject.wrap(made.accountKey, recoveryCreatedAt: 5, recovery: made.recoveryKey, userId: uid))
        let etag = world.bucket.object(world.keyObjectKey)?.etag
        #expect(await a.settle().state == .ready)
        #expect(try a.saved()?.pending == nil)
        #expect(world.bucket.object(world.keyObjectKey)?.etag == etag && world.bucket.requests("PutObject") == 0)
    }

    @Test(arguments: [false, true])
    func aRotationCutShortKeepsTheKeyTheBucketOpensWith(sent: Bool) async throws {
        let a = try world.nas("a")
        await a.settle()
        let before = try #require(try a.saved())
        let next = RecoveryKey.generate()
        try a.store.save(AccountKeyState(userId: uid, accountKey: before.accountKey, recoveryKey: next, recoveryCreatedAt: 99,
                                         pending: .rotating(previous: before.recoveryKey, previousCreatedAt: before.recoveryCreatedAt)))
        if sent {
            world.bucket.store(world.keyObjectKey, bytes: KeyObject.wrap(before.accountKey, recoveryCreatedAt: 99, recovery: next, userId: uid))
        }
        let restarted = try world.nas("a")
        // The account key serves at once, whichever recovery key wins.
        #expect(await restarted.settle().state == .ready)
        let after = try #require(try restarted.saved())
        #expect(after.pending == nil && after.accountKey == before.accountKey)
        #expect(after.recoveryKey == (sent ? next : before.recoveryKey))
        #expect(after.recoveryCreatedAt == (sent ? 99 : before.recoveryCreatedAt))
        #expect(opens(with: after.recoveryKey, key: before.accountKey))
        #expect(try await restarted.keys.recoveryKey(by: .caller(uid: 0)).recoveryKey == after.recoveryKey)
    }

    @Test func aRotationCutShortWithTheKeyObjectGoneWritesItUnderThePreviousKey() async throws {
        let a = try world.nas("a")
        await a.settle()
        let before = try #require(try a.saved())
        try a.store.save(AccountKeyState(userId: uid, accountKey: before.accountKey, recoveryKey: .generate(), recoveryCreatedAt: 99,
                                         pending: .rotating(previous: before.recoveryKey, previousCreatedAt: before.recoveryCreatedAt)))
        world.bucket.remove(world.keyObjectKey)
        let restarted = try world.nas("a")
        #expect(await restarted.settle().state == .ready)
        #expect(try restarted.saved() == before)
        #expect(opens(with: before.recoveryKey, key: before.accountKey))
    }

    // MARK: signed out, local trouble, the bucket failing

    @Test func forgettingErasesTheKeyFile() async throws {
        let a = try world.nas("a")
        await a.settle()
        await a.grants.refuse(.signedOut)
        #expect(await a.keys.forget() == nil)
        #expect(try a.saved() == nil)
        #expect(await a.status().state == .none)
        #expect(await a.keys.metadataKeyState() == .none)
        // The key object stays: the account's other NASes and the recovery key still need it.
        #expect(world.keyObjects.count == 1)
        // Signed in again, this NAS is one that asks for the key.
        await a.grants.signIn(uid)
        #expect(await a.settle().state == .needed)
    }

    @Test func aDamagedKeyFileIsNeverReplacedByANewKey() async throws {
        let a = try world.nas("a")
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: a.store.path))
        let r = await a.settle()
        #expect(r.state == .unreadable && r.message?.contains("move it away") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: a.store.path)) == Data("{not json".utf8))
        #expect(world.keyObjects.isEmpty && world.bucket.requests("GetObject") == 0)
    }

    @Test func anotherAccountsKeyFileIsReplacedAtSignIn() async throws {
        let a = try world.nas("a", user: "0C0C0C0C-0000-4000-8000-000000000001")
        await a.settle()
        let other = try #require(try a.saved())
        let again = try world.nas("a")
        #expect(await again.settle().state == .ready)
        let mine = try #require(try again.saved())
        #expect(mine.userId == uid && mine.accountKey != other.accountKey)
    }

    @Test func theBucketFailingIsRetriedWithBackoff() async throws {
        let a = try world.nas("a")
        // The first try and the two the session makes in place.
        world.bucket.failNext(3, with: .internalError)
        let next = await a.keys.step()
        let r = await a.status()
        #expect(r.state == .checking && r.lastError?.contains("InternalError") == true)
        guard case .wait(let at?) = next else { Issue.record("expected a retry time, got \(next)"); return }
        #expect(at > world.clock.now())
        // A wake before the time is not a retry.
        let gets = world.bucket.requests("GetObject")
        _ = await a.keys.step()
        #expect(world.bucket.requests("GetObject") == gets)
        #expect(gets == 3)
        // A sign-in waiting for the key hears at once that the bucket fails (the test clock
        // never reaches its deadline).
        #expect(await a.keys.settled(for: uid, within: 600) == .init(created: false, state: .checking))
        world.clock.advance(by: 400)
        #expect(await a.settle().state == .ready)
        #expect(await a.status().lastError == nil)
    }

    @Test func noRecoveryKeyInAnyLogLineOrAuditRecord() async throws {
        let a = try world.nas("a")
        await a.settle()
        let first = try #require(try a.saved()).recoveryKey
        let rotated = try await a.keys.rotate(by: .caller(uid: 0)).recoveryKey
        let b = try world.nas("b")
        await b.settle()
        _ = try? await b.keys.enter(first.formatted, by: .caller(uid: 0))
        _ = try await b.keys.enter(rotated.formatted, by: .caller(uid: 0))
        _ = try await b.keys.recoveryKey(by: .caller(uid: 0))
        let texts = world.lines.all + (a.audit.all + b.audit.all).map { "\($0)" }
        #expect(!world.lines.all.isEmpty)
        for key in [first, rotated] {
            let secrets = [key.formatted, key.formatted.replacingOccurrences(of: "-", with: "")]
            #expect(!texts.contains { line in secrets.contains { line.contains($0) } })
        }
        // Nor in the bucket: only the key object (113 bytes), no key in it.
        #expect(world.bucket.keys == [world.keyObjectKey] && world.keyObject?.count == KeyObject.size)
    }
}
