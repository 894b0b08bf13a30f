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
    /// How often a settled state is checked against the bucket again: a deleted key object
    /// is written again, a rotation elsewhere noticed, an unreadable account looked at anew.
    static let recheck: TimeInterval = 3600
    static let recheckUnreadable: TimeInterval = 900
    /// The service's tests count a store's refusals by the service's own number.
    static let conflictsInARow = KeyLookRetry.conflictsInARow

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
    private var phase: KeyStanding.Phase = .none
    private var outdated = false
    /// The user whose account key this NAS made and no `login` has told of yet.
    private var created: String?
    private var lastError: String?
    private var retry = KeyLookRetry()
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

    /// Only for the account signed in now: the state below may still be another's.
    package func metadataKeyState() async -> MetadataKeyState {
        let current = await grants.userId
        guard let current, current == user else { return .none }
        return standing.metadataKey
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
        do throws(KeyLookFailure) {
            try await resolve(uid)
            retry.succeeded()
            setError(nil)
            // From the time the look ended: the bucket's answers (and retries) took some.
            let at = clock.now().addingTimeInterval(phase == .ready || phase == .needed ? Self.recheck : Self.recheckUnreadable)
            nextLook = at
            return .wait(until: at)
        } catch {
            switch retry.failed(error, random: .random(in: 0..<1)) {
            case .now: return .now
            case .wake: return .wake
            case .after(let delay, let why):
                let at = clock.now().addingTimeInterval(delay)
                nextLook = at
                if lastError != why { logger.warning("\(why); trying again at \(Timestamp.string(at))") }
                setError(why)
                return .wait(until: at)
            }
        }
    }

    /// A sign-in, a sign-out or another account: start over for `current`.
    private func follow(_ current: String?) {
        user = current
        local = nil
        loaded = false
        outdated = false
        nextLook = nil
        retry.restart()
        lastError = nil
        set(current == nil ? .none : .checking)
        keyChanges.changed()
        statusChanges.changed()
    }

    /// Reads the key file, asks the bucket, and performs `KeyLifecycle`'s answer.
    private func resolve(_ uid: String) async throws(KeyLookFailure) {
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
                throw KeyLookFailure(error)
            }
        }
        var decision = KeyLifecycle.decide(local: KeyLifecycle.Local(local), finding: finding)
        if decision.state == .create {
            try make(uid)
            decision = KeyLifecycle.decide(local: .creating, finding: .missing(otherKeyMaterial: false))
        }
        try await perform(decision, uid: uid, etag: object?.etag)
    }

    private func perform(_ decision: KeyLifecycle.Decision, uid: String, etag: String?) async throws(KeyLookFailure) {
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
                throw KeyLookFailure(error)
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
    private func make(_ uid: String) throws(KeyLookFailure) {
        let state = AccountKeyState(userId: uid, accountKey: .generate(), recoveryKey: .generate(),
                                    recoveryCreatedAt: Self.millis(clock.now()), pending: .creating)
        remember(state)
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
        local = state
    }

    private func erase() throws(KeyLookFailure) {
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
            let state = try standing.held(signedIn: user != nil)
            record(.recoveryKeyShown, caller, .ok, ["fingerprint": .string(state.fingerprint), "outdated": .bool(outdated)])
            return ShownRecoveryKey(state, outdated: outdated)
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
        do throws(KeyLookFailure) {
            guard let found = try await keyObject(uid) else { return .failure(.noKeyObject) }
            bytes = found.bytes
        } catch .unavailable {
            return .failure(.notSignedIn)
        } catch {
            return .failure(.bucket("cannot read this account's key object from the bucket (\(error)); nothing was changed: try again"))
        }
        let state: AccountKeyState
        do throws(RecoveryKeyRefusal) {
            state = try KeyLifecycle.entered(recovery, opening: bytes, userId: uid)
        } catch {
            return .failure(error)
        }
        if let held = local, held.accountKey != state.accountKey {
            logger.warning("the entered recovery key opens another account key than the one this NAS held: taking the bucket's",
                           metadata: ["was": "\(held.fingerprint)"])
        }
        remember(state)
        do throws(KeyLookFailure) {
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
            before = try standing.held(signedIn: user != nil)
        } catch {
            return .failure(error)
        }
        let uid = before.userId
        let etag: String?
        do throws(KeyLookFailure) {
            etag = try await keyObject(uid)?.etag
        } catch {
            return .failure(.bucket("cannot read this account's key object from the bucket (\(error)); nothing was changed: try again"))
        }
        let next = RecoveryKey.generate()
        let at = Self.millis(clock.now())
        var state = AccountKeyState(userId: uid, accountKey: before.accountKey, recoveryKey: next, recoveryCreatedAt: at,
                                    pending: .rotating(previous: before.recoveryKey, previousCreatedAt: before.recoveryCreatedAt))
        remember(state)
        do throws(KeyLookFailure) {
            try save(state)
        } catch {
            return .failure(.local("\(error); nothing was changed"))
        }
        let object = KeyObject.wrap(before.accountKey, recoveryCreatedAt: at, recovery: next, userId: uid)
        do throws(S3Error) {
            try await bucket.putKeyObject(object, uid: uid, ifMatch: etag)
        } catch {
            if error.kind == .preconditionFailed || error.kind == .notFound {
                do throws(KeyLookFailure) { try save(before) } catch {
                    // The pending marker stays: the loop settles it from the bucket.
                    nextLook = nil
                }
                return .failure(.changedMeanwhile)
            }
            // Whether the bucket took it is unknown: the loop finds out which recovery key
            // the key object opens with, and keeps that one.
            nextLook = nil
            loop.wake()
            return .failure(.bucket("the new recovery key may not have reached the bucket (\(error)): photolalad keeps whichever "
                + "recovery key the bucket's key object opens with; run `sudo photolalactl recovery-key` in a minute to see it"))
        }
        state.pending = nil
        do throws(KeyLookFailure) {
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
        return .success(ShownRecoveryKey(state, outdated: false))
    }

    /// `logout`: this NAS forgets the account key with the sign-in (the device id stays).
    /// Answers a sentence when the key file could not be erased.
    package func forget() async -> String? {
        await exclusive { () async -> String? in
            let had = self.local != nil || self.loaded == false
            do throws(KeyLookFailure) {
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
        loop.wake()
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

    /// Told once: the next sign-in of the same account made nothing.
    private func outcome(for userId: String) -> KeySignInOutcome? {
        guard user == userId, let outcome = standing.signInOutcome(madeHere: created == userId) else { return nil }
        if outcome.created { created = nil }
        return outcome
    }

    // MARK: status

    package func contribute(to s: inout DaemonStatus) {
        s.recovery = standing.recovery
    }

    // MARK: helpers

    /// What the phase and the key file mean to those who ask, as of now.
    private var standing: KeyStanding {
        KeyStanding(phase: phase, local: local, outdated: outdated, lastError: lastError)
    }

    private func set(_ next: KeyStanding.Phase) {
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
