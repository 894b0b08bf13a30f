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
    /// The key object's reads and writes, the re-seal, and what the log and the audit trail
    /// say of them.
    private let flows: RecoveryKeyFlows
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
        flows = RecoveryKeyFlows(bucket: self.bucket, logger: logger, audit: audit)
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
        let object = try await flows.keyObject(uid)
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
            guard let object = RecoveryKeyFlows.keyObject(state, uid: uid, transitional: decision.upload == .transition) else {
                reach(decision.state)
                return
            }
            current = try await flows.write(object, uid: uid, over: decision.upload == .fresh ? nil : etag)
            memory.lastETag = .some(current)
            if let why = flows.written(decision, state, finding: finding, wasCreating: wasCreating) {
                memory.replaced = (clock.now(), why)
                statusChanges.changed()
            }
            if decision.upload == .transition, let marked = RecoveryKeyFlows.resealing(state) {
                try save(marked)
                memory.transition = true
            }
        }
        if decision.local == .confirm, var confirmed = memory.local {
            let replacing: AccountKeyState.Replaced? = if case .newAccountKey(let old)? = confirmed.pending { old } else { nil }
            confirmed.pending = nil
            try save(confirmed)
            if replacing != nil {
                // Killed after the final key object reached the bucket: done, said once.
                memory.transition = false
                keyChanges.changed()
            }
            if wasCreating { memory.created = uid }
            flows.confirmed(confirmed, replacing: replacing, made: wasCreating)
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

    /// Keys a command takes: kept out of the logs, then saved; when they cannot be,
    /// nothing changed.
    private func keep(_ state: AccountKeyState) throws(RecoveryKeyRefusal) {
        state.registerSecrets()
        do throws(KeyLookFailure) {
            try save(state)
        } catch {
            throw .local("\(error); nothing was changed")
        }
    }

    // MARK: recovery-key (the control socket)

    /// `recovery-key`: the key as this NAS holds it. Recorded in the audit trail (never the key).
    package func recoveryKey(by caller: AuditActor) throws(RecoveryKeyRefusal) -> ShownRecoveryKey {
        let state = try flows.refusing("show", caller) { () throws(RecoveryKeyRefusal) in try memory.standing.held(signedIn: memory.user != nil) }
        flows.record(.recoveryKeyShown, caller, .ok, ["fingerprint": .string(state.fingerprint), "outdated": .bool(memory.outdated)])
        noteShown(state)
        return ShownRecoveryKey(state, outdated: memory.outdated)
    }

    /// `recovery-key --enter`: keeps `text` if it opens the account's key object; otherwise
    /// nothing changes. Answers the account key's fingerprint.
    package func enter(_ text: String, by caller: AuditActor) async throws(RecoveryKeyRefusal) -> String {
        let recovery = try flows.parse(text, by: caller)
        let fingerprint = try await command("enter", by: caller) { () async throws(RecoveryKeyRefusal) in try await self.adopt(recovery) }
        flows.record(.recoveryKeyEntered, caller, .ok, ["fingerprint": .string(fingerprint)])
        return fingerprint
    }

    private func adopt(_ recovery: RecoveryKey) async throws(RecoveryKeyRefusal) -> String {
        let current = await grants.userId
        if current != memory.user { follow(current) }
        guard let uid = current else { throw .notSignedIn }
        if memory.changing { throw .busy(Self.transitionSentence) }
        let (found, records) = try await flows.entryMaterial(uid)
        // A key this NAS uses: another one is refused (privacy.md "No side doors").
        let entered = try flows.entered(recovery, keyObject: found?.bytes, records: records,
                                        holding: memory.phase == .ready ? memory.local : nil, userId: uid)
        let state = memory.entered(entered.state, shownAt: Self.millis(clock.now()))
        try keep(state)
        memory.adopted(outdated: entered.outdated)
        setError(nil)
        memory.nextLook = clock.now().addingTimeInterval(Self.recheck)
        set(.ready)
        logger.notice("the recovery key was entered: this NAS holds the account key", metadata: ["fingerprint": "\(state.fingerprint)"])
        if entered.repairKeyObject {
            let repair = RecoveryKeyFlows.repair(over: found != nil)
            do throws(KeyLookFailure) {
                try await perform(repair.decision, uid: uid, etag: found?.etag, finding: repair.finding)
            } catch {
                memory.nextLook = nil
                loop.wake()
            }
        } else {
            memory.lastETag = .some(found?.etag)
        }
        return state.fingerprint
    }

    /// `recovery-key --rotate`: the same account key wrapped by a new recovery key, which
    /// replaces the key object; the old recovery key opens nothing in the bucket afterwards.
    package func rotate(by caller: AuditActor) async throws(RecoveryKeyRefusal) -> ShownRecoveryKey {
        let shown = try await command("rotate", by: caller) { () async throws(RecoveryKeyRefusal) in try await self.rotateNow() }
        flows.record(.recoveryKeyRotated, caller, .ok, ["fingerprint": .string(shown.fingerprint)])
        return shown
    }

    private func rotateNow() async throws(RecoveryKeyRefusal) -> ShownRecoveryKey {
        let (pending, written) = try await startChange { self.memory.rotation(from: $0, to: .generate(), at: Self.millis(self.clock.now())) }
        memory.lastETag = .some(written)
        let state = RecoveryKeyFlows.rotated(pending)
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
        return ShownRecoveryKey(state, outdated: false)
    }

    /// Where a change of the keys starts (a rotation, a new account key), up to the key object
    /// the bucket took: the keys this NAS holds, nothing else under way, and the ETag of the
    /// key object the change replaces; then the key file says what is under way (`make`'s
    /// keys, pending) before the bucket is written. Another NAS wrote the key object
    /// meanwhile: the key file goes back. Any other failure leaves it unknown whether the
    /// bucket took it: the loop looks at once.
    private func startChange(_ make: (AccountKeyState) -> AccountKeyState) async throws(RecoveryKeyRefusal)
        -> (state: AccountKeyState, written: String) {
        let before = try memory.changeStart()
        let etag = try await flows.keyObjectETag(before.userId)
        let state = make(before)
        try keep(state)
        switch await flows.put(state, replacing: before, over: etag) {
        case .written(let written):
            return (state, written)
        case .lost:
            do throws(KeyLookFailure) { try save(before) } catch {
                // The pending marker stays: the loop settles it from the bucket.
                memory.nextLook = nil
            }
            throw .changedMeanwhile
        case .unknown(let why):
            memory.nextLook = nil
            loop.wake()
            throw .bucket(why)
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
        try await command("new-account-key", by: caller) { () async throws(RecoveryKeyRefusal) in
            try await self.startNewAccountKey(by: caller)
        }
    }

    private func startNewAccountKey(by caller: AuditActor) async throws(RecoveryKeyRefusal) -> NewAccountKey {
        let (state, written) = try await startChange {
            self.memory.newAccountKey(from: $0, accountKey: .generate(), recoveryKey: .generate(), at: Self.millis(self.clock.now()))
        }
        let marked = RecoveryKeyFlows.resealing(state) ?? state
        memory.transition = true
        keyChanges.changed()
        do throws(KeyLookFailure) {
            try save(marked)
            return try await finishNewAccountKey(state.userId, etag: written, by: caller)
        } catch {
            memory.nextLook = nil
            loop.wake()
            throw RecoveryKeyFlows.unfinished(error)
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
        let (total, written) = try await flows.reseal(uid, state, replacing: old, over: etag) { [weak self] sealed in
            // Awaited, not a task per device: progress lands in order, and none after the end.
            await self?.progress(sealed)
        }
        memory.lastETag = .some(written)
        state.pending = nil
        // The command prints the new recovery key; a start that finished a killed one did not.
        if caller != .daemon { state.recoveryShownAt = Self.millis(clock.now()) }
        try save(state)
        memory.transition = false
        memory.outdated = false
        set(.ready)
        keyChanges.changed()
        return flows.newAccountKey(state, replacing: old, total, by: caller)
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

    /// A command's change, run alone; a refusal is recorded in the audit trail as `action`'s.
    private func command<T: Sendable>(_ action: String, by caller: AuditActor,
                                      _ body: () async throws(RecoveryKeyRefusal) -> T) async throws(RecoveryKeyRefusal) -> T {
        do throws(RecoveryKeyRefusal) {
            return try await exclusive(body)
        } catch {
            throw flows.refuse(action, caller, error)
        }
    }

    /// Runs `body` alone: no other look, entry or rotation meanwhile (in call order).
    private func exclusive<T: Sendable, E: Error>(_ body: () async throws(E) -> T) async throws(E) -> T {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
        defer {
            if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
        }
        return try await body()
    }

    static func millis(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }
}
