/// Keys: the account key and the recovery key on this NAS (privacy.md): made at the first
/// sign-in of an account that has none, asked for on every other NAS, rotated on demand.
import Bucket
import Foundation
import Logging
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
    private enum Phase: Equatable {
        case none, checking, ready, needed
        case unreadable(String)

        var state: DaemonStatus.Recovery.State {
            switch self {
            case .none: .none
            case .checking: .checking
            case .ready: .ready
            case .needed: .needed
            case .unreadable: .unreadable
            }
        }
    }

    /// Why a look ended early.
    private enum LookFailure: Error {
        /// The bucket changed under a conditional write: look again at once (up to
        /// `conflictsInARow` times; more is a store that does not honour the condition, as
        /// Ceph Pacific refuses a quoted `If-Match` that holds: then backoff, not a spin).
        case again
        /// No grant (signed out, paused, stopping): wait for the account to change.
        case unavailable
        case bucket(S3Error)
        /// The key file cannot be written (its sentence).
        case local(String)
    }

    /// How often a settled state is checked against the bucket again: a deleted key object
    /// is written again, a rotation elsewhere noticed, an unreadable account looked at anew.
    static let recheck: TimeInterval = 3600
    static let recheckUnreadable: TimeInterval = 900
    /// A race lost is looked at again at once; this many in a row is the store, not a race.
    static let conflictsInARow = 3

    package nonisolated let keyChanges = ChangeFeed()
    private let statusChanges: ChangeFeed
    private let store: AccountKeyStore
    private let grants: any GrantSource
    private let bucket: KeyBucket
    private let clock: any DaemonClock
    private let logger: Logger
    private let audit: (any AuditRecorder)?
    private let loop: StageLoop

    /// The signed-in user the state below is for (nil: signed out).
    private var user: String?
    /// The key file as last read or written for `user`; nil: none (or not read yet).
    private var local: AccountKeyState?
    private var loaded = false
    private var phase: Phase = .none
    private var outdated = false
    /// The user whose account key this NAS made and no `login` has told of yet.
    private var created: String?
    private var lastError: String?
    private var retry = Backoff(base: 2, cap: 300, jitter: .equal, floor: 1)
    /// Conditional writes refused since the last look that ended well.
    private var conflicts = 0
    /// When the loop looks at the bucket again (nil: at once).
    private var nextLook: Date?
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

    /// `.ready` only for the account signed in now, and only once the bucket confirmed the
    /// key (a key being made may still lose to another NAS's): until then `.none`, and the
    /// manifest waits as it does while signed out.
    package func metadataKeyState() async -> MetadataKeyState {
        let current = await grants.userId
        guard let current, current == user else { return .none }
        switch phase {
        case .none, .checking: return .none
        case .ready: return local.map { .ready($0.accountKey) } ?? .none
        case .needed: return .needed
        case .unreadable(let why): return .unreadable(why)
        }
    }

    // MARK: the loop

    /// One look, when due: answers when to look again.
    package func step() async -> StageLoop.Next {
        await exclusive { await self.look() }
    }

    private func look() async -> StageLoop.Next {
        let current = await grants.userId
        if current != user { follow(current) }
        guard let uid = current else { return .wake }
        let now = clock.now()
        if let at = nextLook, at > now { return .wait(until: at) }
        do throws(LookFailure) {
            try await resolve(uid)
            retry.reset()
            conflicts = 0
            setError(nil)
            // From the time the look ended: the bucket's answers (and retries) took some.
            let at = clock.now().addingTimeInterval(phase == .ready || phase == .needed ? Self.recheck : Self.recheckUnreadable)
            nextLook = at
            return .wait(until: at)
        } catch .again where conflicts + 1 < Self.conflictsInARow {
            conflicts += 1
            return .now
        } catch .unavailable {
            return .wake
        } catch {
            let why: String
            switch error {
            case .bucket(let e): why = "cannot check this account's key in the bucket: \(e)"
            case .local(let m): why = m
            case .again:
                conflicts = 0
                why = "the bucket refused \(Self.conflictsInARow) conditional writes of this account's key object in a row "
                    + "although nothing else seems to write it: does this S3 store honour If-Match and If-None-Match?"
            case .unavailable: why = "\(error)"
            }
            let at = clock.now().addingTimeInterval(retry.fail(random: .random(in: 0..<1)))
            nextLook = at
            if lastError != why { logger.warning("\(why); trying again at \(Timestamp.string(at))") }
            setError(why)
            return .wait(until: at)
        }
    }

    /// A sign-in, a sign-out or another account: start over for `current`.
    private func follow(_ current: String?) {
        user = current
        local = nil
        loaded = false
        outdated = false
        nextLook = nil
        retry.reset()
        lastError = nil
        set(current == nil ? .none : .checking)
        keyChanges.changed()
        statusChanges.changed()
    }

    /// Reads the key file, asks the bucket, and performs `KeyLifecycle`'s answer.
    private func resolve(_ uid: String) async throws(LookFailure) {
        if !loaded {
            do {
                local = try store.load()
            } catch {
                // Never replaced behind the user's back: it may hold the only copy.
                set(.unreadable("This NAS's key file cannot be read: \(error)"))
                return
            }
            if let l = local, l.userId != uid {
                // Signing in to another account replaces the sign-in, as a logout would have.
                logger.notice("the key file belongs to another account: erasing it for this sign-in",
                              metadata: ["fingerprint": "\(l.fingerprint)"])
                try erase()
            }
            loaded = true
            if let l = local { remember(l) }
        }
        // A confirmed key serves at once, before the bucket answers (a rotation cut short
        // keeps the same account key).
        if let l = local, l.pending != .creating { set(.ready) }
        let object = try await keyObject(uid)
        var finding = object.map { KeyLifecycle.finding($0.bytes, holding: local, userId: uid) } ?? .missing(otherKeyMaterial: false)
        if case .missing = finding, KeyLifecycle.Local(local) == .nothing || KeyLifecycle.Local(local) == .creating {
            do throws(S3Error) {
                finding = .missing(otherKeyMaterial: try await bucket.hasKeyMaterial(uid))
            } catch {
                throw Self.failure(error)
            }
        }
        var decision = KeyLifecycle.decide(local: KeyLifecycle.Local(local), finding: finding)
        if decision.state == .create {
            try make(uid)
            decision = KeyLifecycle.decide(local: .creating, finding: .missing(otherKeyMaterial: false))
        }
        try await perform(decision, uid: uid, etag: object?.etag)
    }

    private func perform(_ decision: KeyLifecycle.Decision, uid: String, etag: String?) async throws(LookFailure) {
        guard var state = local else {
            reach(decision.state)
            return
        }
        let wasCreating = state.pending == .creating
        switch decision.local {
        case .revert:
            if case .rotating(let previous, let at)? = state.pending {
                logger.notice("a recovery key rotation was cut short: keeping the recovery key the bucket still holds")
                state = AccountKeyState(userId: uid, accountKey: state.accountKey, recoveryKey: previous, recoveryCreatedAt: at)
                try save(state)
            }
        case .erase:
            try erase()
            logger.notice(decision.state == .needed
                ? "another NAS made this account's key first: this NAS dropped its own and asks for the recovery key"
                : "the account already has encrypted objects: this NAS dropped the key it was making")
        case .keep, .confirm:
            break
        }
        if decision.upload != .none, let state = local {
            let object = KeyObject.wrap(state.accountKey, recoveryCreatedAt: state.recoveryCreatedAt, recovery: state.recoveryKey,
                                        userId: uid)
            let replace = decision.upload == .repair ? etag : nil
            do throws(S3Error) {
                try await bucket.putKeyObject(object, uid: uid, ifMatch: replace)
            } catch {
                // Someone wrote the key object meanwhile (or our own write answered late):
                // look again, and the lifecycle decides with what is there now.
                if error.kind == .preconditionFailed || error.kind == .notFound { throw .again }
                throw Self.failure(error)
            }
            if !wasCreating {
                logger.notice(decision.upload == .repair ? "the key object in the bucket was damaged: written again"
                                                         : "the key object was missing from the bucket: written again")
            }
        }
        if decision.local == .confirm, var confirmed = local {
            confirmed.pending = nil
            try save(confirmed)
            if wasCreating {
                created = uid
                logger.notice("made this account's key; keep its recovery key somewhere other than this NAS (sudo photolalactl recovery-key)",
                              metadata: ["fingerprint": "\(confirmed.fingerprint)"])
            } else {
                logger.notice("the new recovery key is in place", metadata: ["fingerprint": "\(confirmed.fingerprint)"])
            }
        }
        reach(decision.state)
    }

    private func reach(_ state: KeyLifecycle.Decision.State) {
        switch state {
        case .ready(let stale):
            if stale && !outdated {
                logger.warning("this NAS's recovery key no longer opens the key object (a new one was made on another NAS); the account key still serves")
            }
            outdated = stale
            set(.ready)
        case .needed:
            if phase != .needed { logger.notice("this account already has a recovery key: enter it with sudo photolalactl recovery-key --enter") }
            set(.needed)
        case .unreadable(let why):
            if phase != .unreadable(why) { logger.error("\(why)") }
            set(.unreadable(why))
        case .create:
            break
        }
    }

    /// A new account key and recovery key, saved as `creating` before anything is sent.
    private func make(_ uid: String) throws(LookFailure) {
        let state = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(),
                                    recoveryCreatedAt: Self.millis(clock.now()), pending: .creating)
        remember(state)
        try save(state)
        logger.notice("the account has no key yet: making one", metadata: ["fingerprint": "\(state.fingerprint)"])
    }

    private static func failure(_ error: S3Error) -> LookFailure {
        switch error.kind {
        case .unavailable, .cancelled: .unavailable
        default: .bucket(error)
        }
    }

    private func keyObject(_ uid: String) async throws(LookFailure) -> (bytes: [UInt8], etag: String)? {
        do throws(S3Error) {
            return try await bucket.keyObject(uid)
        } catch {
            throw Self.failure(error)
        }
    }

    // MARK: the key file

    private func save(_ state: AccountKeyState) throws(LookFailure) {
        do {
            try store.save(state)
        } catch {
            throw .local("cannot save this NAS's key file: \(error)")
        }
        local = state
    }

    private func erase() throws(LookFailure) {
        do {
            try store.erase()
        } catch {
            throw .local("cannot erase this NAS's key file: \(error)")
        }
        local = nil
    }

    /// Every form a secret could be printed in, known to the redactor before any use.
    private func remember(_ state: AccountKeyState) {
        var keys = [state.recoveryKey]
        if case .rotating(let previous, _)? = state.pending { keys.append(previous) }
        for key in keys {
            SecretRedactor.shared.register(key.formatted)
            SecretRedactor.shared.register(key.formatted.replacingOccurrences(of: "-", with: ""))
        }
        SecretRedactor.shared.register(Data(state.accountKey.bytes).base64EncodedString())
    }

    // MARK: recovery-key (the control socket)

    /// `recovery-key`: the key as this NAS holds it. Recorded in the audit trail (never the key).
    package func recoveryKey(by caller: AuditActor) throws(RecoveryKeyRefusal) -> ShownRecoveryKey {
        do throws(RecoveryKeyRefusal) {
            let state = try held()
            record(.recoveryKeyShown, caller, .ok, ["fingerprint": .string(state.fingerprint), "outdated": .bool(outdated)])
            return ShownRecoveryKey(recoveryKey: state.recoveryKey, fingerprint: state.fingerprint,
                         createdAt: Date(timeIntervalSince1970: Double(state.recoveryCreatedAt) / 1000), outdated: outdated)
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
        SecretRedactor.shared.register(recovery.formatted)
        SecretRedactor.shared.register(recovery.formatted.replacingOccurrences(of: "-", with: ""))
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
        if current != user { follow(current) }
        guard let uid = current else { return .failure(.notSignedIn) }
        let bytes: [UInt8]
        do throws(LookFailure) {
            guard let found = try await keyObject(uid) else { return .failure(.noKeyObject) }
            bytes = found.bytes
        } catch .unavailable {
            return .failure(.notSignedIn)
        } catch {
            return .failure(.bucket("cannot read this account's key object from the bucket (\(error)); nothing was changed: try again"))
        }
        let opened: (key: AccountKey, recoveryCreatedAt: Int64)
        do throws(VaultFailure) {
            opened = try KeyObject.unwrap(bytes, recovery: recovery, userId: uid)
        } catch .wrongRecoveryKey {
            return .failure(.wrongKey)
        } catch {
            return .failure(.notHeld("\(error). Nothing was changed."))
        }
        if let held = local, held.accountKey != opened.key {
            logger.warning("the entered recovery key opens another account key than the one this NAS held: taking the bucket's",
                           metadata: ["was": "\(held.fingerprint)"])
        }
        let state = AccountKeyState(userId: uid, accountKey: opened.key, recoveryKey: recovery, recoveryCreatedAt: opened.recoveryCreatedAt)
        remember(state)
        do throws(LookFailure) {
            try save(state)
        } catch {
            return .failure(.local("\(error); nothing was changed"))
        }
        loaded = true
        outdated = false
        setError(nil)
        nextLook = clock.now().addingTimeInterval(Self.recheck)
        set(.ready)
        logger.notice("the recovery key was entered: this NAS holds the account key", metadata: ["fingerprint": "\(state.fingerprint)"])
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

    private func rotateNow() async -> Result<ShownRecoveryKey, RecoveryKeyRefusal> {
        let before: AccountKeyState
        do throws(RecoveryKeyRefusal) {
            before = try held()
        } catch {
            return .failure(error)
        }
        let uid = before.userId
        let etag: String?
        do throws(LookFailure) {
            etag = try await keyObject(uid)?.etag
        } catch {
            return .failure(.bucket("cannot read this account's key object from the bucket (\(error)); nothing was changed: try again"))
        }
        let next = RecoveryKey.generate()
        let at = Self.millis(clock.now())
        var state = AccountKeyState(userId: uid, accountKey: before.accountKey, recoveryKey: next, recoveryCreatedAt: at,
                                    pending: .rotating(previous: before.recoveryKey, previousCreatedAt: before.recoveryCreatedAt))
        remember(state)
        do throws(LookFailure) {
            try save(state)
        } catch {
            return .failure(.local("\(error); nothing was changed"))
        }
        let object = KeyObject.wrap(before.accountKey, recoveryCreatedAt: at, recovery: next, userId: uid)
        do throws(S3Error) {
            try await bucket.putKeyObject(object, uid: uid, ifMatch: etag)
        } catch {
            if error.kind == .preconditionFailed || error.kind == .notFound {
                do throws(LookFailure) { try save(before) } catch {
                    // The pending marker stays: the loop settles it from the bucket.
                    nextLook = nil
                }
                return .failure(.changedMeanwhile)
            }
            // Whether the bucket took it is unknown: the loop finds out which recovery key
            // the key object opens with, and keeps that one.
            nextLook = nil
            await loop.wake()
            return .failure(.bucket("the new recovery key may not have reached the bucket (\(error)): photolalad keeps whichever "
                + "recovery key the bucket's key object opens with; run `sudo photolalactl recovery-key` in a minute to see it"))
        }
        state.pending = nil
        do throws(LookFailure) {
            try save(state)
        } catch {
            // The bucket has the new key; the file still says "rotating", which the next
            // start settles to the same new key.
            logger.error("\(error)")
            local = state
        }
        outdated = false
        set(.ready)
        logger.notice("the recovery key was replaced: the previous one opens nothing in the bucket any more",
                      metadata: ["fingerprint": "\(state.fingerprint)"])
        return .success(ShownRecoveryKey(recoveryKey: next, fingerprint: state.fingerprint,
                              createdAt: Date(timeIntervalSince1970: Double(at) / 1000), outdated: false))
    }

    /// The key file's state, if it is settled enough to show or rotate.
    private func held() throws(RecoveryKeyRefusal) -> AccountKeyState {
        guard user != nil else { throw .notSignedIn }
        switch phase {
        case .none: throw .notSignedIn
        case .needed:
            throw .notHeld("this NAS does not hold this account's recovery key yet: enter it here with `sudo photolalactl "
                + "recovery-key --enter` (on a NAS that holds it, `sudo photolalactl recovery-key` shows it)")
        case .unreadable(let why): throw .notHeld(why)
        case .checking, .ready: break
        }
        guard let state = local, phase == .ready else {
            throw .notYet("photolalad is still checking this account's key in the bucket: try again in a moment")
        }
        switch state.pending {
        case nil: return state
        case .creating?: throw .notYet("this account's key is being made: try again in a moment")
        case .rotating?: throw .notYet("a new recovery key is being put in place: try again in a moment")
        }
    }

    /// `logout`: this NAS forgets the account key with the sign-in (the device id stays).
    /// Answers a sentence when the key file could not be erased.
    package func forget() async -> String? {
        await exclusive { () async -> String? in
            let had = self.local != nil || self.loaded == false
            do throws(LookFailure) {
                try self.erase()
            } catch {
                self.logger.error("\(error)")
                return "\(error)"
            }
            self.user = nil
            self.loaded = false
            self.created = nil
            self.outdated = false
            self.nextLook = nil
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
        await loop.wake()
        let clock = self.clock
        let deadline = clock.now().addingTimeInterval(seconds)
        return await withTaskGroup(of: KeySignInOutcome?.self) { group in
            group.addTask {
                for await _ in changes {
                    if let outcome = await self.outcome(for: userId) { return outcome }
                }
                return nil
            }
            group.addTask {
                try? await clock.sleep(until: deadline)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// Told once: the next sign-in of the same account made nothing. Still `checking`
    /// after a look failed: the bucket is failing, and `login` says to watch the status
    /// rather than wait out its time.
    private func outcome(for userId: String) -> KeySignInOutcome? {
        guard user == userId, phase != .none else { return nil }
        if phase == .checking { return lastError == nil ? nil : KeySignInOutcome(created: false, state: .checking) }
        let made = created == userId && phase == .ready
        if made { created = nil }
        return KeySignInOutcome(created: made, state: phase.state)
    }

    // MARK: status

    package func contribute(to s: inout DaemonStatus) {
        var r = DaemonStatus.Recovery(state: phase.state, lastError: lastError)
        switch phase {
        case .ready:
            r.fingerprint = local?.fingerprint
            r.outdated = outdated
            if outdated {
                r.message = KeyLifecycle.outdatedSentence
            }
        case .needed:
            r.message = KeyLifecycle.neededSentence
        case .unreadable(let why):
            r.message = why
        case .checking:
            r.message = "Checking the bucket for this account's key."
        case .none:
            break
        }
        s.recovery = r
    }

    // MARK: helpers

    private func set(_ next: Phase) {
        guard next != phase else { return }
        phase = next
        keyChanges.changed()
        statusChanges.changed()
    }

    private func setError(_ why: String?) {
        guard why != lastError else { return }
        lastError = why
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
