import Bucket
import BucketTesting
import Foundation
import ManifestFormat
import PhotolalaCore
import Testing
import Vault
@testable import Keys

/// The key object's side doors (privacy.md "No side doors", issue 31 items 2 and 10): a
/// substituted key object is written over by a NAS that holds the key, and said; an older
/// copy put back likewise; `--enter` of a key that opens another account key is refused on
/// a NAS that holds one; the user's own key opens the account on a new NAS through any
/// device record; `--new-account-key` seals every object again, resumes after a kill, and
/// the account's other NASes then ask for the new recovery key.
@Suite struct KeySideDoorsTests {
    let world: KeyWorld
    init() throws { world = try KeyWorld() }

    var uid: String { KeyWorld.user }

    func opens(with recovery: RecoveryKey, key: AccountKey) -> Bool {
        guard let bytes = world.keyObject, let opened = try? KeyObject.unwrap(bytes, recovery: recovery, userId: uid) else { return false }
        return opened.key == key
    }

    /// An attacker's key object: their own account key under their own recovery key.
    func substitute() -> RecoveryKey {
        let recovery = RecoveryKey.generate()
        world.bucket.store(world.keyObjectKey, bytes: KeyObject.wrap(.generate(), recoveryCreatedAt: 1, recovery: recovery, userId: uid,
                                                                    extras: .init(generation: 50)))
        return recovery
    }

    /// A device record as a NAS of this release writes it: the account key wrapped under
    /// the recovery key, a head, sealed.
    func record(_ device: String, _ state: AccountKeyState, wrap: Bool = true, counter: Int64 = 1) {
        let layout = ManifestKeys(userId: uid, deviceId: device)
        let r = DeviceRecord(deviceId: device, name: device, folders: ["/srv/photos"], lastBackupAt: nil, files: 0, bytes: 0, logSeq: 0,
                             snapshotSeq: 0, updatedAt: "2026-11-22T07:00:00Z", software: "t", counter: counter,
                             head: ManifestHead(seq: 0, sha256: ManifestHeader.noPrevious))
        world.bucket.store(layout.record, bytes: r.sealed(key: state.accountKey,
                                                         wrap: wrap ? .init(recovery: state.recoveryKey, createdAt: state.recoveryCreatedAt) : nil,
                                                         userId: uid, objectKey: layout.record))
    }

    @Test func aSubstitutedKeyObjectIsWrittenOverAndSaidSo() async throws {
        let a = try world.nas("a")
        await a.settle()
        let saved = try #require(try a.saved())
        record("a", saved)
        let theirs = substitute()
        world.clock.advance(by: KeyService.recheck + 1)
        let r = await a.settle()
        // Still ready with its own key, never "outdated"; its own key object is back.
        #expect(r.state == .ready && !r.outdated && r.fingerprint == saved.fingerprint)
        #expect(opens(with: saved.recoveryKey, key: saved.accountKey))
        #expect(!opens(with: theirs, key: saved.accountKey))
        #expect(try a.saved() == saved)
        #expect(r.keyObjectReplaced?.contains("was replaced") == true && r.replacedAt != nil)
        #expect(a.audit.all.map(\.kind).contains(.keyObjectRepaired))
        // The status asks for attention, which notifications tell.
        var s = DaemonStatus(state: .running)
        await a.keys.contribute(to: &s)
        #expect(AttentionRules().items(for: s, facts: .init(), now: Date()).map(\.reason) == [.keyObjectReplaced])
        // Written over with a condition: never over something written after the look.
        #expect(world.bucket.writes(to: world.keyObjectKey).last.map { if case .ifMatch = $0 { true } else { false } } == true)
        // An hour later the key object is as it was put back: the attention goes.
        world.clock.advance(by: KeyService.recheck + 1)
        #expect(await a.settle().keyObjectReplaced == nil)
    }

    @Test func anOlderCopyPutBackAfterARotationIsWrittenOver() async throws {
        let a = try world.nas("a")
        await a.settle()
        let first = try #require(world.keyObject)
        let shown = try await a.keys.rotate(by: .caller(uid: 0))
        #expect(try a.saved()?.generation == 1)
        world.bucket.store(world.keyObjectKey, bytes: first)
        world.clock.advance(by: KeyService.recheck + 1)
        let r = await a.settle()
        #expect(r.state == .ready && !r.outdated && r.keyObjectReplaced != nil)
        #expect(opens(with: shown.recoveryKey, key: try #require(try a.saved()).accountKey))
    }

