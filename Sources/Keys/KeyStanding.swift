import PhotolalaCore
import Vault

/// Where this NAS stands with the account key, and what that answers each one who asks:
/// the manifest (`metadataKey`), `recovery-key` and `--rotate` (`held`), `login`'s hint
/// (`signInOutcome`) and the status (`recovery`). A pure value: the key service keeps the
/// phase and the key file, and asks this what they mean, so every asker gets the same
/// reading of a key being made, rotated or checked.
package struct KeyStanding: Sendable, Equatable {
    package enum Phase: Sendable, Equatable {
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

    var phase: Phase
    /// The key file as last read or written; nil: none (or not read yet).
    var local: AccountKeyState?
    /// This NAS's recovery key no longer opens the key object (rotated elsewhere).
    var outdated = false
    /// The last look's failure, while it is retried.
    var lastError: String?
    /// Why the key is needed when this NAS held one that no longer serves (nil: the usual).
    var neededWhy: String?
    /// When the key object was last found replaced and written over, and the sentence.
    var replaced: (at: String, why: String)?
    /// A new account key is being put in place (here, or elsewhere).
    var transition = false
    /// Objects sealed again so far, while a new account key is put in place here.
    var resealed: Int?

    package static func == (a: KeyStanding, b: KeyStanding) -> Bool {
        a.phase == b.phase && a.local == b.local && a.outdated == b.outdated && a.lastError == b.lastError && a.neededWhy == b.neededWhy
            && a.replaced?.at == b.replaced?.at && a.replaced?.why == b.replaced?.why && a.transition == b.transition
            && a.resealed == b.resealed
    }

    /// `.ready` only once the bucket confirmed the key (a key being made may still lose to
    /// another NAS's): until then `.none`, and the manifest waits as it does while signed out.
    package var metadataKey: MetadataKeyState {
        switch phase {
        case .none, .checking: .none
        case .ready: local.map { .ready($0.accountKey) } ?? .none
        case .needed: .needed
        case .unreadable(let why): .unreadable(why)
        }
    }

    /// The key file's state, if it is settled enough to show or rotate: a key still being
    /// made or replaced may yet be dropped, and showing it would hand out a key that opens nothing.
    package func held(signedIn: Bool) throws(RecoveryKeyRefusal) -> AccountKeyState {
        guard signedIn else { throw .notSignedIn }
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
        case .newAccountKey?:
            throw .notYet("a new account key is being put in place (every object of the account is sealed again): try again "
                + "once `photolalactl status` says it is done; the new recovery key is shown then")
        }
    }

    /// What `login` is told; nil: not settled yet. `madeHere`: this NAS made the account's
    /// key for this sign-in, which counts only once the bucket confirmed it. Still `checking`
    /// after a look failed: the bucket is failing, and `login` says to watch the status
    /// rather than wait out its time.
    package func signInOutcome(madeHere: Bool) -> KeySignInOutcome? {
        switch phase {
        case .none: nil
        case .checking: lastError == nil ? nil : KeySignInOutcome(created: false, state: .checking)
        default: KeySignInOutcome(created: madeHere && phase == .ready, state: phase.state)
        }
    }

    /// The status's `recovery`: a fingerprint only for a key in hand, and a sentence for
    /// every state that asks something of the user.
    package var recovery: DaemonStatus.Recovery {
        var r = DaemonStatus.Recovery(state: phase.state, lastError: lastError)
        r.keyObjectReplaced = replaced?.why
        r.replacedAt = replaced?.at
        switch phase {
        case .ready:
            r.fingerprint = local?.fingerprint
            r.outdated = outdated
            r.resealed = resealed
            if let resealed {
                r.message = "A new account key is being put in place: \(resealed) objects of the account's manifests sealed again so "
                    + "far. The new recovery key is shown once it is done."
            } else if transition {
                r.message = "A new account key is being put in place on another NAS of this account: this NAS's manifest waits "
                    + "until it is done."
            } else if outdated {
                r.message = KeyLifecycle.outdatedSentence
            }
        case .needed:
            r.message = neededWhy ?? KeyLifecycle.neededSentence
        case .unreadable(let why):
            r.message = why
        case .checking:
            r.message = "Checking the bucket for this account's key."
        case .none:
            break
        }
        return r
    }
}
