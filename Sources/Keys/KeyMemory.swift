import Foundation
import Logging
import PhotolalaCore
import Vault

/// What the key service remembers of the signed-in account's key between looks, and what
/// follows from that alone. A value the actor holds privately, as it holds `KeyLookRetry`:
/// the actor keeps the awaits, the bucket and the key file, this the bookkeeping, so each
/// rule about the state reads the same wherever the actor applies it.
package struct KeyMemory: Sendable {
    /// The signed-in user the state below is for (nil: signed out).
    var user: String?
    /// The key file as last read or written for `user`; nil: none (or not read yet).
    var local: AccountKeyState?
    var loaded = false
    var phase: KeyStanding.Phase = .none
    var outdated = false
    /// The user whose account key this NAS made and no `login` has told of yet.
    var created: String?
    var lastError: String?
    var retry = KeyLookRetry()
    /// When the loop looks at the bucket again (nil: at once).
    var nextLook: Date?
    /// The highest generation a key object proven under this account key showed (a lower
    /// one coming back is an old copy put back).
    var seenGeneration: UInt64 = 0
    /// Why the key is `needed` when this NAS held one that no longer serves.
    var neededWhy: String?
    /// The last substitution of the key object found and written over (status attention
    /// `keyObjectReplaced` until a look an hour later finds the object as it was put back).
    var replaced: (at: Date, why: String)?
    /// The key object carries a previous account key: a new one is being put in place.
    var transition = false
    /// The key object's ETag at the last whole look (nil: none there).
    var lastETag: String??
    /// Objects sealed again so far by a new account key under way here.
    var resealed: Int?

    package init() {}

    /// What the phase and the key file mean to those who ask, as of now.
    package var standing: KeyStanding {
        KeyStanding(phase: phase, local: local, outdated: outdated, lastError: lastError, neededWhy: neededWhy,
                    replaced: replaced.map { (Timestamp.string($0.at), $0.why) }, transition: transition || resealed != nil,
                    resealed: resealed ?? (replacing ? 0 : nil))
    }

    /// The key file says a new account key is replacing the one before.
    private var replacing: Bool {
        if case .newAccountKey? = local?.pending { true } else { false }
    }

    /// Only for `current`, the account signed in now: the state may still be another's.
    package func metadataKey(signedIn current: String?) -> MetadataKeyState {
        guard let current, current == user else { return .none }
        if transition || resealed != nil || replacing, phase == .ready {
            return .unreadable(KeyService.transitionSentence)
        }
        return standing.metadataKey
    }

    package var recordWrap: SealedRecord.Wrap? {
        guard phase == .ready, !outdated, !transition, resealed == nil, let l = local, l.pending == nil else { return nil }
        return SealedRecord.Wrap(recovery: l.recoveryKey, createdAt: l.recoveryCreatedAt)
    }

    /// A sign-in, a sign-out or another account: start over for `current`.
    package mutating func follow(_ current: String?) {
        user = current
        local = nil
        loaded = false
        outdated = false
        nextLook = nil
        retry.restart()
        lastError = nil
        seenGeneration = 0
        neededWhy = nil
        replaced = nil
        transition = false
        lastETag = nil
    }

    /// Answers whether the phase changed.
    package mutating func set(_ next: KeyStanding.Phase) -> Bool {
        guard next != phase else { return false }
        phase = next
        return true
    }

    /// Answers whether the error changed.
    package mutating func setError(_ why: String?) -> Bool {
        guard why != lastError else { return false }
        lastError = why
        return true
    }

    /// A substitution noted an hour ago or more is forgotten once a look finds the key
    /// object as it was put back. Answers whether it was.
    mutating func settleReplaced(_ decision: KeyLifecycle.Decision, now: @autoclosure () -> Date) -> Bool {
        guard replaced != nil, !decision.replaced, case .ready = decision.state, let r = replaced,
              now().timeIntervalSince(r.at) >= KeyService.recheck else { return false }
        replaced = nil
        return true
    }

    /// What reaching a state says in the log, and whether the phase and the reason the
    /// key is needed are news to the feeds.
    package struct Reached {
        package var say: (level: Logger.Level, line: String)?
        package var phaseChanged = false
        package var needed = false
    }

    package mutating func reach(_ state: KeyLifecycle.Decision.State) -> Reached {
        var reached = Reached()
        switch state {
        case .ready(let stale):
            if stale && !outdated {
                reached.say = (.warning, "this NAS's recovery key no longer opens the key object (a new one was made on another NAS); the account key still serves")
            }
            outdated = stale
            reached.phaseChanged = set(.ready)
        case .needed(let why):
            if phase != .needed || neededWhy != why {
                reached.say = (.notice, why ?? "this account already has a recovery key: enter it with sudo photolalactl recovery-key --enter")
            }
            neededWhy = why
            reached.phaseChanged = set(.needed)
            reached.needed = true
        case .unreadable(let why):
            if phase != .unreadable(why) { reached.say = (.error, why) }
            reached.phaseChanged = set(.unreadable(why))
        case .create, .reseal:
            break
        }
        if case .needed = state {} else { neededWhy = nil }
        return reached
    }

    /// The key file a change cut short goes back to, with what the log says of it; nil:
    /// none was under way.
    package static func reverted(_ state: AccountKeyState, uid: String) -> (state: AccountKeyState, why: String)? {
        switch state.pending {
        case .rotating(let previous, let at)?:
            (AccountKeyState(userId: uid, accountKey: state.accountKey, recoveryKey: previous, recoveryCreatedAt: at,
                             generation: state.generation > 0 ? state.generation - 1 : 0),
             "a recovery key rotation was cut short: keeping the recovery key the bucket still holds")
        case .newAccountKey(let old)?:
            (AccountKeyState(userId: uid, accountKey: old.accountKey, recoveryKey: old.recoveryKey,
                             recoveryCreatedAt: old.recoveryCreatedAt, generation: old.generation),
             "a new account key never reached the bucket: keeping the account key it would have replaced")
        default:
            nil
        }
    }

    /// An entered key as the key file keeps it: its generation not below the one held of
    /// the same account key, and shown (the person who typed it has it).
    func entered(_ entered: AccountKeyState, shownAt: Int64) -> AccountKeyState {
        var state = entered
        if let held = local, held.accountKey == state.accountKey { state.generation = max(state.generation, held.generation) }
        state.recoveryShownAt = shownAt
        return state
    }

    /// An entered key now serves; the loop looks again at `nextLook`.
    mutating func adopted(outdated: Bool) {
        loaded = true
        self.outdated = outdated
        neededWhy = nil
        transition = false
    }

    /// A new account key being put in place here or elsewhere: no other change meanwhile.
    var changing: Bool { resealed != nil || (transition && phase == .ready) }

    /// The keys a change starts from: those this NAS holds, with nothing else under way.
    func changeStart() throws(RecoveryKeyRefusal) -> AccountKeyState {
        let before = try standing.held(signedIn: user != nil)
        if transition { throw .busy(KeyService.transitionSentence) }
        return before
    }

    /// The same account key wrapped by `next`, pending until the bucket has it.
    func rotation(from before: AccountKeyState, to next: RecoveryKey, at: Int64) -> AccountKeyState {
        AccountKeyState(userId: before.userId, accountKey: before.accountKey, recoveryKey: next, recoveryCreatedAt: at,
                        pending: .rotating(previous: before.recoveryKey, previousCreatedAt: before.recoveryCreatedAt),
                        generation: max(before.generation, seenGeneration) + 1)
    }

    /// A new account key and recovery key replacing `before`'s, pending until every object is
    /// sealed again under them.
    func newAccountKey(from before: AccountKeyState, accountKey: AccountKey, recoveryKey: RecoveryKey, at: Int64) -> AccountKeyState {
        let old = AccountKeyState.Replaced(accountKey: before.accountKey, recoveryKey: before.recoveryKey,
                                           recoveryCreatedAt: before.recoveryCreatedAt, generation: before.generation)
        return AccountKeyState(userId: before.userId, accountKey: accountKey, recoveryKey: recoveryKey, recoveryCreatedAt: at,
                               pending: .newAccountKey(old), generation: max(before.generation, seenGeneration) + 1)
    }

    /// Answers whether the count is news (nil: no reseal under way here, none counted).
    mutating func progress(_ sealed: Int) -> Bool {
        guard resealed != nil else { return false }
        resealed = sealed
        return true
    }

    /// `logout` forgot the key.
    mutating func forgotten() {
        user = nil
        loaded = false
        created = nil
        outdated = false
        nextLook = nil
    }

    /// Told once: the next sign-in of the same account made nothing.
    package mutating func outcome(for userId: String) -> KeySignInOutcome? {
        guard user == userId, let outcome = standing.signInOutcome(madeHere: created == userId) else { return nil }
        if outcome.created { created = nil }
        return outcome
    }

    /// Why `logout` must not forget `held` (nil: it may). A key another NAS rotated since
    /// (`outdated`) is not held back: the account's current recovery key was shown there.
    func logoutHold(_ held: AccountKeyState?) -> String? {
        guard let held, held.recoveryShownAt == nil, !(loaded && outdated) else { return nil }
        return KeyService.logoutHoldSentence(held)
    }

    /// The key file to write once `state`'s recovery key reached a person: nil when it is
    /// not the one held, or was noted already.
    func shown(_ state: AccountKeyState, at: Int64) -> AccountKeyState? {
        guard var current = local, current.recoveryKey == state.recoveryKey, current.recoveryShownAt == nil else { return nil }
        current.recoveryShownAt = at
        return current
    }
}