    @Test func aRotationOnAnotherNASIsStillARotation() async throws {
        let a = try world.nas("a")
        await a.settle()
        let saved = try #require(try a.saved())
        let b = try world.nas("b")
        await b.settle()
        _ = try await b.keys.enter(saved.recoveryKey.formatted, by: .caller(uid: 0))
        _ = try await b.keys.rotate(by: .caller(uid: 0))
        world.clock.advance(by: KeyService.recheck + 1)
        let r = await a.settle()
        #expect(r.state == .ready && r.outdated && r.keyObjectReplaced == nil)
        #expect(!a.audit.all.map(\.kind).contains(.keyObjectRepaired))
    }

    @Test func enteringAKeyThatOpensAnotherAccountKeyIsRefusedOnANASThatHoldsOne() async throws {
        let a = try world.nas("a")
        await a.settle()
        let saved = try #require(try a.saved())
        record("a", saved)
        let theirs = substitute()
        await #expect(throws: RecoveryKeyRefusal.otherAccountKey(saved.fingerprint)) {
            try await a.keys.enter(theirs.formatted, by: .caller(uid: 0))
        }
        #expect(try a.saved() == saved)
        #expect(await a.keys.metadataKeyState() == .ready(saved.accountKey))
        #expect(a.audit.all.last.map { $0.kind == .recoveryKeyRefused && $0.details["reason"] == .string("other_account_key") } == true)
    }

    @Test func theUsersKeyOpensTheAccountOnANewNASAfterASubstitution() async throws {
        let a = try world.nas("a")
        await a.settle()
        let saved = try #require(try a.saved())
        record("a", saved)
        let theirs = substitute()
        let b = try world.nas("b")
        #expect(await b.settle().state == .needed)
        // The attacker's key opens their key object but no manifest of the account.
        await #expect(throws: RecoveryKeyRefusal.keyObjectReplaced) { try await b.keys.enter(theirs.formatted, by: .caller(uid: 0)) }
        #expect(try b.saved() == nil)
        // The user's own key opens A's record, and B puts the key object back.
        #expect(try await b.keys.enter(saved.recoveryKey.formatted, by: .caller(uid: 0)) == saved.fingerprint)
        #expect(try b.saved()?.accountKey == saved.accountKey)
        #expect(opens(with: saved.recoveryKey, key: saved.accountKey))
        #expect(await b.status().keyObjectReplaced != nil)
        #expect(b.audit.all.map(\.kind).contains(.keyObjectRepaired))
    }

    @Test func aHolderWhoseOwnRecordNoLongerOpensAsksInsteadOfWritingOver() async throws {
        // A new account key made while this NAS was away (its record sealed again under it):
        // the key object proves nothing to it, and its own record does not open either.
        let a = try world.nas("a")
        await a.settle()
        let saved = try #require(try a.saved())
        let newer = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 9)
        record("a", newer)
        _ = substitute()
        let before = world.bucket.writes(to: world.keyObjectKey).count
        world.clock.advance(by: KeyService.recheck + 1)
        let r = await a.settle()
        #expect(r.state == .needed && r.message == KeyLifecycle.keyChangedSentence)
        #expect(world.bucket.writes(to: world.keyObjectKey).count == before)
        #expect(try a.saved() == saved)
    }

    // MARK: recovery-key --rotate --new-account-key

    /// Device `name`'s manifest: `logs` log segments chained and a record, under `state`'s key.
    func manifest(_ name: String, logs: Int, under state: AccountKeyState) {
        let layout = ManifestKeys(userId: uid, deviceId: name)
        var head = ManifestHeader.noPrevious
        for seq in 1...Int64(logs) {
            var h = ManifestHeader(kind: .log, device: name, seq: seq, createdAt: "2026-11-22T07:00:00Z", prev: head)
            let entry = ManifestEntry(kind: .appeared, folder: "/srv/photos", path: Array("p\(seq).jpg".utf8), time: seq * 1000,
                                      version: FileVersion(size: 3, md5: MD5Value(hex: "0123456789abcdef0123456789abcdef")!, mtimeSec: 1, mtimeNsec: 0))
            h.entries = 1
            let sealed = ManifestSegment(header: h, entries: [entry]).sealed(key: state.accountKey.metadataKey, objectKey: layout.log(seq))
            world.bucket.store(layout.log(seq), bytes: sealed)
            head = ManifestSegment.sealedDigestHex(of: sealed)
        }
        let r = DeviceRecord(deviceId: name, name: name, folders: ["/srv/photos"], lastBackupAt: nil, files: Int64(logs), bytes: 0,
                             logSeq: Int64(logs), snapshotSeq: 0, updatedAt: "2026-11-22T07:00:00Z", software: "t", counter: 4,
                             head: ManifestHead(seq: Int64(logs), sha256: head))
        world.bucket.store(layout.record, bytes: r.sealed(key: state.accountKey.metadataKey, objectKey: layout.record))
    }

    /// Reads `name`'s manifest as a fresh reader would, under `key`: whole, with `logs` files.
    func readsWhole(_ name: String, key: AccountKey, logs: Int) async throws -> Bool {
        let store = BucketObjects(bucket: world.bucket)
        var files = 0
        let report = try await ManifestReader(store: store, keys: ManifestKeys(userId: uid, deviceId: name), key: key.metadataKey,
                                              remembered: nil).read { segment, _ in files += segment.entries.count }
        return report.complete && files == logs
    }

    @Test func aNewAccountKeySealsEverythingAgainAndTheOtherNASesAskForIt() async throws {
        let a = try world.nas("a")
        await a.settle()
        let old = try #require(try a.saved())
        let b = try world.nas("b")
        await b.settle()
        _ = try await b.keys.enter(old.recoveryKey.formatted, by: .caller(uid: 0))
        manifest("a", logs: 3, under: old)
        manifest("b", logs: 2, under: old)
        let oldObject = try #require(world.keyObject)

        let done = try await a.keys.newAccountKey(by: .caller(uid: 0))
        let now = try #require(try a.saved())
        #expect(now.pending == nil && now.accountKey != old.accountKey && done.shown.recoveryKey == now.recoveryKey)
        #expect(done.previousFingerprint == old.fingerprint && done.devices == 2 && done.sealed == 7 && done.unreadable.isEmpty)
        // Everything reads whole under the new key, nothing under the old one.
        let aWhole = try await readsWhole("a", key: now.accountKey, logs: 3)
        let bWhole = try await readsWhole("b", key: now.accountKey, logs: 2)
        #expect(aWhole && bWhole)
        for key in world.bucket.keys where key.contains("/devices/") {
            let bytes = try #require(world.bucket.object(key)?.bytes)
            #expect((try? SealedObject.open(bytes, key: old.accountKey.metadataKey, objectKey: key)) == nil, "\(key)")
        }
        // The key object: the new key under the new recovery key, endorsed by the old one,
        // with the old key no longer inside; the old recovery key opens nothing.
        let opened = try KeyObject.unwrap(try #require(world.keyObject), recovery: now.recoveryKey, userId: uid)
        #expect(opened.key == now.accountKey && opened.previous == nil && opened.endorsed)
        #expect((try? KeyObject.unwrap(try #require(world.keyObject), recovery: old.recoveryKey, userId: uid)) == nil)
        // A copy of the old key object opens the old key, which opens nothing written since.
        #expect(try KeyObject.unwrap(oldObject, recovery: old.recoveryKey, userId: uid).key == old.accountKey)
        #expect(a.audit.all.map(\.kind).contains(.recoveryKeyNewAccountKey))
        // B, holding the old key: asks for the new recovery key and never writes over.
        world.clock.advance(by: KeyService.recheck + 1)
        let rb = await b.settle()
        #expect(rb.state == .needed && rb.message == KeyLifecycle.successorSentence)
        #expect(await b.keys.metadataKeyState() == .needed)
        #expect(try await b.keys.enter(now.recoveryKey.formatted, by: .caller(uid: 0)) == now.fingerprint)
        #expect(await b.keys.metadataKeyState() == .ready(now.accountKey))
    }

    @Test(arguments: [0, 1, 4])
    func aNewAccountKeyKilledMidWayGoesOnAtTheNextStart(sealedBeforeTheKill: Int) async throws {
        let a = try world.nas("a")
        await a.settle()
        let old = try #require(try a.saved())
        manifest("a", logs: 3, under: old)
        manifest("c", logs: 1, under: old)
        // What the command had done when the daemon died: the key file with both keys and
        // the transitional key object in the bucket, `sealedBeforeTheKill` objects sealed again.
        let next = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 77,
                                   pending: .newAccountKey(.init(accountKey: old.accountKey, recoveryKey: old.recoveryKey,
                                                                 recoveryCreatedAt: old.recoveryCreatedAt, generation: 0, resealing: true)),
                                   generation: 1)
        try a.store.save(next)
        world.bucket.store(world.keyObjectKey, bytes: KeyObject.wrap(next.accountKey, recoveryCreatedAt: 77, recovery: next.recoveryKey,
                                                                    userId: uid, extras: .init(generation: 1, previous: old.accountKey,
                                                                                               endorsedBy: old.accountKey)))
        if sealedBeforeTheKill > 0 {
            let reseal = AccountReseal(userId: uid, old: old.accountKey, new: next.accountKey,
                                       wrap: .init(recovery: next.recoveryKey, createdAt: 77))
            _ = try? await reseal.run(LimitedStore(inner: BucketObjects(bucket: world.bucket), puts: sealedBeforeTheKill))
        }
        let restarted = try world.nas("a")
        let r = await restarted.settle()
        #expect(r.state == .ready && r.fingerprint == next.fingerprint)
        let done = try #require(try restarted.saved())
        #expect(done.pending == nil && done.accountKey == next.accountKey && done.recoveryKey == next.recoveryKey)
        let aWhole = try await readsWhole("a", key: next.accountKey, logs: 3)
        let cWhole = try await readsWhole("c", key: next.accountKey, logs: 1)
        #expect(aWhole && cWhole)
        #expect(try KeyObject.unwrap(try #require(world.keyObject), recovery: next.recoveryKey, userId: uid).previous == nil)
        #expect(restarted.audit.all.map(\.kind).contains(.recoveryKeyNewAccountKey))
    }

    @Test func aNewAccountKeyWhoseTransitionNeverReachedTheBucketIsTakenUpAgain() async throws {
        let a = try world.nas("a")
        await a.settle()
        let old = try #require(try a.saved())
        let next = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 77,
                                   pending: .newAccountKey(.init(accountKey: old.accountKey, recoveryKey: old.recoveryKey,
                                                                 recoveryCreatedAt: old.recoveryCreatedAt, generation: 0)),
                                   generation: 1)
        try a.store.save(next)
        // The key object is still the old one: the step goes on from there (it was asked for).
        let restarted = try world.nas("a")
        #expect(await restarted.settle().state == .ready)
        let done = try #require(try restarted.saved())
        #expect(done.pending == nil && done.accountKey == next.accountKey)
        #expect(opens(with: next.recoveryKey, key: next.accountKey))
    }
}

