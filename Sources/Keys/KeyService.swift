/// Keys: the account key and the recovery key on this NAS (privacy.md): made at the first
/// sign-in of an account that has none, asked for on every other NAS, rotated on demand.
import Bucket
import Foundation
import Logging
import ManifestFormat
import PhotolalaCore
import ServiceLifecycle
import Vault

/// Keeps the account key of the signed-in account: the key file in `state_dir` (Vault's
/// `AccountKeyStore`, 0600, replaced atomically, with a `pending` marker while the bucket
/// has not confirmed a step) and the key object `metadata/{userId}/keys/account-key`.
///
/// What it does about them is `KeyLifecycle`'s answer to what it keeps and what the bucket
/// holds; this actor looks, performs the answer, and tells the manifest (`keyChanges`) and
/// the status. Each step is written so that a kill -9 between any two leaves the account
/// readable with a recovery key the user was shown, or one `recovery-key` shows now:
/// the pending marker is saved before the bucket is written, and cleared only after.
///
/// One look or change at a time (`exclusive`): the loop's look, `enter` and `rotate` each
/// read the bucket and then write the file, and must not interleave.
package actor KeyService: Service, MetadataKeySource {
    /// How often a settled state is checked against the bucket again: a deleted key object
    /// is written again, a rotation elsewhere noticed, an unreadable account looked at anew.
    package static let recheck: TimeInterval = 3600
    static let recheckUnreadable: TimeInterval = 900
    /// The service's tests count a store's refusals by the service's own number.
    package static let conflictsInARow = KeyLookRetry.conflictsInARow

    package nonisolated let keyChanges = ChangeFeed()
    private let statusChanges: ChangeFeed
    private let store: AccountKeyStore
    private let grants: any GrantSource
    private let bucket: KeyBucket
    private let clock: any DaemonClock
    private let logger: Logger
    private let audit: (any AuditRecorder)?
    private let loop: StageLoop

    /// What it remembers of the signed-in account's key, and what follows from that alone.
    private var memory = KeyMemory()
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// - Parameters:
    ///   - grants: who is signed in (the account service), and the session's credentials.
    ///   - bucket: this service's own session (a connection or two).
    ///   - wakes: feeds that change when the sign-in may have changed (the account's status).
    package init(stateDir: String, grants: any GrantSource, bucket: BucketSession, clock: any DaemonClock = SystemClock(),
                 logger: Logger, audit: (any AuditRecorder)? = nil, statusChanges: ChangeFeed = ChangeFeed(),
                 wakes: [ChangeFeed] = []) {
        store = AccountKeyStore(directory: stateDir)
        self.grants = grants
        self.bucket = KeyBucket(session: bucket)
        self.clock = clock
        self.logger = logger
        self.audit = audit
        self.statusChanges = statusChanges
        loop = StageLoop(clock: clock, wakes: ([grants.credentialDrops] + wakes).map { .stream($0.changes()) })
    }

    /// Looks whenever the sign-in changes or a recheck is due, until graceful shutdown.
    package func run() async throws {
        await loop.run { _ in await self.step() }
        await bucket.session.shutdown()
    }

    /// `tls.ca_file` re-read on reload.
    package func apply(trust: TLSTrust) async {
        await bucket.session.apply(trust: trust)
    }

    // MARK: MetadataKeySource

    /// Only for the account signed in now: the state below may still be another's.
    package func metadataKeyState() async -> MetadataKeyState {
        let current = await grants.userId
        return memory.metadataKey(signedIn: current)
    }

    /// A HEAD of the key object before the manifest writes: one that changed since the last
    /// look (a new account key elsewhere, a substitution) is looked at whole first.
    package func currentKeyState() async -> MetadataKeyState {
        let current = await grants.userId
        if let uid = current, uid == memory.user, memory.phase == .ready, memory.resealed == nil, case .some(let known) = memory.lastETag {
            var now: String??
            do throws(S3Error) {
                now = .some(try await bucket.keyObjectETag(uid))
            } catch {
                // The write that follows meets the same trouble and is retried.
                now = nil
            }
            if let now, now != known {
                memory.nextLook = nil
                _ = await exclusive { await self.look() }
            }
        }
        return await metadataKeyState()
    }

    package func recordWrap() async -> SealedRecord.Wrap? {
        memory.recordWrap
    }

    // MARK: the loop

    /// One look, when due: answers when to look again.
    package func step() async -> StageLoop.Next {
        await exclusive { await self.look() }
    }

    private func look() async -> StageLoop.Next {
        let current = await grants.userId
        if current != memory.user { follow(current) }
        guard let uid = current else { return .wake }
        let now = clock.now()
        if let at = memory.nextLook, at > now { return .wait(until: at) }
        do throws(KeyLookFailure) {
            try await resolve(uid)
            memory.retry.succeeded()
            setError(nil)
            // From the time the look ended: the bucket's answers (and retries) took some.
            let at = clock.now().addingTimeInterval(memory.phase == .ready || memory.phase == .needed ? Self.recheck : Self.recheckUnreadable)
            memory.nextLook = at
            return .wait(until: at)
        } catch {
            switch memory.retry.failed(error, random: .random(in: 0..<1)) {
            case .now: return .now
            case .wake: return .wake
            case .after(let delay, let why):
                let at = clock.now().addingTimeInterval(delay)
                memory.nextLook = at
                if memory.lastError != why { logger.warning("\(why); trying again at \(Timestamp.string(at))") }
                setError(why)
                return .wait(until: at)
            }
        }
    }

    private func follow(_ current: String?) {
        memory.follow(current)
        set(current == nil ? .none : .checking)
        keyChanges.changed()
        statusChanges.changed()
    }

    /// Reads the key file, asks the bucket, and performs `KeyLifecycle`'s answer.
    private func resolve(_ uid: String) async throws(KeyLookFailure) {
        if !memory.loaded {
            // A temporary file a killed write left: the file itself is whole, old or new.
            store.removeTemporary()
            do {
                memory.local = try store.load()
            } catch {
                // Never replaced behind the user's back: it may hold the only copy.
                set(.unreadable("This NAS's key file cannot be read: \(error)"))
                return
            }
            if let l = memory.local, l.userId != uid {
                // Signing in to another account replaces the sign-in, as a logout would have.
                logger.notice("the key file belongs to another account: erasing it for this sign-in",
                              metadata: ["fingerprint": "\(l.fingerprint)"])
                try erase()
            }
            memory.loaded = true
            if let l = memory.local { l.registerSecrets() }
        }
        // A confirmed key serves at once, before the bucket answers (a rotation cut short
        // keeps the same account key).
        if let l = memory.local, l.pending != .creating { set(.ready) }
        let object = try await keyObject(uid)
        let held = KeyLifecycle.Local(memory.local)
        var finding = object.map { KeyLifecycle.finding($0.bytes, holding: memory.local, userId: uid) } ?? .missing(otherKeyMaterial: false)
        if case .missing = finding, held == .nothing || held == .creating {
            do throws(S3Error) {
                finding = .missing(otherKeyMaterial: try await bucket.hasKeyMaterial(uid))
            } catch {
                throw KeyLookFailure(error)
            }
        }
        if case .unproven(.unknown) = finding, let l = memory.local, held == .confirmed || held == .rotating {
            finding = .unproven(ownRecord: try await ownRecord(uid, key: l.accountKey))
        }
        if case .proven(let g) = finding { memory.seenGeneration = max(memory.seenGeneration, g) }
        memory.transition = finding == .opensWithCurrent(transition: true)
        var decision = KeyLifecycle.decide(local: held, finding: finding, generation: memory.local?.generation ?? 0, seen: memory.seenGeneration)
        if decision.state == .create {
            try make(uid)
            decision = KeyLifecycle.decide(local: .creating, finding: .missing(otherKeyMaterial: false))
        }
        memory.lastETag = .some(object?.etag)
        if memory.settleReplaced(decision, now: clock.now()) { statusChanges.changed() }
        try await perform(decision, uid: uid, etag: object?.etag, finding: finding)
    }

    /// Whether this NAS's own device record opens under `key` (absent: there is none).
    private func ownRecord(_ uid: String, key: AccountKey) async throws(KeyLookFailure) -> KeyLifecycle.OwnRecord {
        guard let device = await grants.deviceId else { return .absent }
        do throws(S3Error) {
            return try await bucket.ownRecord(uid, device: device, key: key)
        } catch {
            throw KeyLookFailure(error)
        }
    }

    private func perform(_ decision: KeyLifecycle.Decision, uid: String, etag: String?, finding: KeyLifecycle.Finding) async throws(KeyLookFailure) {
        guard var state = memory.local else {
            reach(decision.state)
            return
        }
        let wasCreating = state.pending == .creating
        switch decision.local {
        case .revert:
            if let reverted = KeyMemory.reverted(state, uid: uid) {
                logger.notice("\(reverted.why)")
                state = reverted.state
                try save(state)
            }
        case .erase:
            try erase()
            logger.notice(decision.state == .needed(nil)
                ? "another NAS made this account's key first: this NAS dropped its own and asks for the recovery key"
                : "the account already has encrypted objects: this NAS dropped the key it was making")
        case .keep, .confirm:
            break
        }
        var current = etag
        if decision.upload != .none, let state = memory.local {
            let object: [UInt8]
            let replace = decision.upload == .fresh ? nil : etag
            if decision.upload == .transition {
                guard case .newAccountKey(let old)? = state.pending else {
                    reach(decision.state)
                    return
                }
                object = state.transitionalKeyObject(uid: uid, replacing: old)
            } else {
                object = state.keyObject(uid: uid)
            }
            do throws(S3Error) {
                current = try await bucket.putKeyObject(object, uid: uid, ifMatch: replace)
            } catch {
                // Someone wrote the key object meanwhile (or our own write answered late):
                // look again, and the lifecycle decides with what is there now.
                if error.kind == .preconditionFailed || error.kind == .notFound { throw .again }
                throw KeyLookFailure(error)
            }
            memory.lastETag = .some(current)
            if decision.replaced {
                let why = Self.replacedSentence(finding)
                memory.replaced = (clock.now(), why)
                logger.warning("\(why)", metadata: ["fingerprint": "\(state.fingerprint)"])
                record(.keyObjectRepaired, .daemon, .ok, ["fingerprint": .string(state.fingerprint), "found": .string(Self.found(finding))])
                statusChanges.changed()
            } else if !wasCreating && decision.upload != .transition {
                logger.notice(decision.upload == .repair ? "the key object in the bucket was damaged: written again"
                                                         : "the key object was missing from the bucket: written again")
            }
            if decision.upload == .transition, case .newAccountKey(var old)? = state.pending {
                old.resealing = true
                var marked = state
                marked.pending = .newAccountKey(old)
                try save(marked)
                memory.transition = true
            }
        }
        if decision.local == .confirm, var confirmed = memory.local {
            let replacing: AccountKeyState.Replaced? = if case .newAccountKey(let old)? = confirmed.pending { old } else { nil }
            confirmed.pending = nil
            try save(confirmed)
            if let old = replacing {
                // Killed after the final key object reached the bucket: done, said once.
                memory.transition = false
                keyChanges.changed()
                record(.recoveryKeyNewAccountKey, .daemon, .ok, ["fingerprint": .string(confirmed.fingerprint),
                                                                  "previous": .string(old.accountKey.fingerprint)])
            }
            if wasCreating {
                memory.created = uid
                logger.notice("made this account's key; keep its recovery key somewhere other than this NAS (sudo photolalactl recovery-key)",
                              metadata: ["fingerprint": "\(confirmed.fingerprint)"])
            } else {
                logger.notice("the new recovery key is in place", metadata: ["fingerprint": "\(confirmed.fingerprint)"])
            }
        }
        if decision.state == .reseal {
            try await finishNewAccountKey(uid, etag: current, by: .daemon)
            return
        }
        reach(decision.state)
    }

    private func reach(_ state: KeyLifecycle.Decision.State) {
        let reached = memory.reach(state)
        if let say = reached.say { logger.log(level: say.level, "\(say.line)") }
        if reached.phaseChanged { phaseChanged() }
        if reached.needed { statusChanges.changed() }
    }

    /// A new account key and recovery key, saved as `creating` before anything is sent.
    private func make(_ uid: String) throws(KeyLookFailure) {
        let state = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(),
                                    recoveryCreatedAt: Self.millis(clock.now()), pending: .creating)
        state.registerSecrets()
        try save(state)
        logger.notice("the account has no key yet: making one", metadata: ["fingerprint": "\(state.fingerprint)"])
    }

    private func keyObject(_ uid: String) async throws(KeyLookFailure) -> (bytes: [UInt8], etag: String)? {
        do throws(S3Error) {
            return try await bucket.keyObject(uid)
        } catch {
            throw KeyLookFailure(error)
        }
    }

    // MARK: the key file

    private func save(_ state: AccountKeyState) throws(KeyLookFailure) {
        do {
            try store.save(state)
        } catch {
            throw .local("cannot save this NAS's key file: \(error)")
        }
        memory.local = state
    }

    private func erase() throws(KeyLookFailure) {
        do {
            try store.erase()
        } catch {
            throw .local("cannot erase this NAS's key file: \(error)")
        }
        memory.local = nil
    }

    // MARK: recovery-key (the control socket)

    /// `recovery-key`: the key as this NAS holds it. Recorded in the audit trail (never the key).
    package func recoveryKey(by caller: AuditActor) throws(RecoveryKeyRefusal) -> ShownRecoveryKey {
        do throws(RecoveryKeyRefusal) {
            let state = try memory.standing.held(signedIn: memory.user != nil)
            record(.recoveryKeyShown, caller, .ok, ["fingerprint": .string(state.fingerprint), "outdated": .bool(memory.outdated)])
            noteShown(state)
            return ShownRecoveryKey(state, outdated: memory.outdated)
        } catch {
            refused("show", caller, error)
            throw error
        }
    }

    /// `recovery-key --enter`: keeps `text` if it opens the account's key object; otherwise
    /// nothing changes. Answers the account key's fingerprint.
    package func enter(_ text: String, by caller: AuditActor) async throws(RecoveryKeyRefusal) -> String {
        let recovery: RecoveryKey
        do throws(RecoveryKey.ParseError) {
            recovery = try RecoveryKey.parse(text)
        } catch {
            refused("enter", caller, .malformed(error))
            throw .malformed(error)
        }
        recovery.registerSecret()
        let result: Result<String, RecoveryKeyRefusal> = await exclusive { await self.adopt(recovery) }
        switch result {
        case .success(let fingerprint):
            record(.recoveryKeyEntered, caller, .ok, ["fingerprint": .string(fingerprint)])
            return fingerprint
        case .failure(let refusal):
            refused("enter", caller, refusal)
            throw refusal
        }
    }

    private func adopt(_ recovery: RecoveryKey) async -> Result<String, RecoveryKeyRefusal> {
        let current = await grants.userId
        if current != memory.user { follow(current) }
        guard let uid = current else { return .failure(.notSignedIn) }
        if memory.changing { return .failure(.busy(Self.transitionSentence)) }
        let found: (bytes: [UInt8], etag: String)?
        let records: [KeyLifecycle.Record]
        do throws(KeyLookFailure) {
            found = try await keyObject(uid)
            do throws(S3Error) {
                records = try await bucket.deviceRecords(uid)
            } catch {
                throw KeyLookFailure(error)
            }
        } catch .unavailable {
            return .failure(.notSignedIn)
        } catch {
            return .failure(.bucket("cannot read this account's key object from the bucket (\(error)); nothing was changed: try again"))
        }
        // A key this NAS uses: another one is refused (privacy.md "No side doors").
        let holding = memory.phase == .ready ? memory.local : nil
        let entered: KeyLifecycle.Entered
        do throws(RecoveryKeyRefusal) {
            entered = try KeyLifecycle.entered(recovery, keyObject: found?.bytes, records: records, holding: holding, userId: uid)
        } catch {
            if case .otherAccountKey = error {
                logger.warning("a recovery key that opens another account key was entered and refused: this NAS keeps its own",
                               metadata: ["fingerprint": "\(holding?.fingerprint ?? "-")"])
            }
            return .failure(error)
        }
        let state = memory.entered(entered.state, shownAt: Self.millis(clock.now()))
        state.registerSecrets()
        do throws(KeyLookFailure) {
            try save(state)
        } catch {
            return .failure(.local("\(error); nothing was changed"))
        }
        memory.adopted(outdated: entered.outdated)
        setError(nil)
        memory.nextLook = clock.now().addingTimeInterval(Self.recheck)
        set(.ready)
        logger.notice("the recovery key was entered: this NAS holds the account key", metadata: ["fingerprint": "\(state.fingerprint)"])
        if entered.repairKeyObject {
            // The user's key opened a device record, not the key object: what stands there
            // was not written with this account key. Ours goes back over it.
            let finding: KeyLifecycle.Finding = found == nil ? .missing(otherKeyMaterial: true) : .unproven(ownRecord: .unknown)
            do throws(KeyLookFailure) {
                try await perform(KeyLifecycle.Decision(.ready(outdated: false), upload: found == nil ? .fresh : .repair,
                                                        replaced: found != nil),
                                  uid: uid, etag: found?.etag, finding: finding)
            } catch {
                memory.nextLook = nil
                loop.wake()
            }
        } else {
            memory.lastETag = .some(found?.etag)
        }
        return .success(state.fingerprint)
    }

    /// `recovery-key --rotate`: the same account key wrapped by a new recovery key, which
    /// replaces the key object; the old recovery key opens nothing in the bucket afterwards.
    package func rotate(by caller: AuditActor) async throws(RecoveryKeyRefusal) -> ShownRecoveryKey {
        let result: Result<ShownRecoveryKey, RecoveryKeyRefusal> = await exclusive { await self.rotateNow() }
        switch result {
        case .success(let shown):
            record(.recoveryKeyRotated, caller, .ok, ["fingerprint": .string(shown.fingerprint)])
            return shown
        case .failure(let refusal):
            refused("rotate", caller, refusal)
            throw refusal
        }
    }

    /// Where a change of the keys starts (a rotation, a new account key): the keys this NAS
    /// holds, nothing else under way, and the ETag of the key object the change replaces
    /// (its conditional write fails if another NAS wrote it meanwhile).
    private func changeStart() async -> Result<(AccountKeyState, String?), RecoveryKeyRefusal> {
        let before: AccountKeyState
        do throws(RecoveryKeyRefusal) {
            before = try memory.changeStart()
        } catch {
            return .failure(error)
        }
        do throws(KeyLookFailure) {
            return .success((before, try await keyObject(before.userId)?.etag))
        } catch {
            return .failure(.bucket("cannot read this account's key object from the bucket (\(error)); nothing was changed: try again"))
        }
    }

    private func rotateNow() async -> Result<ShownRecoveryKey, RecoveryKeyRefusal> {
        let before: AccountKeyState, etag: String?
        switch await changeStart() {
        case .success(let start): (before, etag) = start
        case .failure(let refusal): return .failure(refusal)
        }
        let uid = before.userId
        let next = RecoveryKey.generate()
        let at = Self.millis(clock.now())
        var state = memory.rotation(from: before, to: next, at: at)
        state.registerSecrets()
        do throws(KeyLookFailure) {
            try save(state)
        } catch {
            return .failure(.local("\(error); nothing was changed"))
        }
        // Whether the bucket took it may be unknown: the loop finds out which recovery key
        // the key object opens with, and keeps that one.
        switch await putChange(state.keyObject(uid: uid), uid: uid, over: etag, before: before, unknown: {
            "the new recovery key may not have reached the bucket (\($0)): photolalad keeps whichever "
                + "recovery key the bucket's key object opens with; run `sudo photolalactl recovery-key` in a minute to see it"
        }) {
        case .success(let written): memory.lastETag = .some(written)
        case .failure(let refusal): return .failure(refusal)
        }
        state.pending = nil
        // The answer carries the new key to the command, which prints it.
        state.recoveryShownAt = at
        do throws(KeyLookFailure) {
            try save(state)
        } catch {
            // The bucket has the new key; the file still says "rotating", which the next
            // start settles to the same new key.
            logger.error("\(error)")
            memory.local = state
        }
        memory.outdated = false
        set(.ready)
        logger.notice("the recovery key was replaced: the previous one opens nothing in the bucket any more",
                      metadata: ["fingerprint": "\(state.fingerprint)"])
        return .success(ShownRecoveryKey(state, outdated: false))
    }

    /// The step a rotation and a new account key share, once the key file says what is under
    /// way: the key object put over the one `etag` names. Another NAS wrote it meanwhile (412,
    /// or gone): the key file goes back to `before`. Any other failure leaves it unknown
    /// whether the bucket took it: the loop looks at once, and `unknown` words it.
    private func putChange(_ object: [UInt8], uid: String, over etag: String?, before: AccountKeyState,
                           unknown: (S3Error) -> String) async -> Result<String, RecoveryKeyRefusal> {
        do throws(S3Error) {
            return .success(try await bucket.putKeyObject(object, uid: uid, ifMatch: etag))
        } catch {
            if error.kind == .preconditionFailed || error.kind == .notFound {
                do throws(KeyLookFailure) { try save(before) } catch {
                    // The pending marker stays: the loop settles it from the bucket.
                    memory.nextLook = nil
                }
                return .failure(.changedMeanwhile)
            }
            memory.nextLook = nil
            loop.wake()
            return .failure(.bucket(unknown(error)))
        }
    }

    /// `logout`: why this NAS must not forget the account key now, in a sentence with the
    /// command that shows its recovery key; nil when it may. It must not while it holds the
    /// key and the recovery key was never shown nor entered here since it was made or
    /// last rotated (privacy.md "No side doors"): that copy may be the only way into the
    /// account's manifests. A key another NAS rotated since (`outdated`) is not held back:
    /// the account's current recovery key was shown there.
    package func logoutHold() async -> String? {
        await exclusive { () async -> String? in
            // Not loaded: signed out (an expired sign-in keeps the file) or not looked at yet.
            self.memory.logoutHold(self.memory.loaded ? self.memory.local : (try? self.store.load()))
        }
    }

    // MARK: recovery-key --rotate --new-account-key

    /// `recovery-key --rotate --new-account-key` (privacy.md "No side doors"): a new account
    /// key and recovery key; every object under the account's metadata, of every device,
    /// sealed again under it; other NASes of the account then ask for the new recovery key.
    ///
    /// The steps, each safe to be killed after (the next start goes on from the key file
    /// and the bucket): the key file keeps both keys (`newAccountKey`); the transitional
    /// key object (the new key under the new recovery key, the previous key inside,
    /// endorsed by it) replaces the old one, so the new recovery key opens everything from
    /// then on; the key file says so (`resealing`); every object is sealed again; the final
    /// key object (without the previous key) replaces the transitional one; the key file
    /// keeps the new keys alone.
    package func newAccountKey(by caller: AuditActor) async throws(RecoveryKeyRefusal) -> NewAccountKey {
        let result: Result<NewAccountKey, RecoveryKeyRefusal> = await exclusive { await self.startNewAccountKey(by: caller) }
        switch result {
        case .success(let done):
            return done
        case .failure(let refusal):
            refused("new-account-key", caller, refusal)
            throw refusal
        }
    }

    private func startNewAccountKey(by caller: AuditActor) async -> Result<NewAccountKey, RecoveryKeyRefusal> {
        let before: AccountKeyState, etag: String?
        switch await changeStart() {
        case .success(let start): (before, etag) = start
        case .failure(let refusal): return .failure(refusal)
        }
        let uid = before.userId
        let old = AccountKeyState.Replaced(accountKey: before.accountKey, recoveryKey: before.recoveryKey,
                                           recoveryCreatedAt: before.recoveryCreatedAt, generation: before.generation)
        var state = memory.newAccountKey(replacing: old, from: before, accountKey: .generate(), recoveryKey: .generate(),
                                         at: Self.millis(clock.now()))
        state.registerSecrets()
        do throws(KeyLookFailure) {
            try save(state)
        } catch {
            return .failure(.local("\(error); nothing was changed"))
        }
        logger.notice("making a new account key: every object under the account's metadata is sealed again",
                      metadata: ["fingerprint": "\(state.fingerprint)", "previous": "\(before.fingerprint)"])
        // Whether the bucket took it may be unknown: the loop looks, and goes on (the
        // transitional object is there) or keeps the previous key (it is not).
        let written: String
        switch await putChange(state.transitionalKeyObject(uid: uid, replacing: old), uid: uid, over: etag, before: before, unknown: {
            "the new account key may not have reached the bucket (\($0)): photolalad goes on with it if "
                + "it did, or keeps the previous one; run `sudo photolalactl recovery-key` in a few minutes to see which"
        }) {
        case .success(let tag): written = tag
        case .failure(let refusal): return .failure(refusal)
        }
        var marked = old
        marked.resealing = true
        state.pending = .newAccountKey(marked)
        memory.transition = true
        keyChanges.changed()
        do throws(KeyLookFailure) {
            try save(state)
            return .success(try await finishNewAccountKey(uid, etag: written, by: caller))
        } catch {
            memory.nextLook = nil
            loop.wake()
            return .failure(.bucket("the new account key is in place but not every object is sealed under it yet (\(error)): "
                + "photolalad goes on by itself; run `sudo photolalactl recovery-key` once status says the key is ready"))
        }
    }

    /// Seals every object again under the new key, then writes the final key object and
    /// keeps the new keys alone. Run by the command, and by the loop after a restart.
    @discardableResult
    private func finishNewAccountKey(_ uid: String, etag: String?, by caller: AuditActor) async throws(KeyLookFailure) -> NewAccountKey {
        guard var state = memory.local, case .newAccountKey(let old)? = state.pending else { throw .local("no new account key is under way") }
        memory.transition = true
        memory.resealed = 0
        statusChanges.changed()
        defer {
            memory.resealed = nil
            statusChanges.changed()
        }
        let reseal = AccountReseal(userId: uid, old: old.accountKey, new: state.accountKey,
                                   wrap: SealedRecord.Wrap(recovery: state.recoveryKey, createdAt: state.recoveryCreatedAt))
        let total: AccountReseal.Report
        do {
            total = try await reseal.runUntilSettled(ResealBucket(bucket: bucket, uid: uid)) { [weak self] r in
                // Awaited, not a task per device: progress lands in order, and none after the end.
                await self?.progress(r.sealed)
            }
        } catch let error as S3Error {
            throw KeyLookFailure(error)
        } catch {
            throw .local("cannot seal the account's objects again: \(error)")
        }
        let final = state.finalKeyObject(uid: uid, replacing: old)
        do throws(S3Error) {
            let current = try await bucket.keyObject(uid)
            memory.lastETag = .some(try await bucket.putKeyObject(final, uid: uid, ifMatch: current?.etag ?? etag))
        } catch {
            if error.kind == .preconditionFailed { throw .again }
            throw KeyLookFailure(error)
        }
        state.pending = nil
        // The command prints the new recovery key; a start that finished a killed one did not.
        if caller != .daemon { state.recoveryShownAt = Self.millis(clock.now()) }
        try save(state)
        memory.transition = false
        memory.outdated = false
        set(.ready)
        keyChanges.changed()
        logger.notice("the new account key is in place: the previous recovery key and key object open nothing written since",
                      metadata: ["fingerprint": "\(state.fingerprint)", "sealed": "\(total.sealed)", "devices": "\(total.devices)"])
        var details: AuditDetails = ["fingerprint": .string(state.fingerprint), "previous": .string(old.accountKey.fingerprint),
                                     "sealed": .int(Int64(total.sealed)), "devices": .int(Int64(total.devices))]
        if !total.unreadable.isEmpty { details["unreadable"] = .int(Int64(total.unreadable.count)) }
        record(.recoveryKeyNewAccountKey, caller, .ok, details)
        return NewAccountKey(shown: ShownRecoveryKey(state, outdated: false), previousFingerprint: old.accountKey.fingerprint,
                             sealed: total.sealed, devices: total.devices, unreadable: total.unreadable)
    }

    private func progress(_ sealed: Int) {
        if memory.progress(sealed) { statusChanges.changed() }
    }

    /// `logout`: this NAS forgets the account key with the sign-in (the device id stays).
    /// Answers a sentence when the key file could not be erased.
    package func forget() async -> String? {
        await exclusive { () async -> String? in
            let had = self.memory.local != nil || self.memory.loaded == false
            do throws(KeyLookFailure) {
                try self.erase()
            } catch {
                self.logger.error("\(error)")
                return "\(error)"
            }
            self.memory.forgotten()
            self.set(.none)
            if had { self.logger.notice("signed out: this NAS's copy of the account key was erased") }
            return nil
        }
    }

    /// Waits (up to `seconds`) until the key of `userId`'s sign-in is settled: whether this
    /// NAS made it (so `login` tells the user to keep the recovery key) or what else. nil:
    /// not settled in time (the bucket is slow or unreachable).
    package func settled(for userId: String, within seconds: TimeInterval) async -> KeySignInOutcome? {
        let changes = keyChanges.changes()
        loop.wake()
        return await Self.firstAnswer(after: changes, by: clock.now().addingTimeInterval(seconds), clock: clock) {
            await self.outcome(for: userId)
        }
    }

    private func outcome(for userId: String) -> KeySignInOutcome? {
        memory.outcome(for: userId)
    }

    // MARK: status

    package func contribute(to s: inout DaemonStatus) {
        s.recovery = memory.standing.recovery
    }

    // MARK: helpers

    /// The recovery key reached a person: noted in the key file once (a write only the
    /// first time it is shown after being made or rotated).
    private func noteShown(_ state: AccountKeyState) {
        guard let current = memory.shown(state, at: Self.millis(clock.now())) else { return }
        do throws(KeyLookFailure) {
            try save(current)
        } catch {
            logger.error("\(error): logout will still ask to show the recovery key")
        }
    }

    private func set(_ next: KeyStanding.Phase) {
        if memory.set(next) { phaseChanged() }
    }

    private func phaseChanged() {
        keyChanges.changed()
        statusChanges.changed()
    }

    private func setError(_ why: String?) {
        guard memory.setError(why) else { return }
        statusChanges.changed()
        // A sign-in waiting in `settled` answers at once that the bucket is failing.
        keyChanges.changed()
    }

    private func record(_ kind: AuditEvent.Kind, _ caller: AuditActor, _ outcome: AuditOutcome, _ details: AuditDetails) {
        audit?.record(AuditEvent(kind, by: caller, outcome, details))
    }

    private func refused(_ action: String, _ caller: AuditActor, _ refusal: RecoveryKeyRefusal) {
        record(.recoveryKeyRefused, caller, .refused, ["action": .string(action), "reason": .string(refusal.code)])
    }

    /// Runs `body` alone: no other look, entry or rotation meanwhile (in call order).
    private func exclusive<T: Sendable>(_ body: () async -> T) async -> T {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
        defer {
            if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
        }
        return await body()
    }

    static func millis(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }
}