/// The in-memory bucket as the manifest reader and the re-seal see it.
struct BucketObjects: ManifestObjects, ResealStore {
    let bucket: InMemoryBucket

    func keys(under prefix: String, from token: String?) async throws -> (keys: [String], next: String?) {
        (bucket.keys.filter { $0.hasPrefix(prefix) }.sorted(), nil)
    }

    func keys(under prefix: String) async throws -> [String] { bucket.keys.filter { $0.hasPrefix(prefix) }.sorted() }
    func bytes(_ key: String) async throws -> [UInt8]? { bucket.object(key)?.bytes }
    func put(_ key: String, _ bytes: [UInt8]) async throws { bucket.store(key, bytes: bytes) }
}

/// A store that dies (throws) after `puts` writes: a re-seal killed mid-way.
final class LimitedStore: ResealStore, @unchecked Sendable {
    let inner: BucketObjects
    private var left: Int
    init(inner: BucketObjects, puts: Int) {
        self.inner = inner
        left = puts
    }

    struct Killed: Error {}
    func keys(under prefix: String) async throws -> [String] { try await inner.keys(under: prefix) }
    func bytes(_ key: String) async throws -> [UInt8]? { try await inner.bytes(key) }
    func put(_ key: String, _ bytes: [UInt8]) async throws {
        guard left > 0 else { throw Killed() }
        left -= 1
        try await inner.put(key, bytes)
    }
}
