import Foundation
import PhotolalaCore
import Vault

/// What `recovery-key` and `--rotate` show.
package struct ShownRecoveryKey: Sendable, Equatable {
    package var recoveryKey: RecoveryKey
    package var fingerprint: String
    package var createdAt: Date
    /// This copy no longer opens the bucket's key object (rotated on another NAS).
    package var outdated: Bool

    /// The recovery key `state` holds; the key file keeps its creation in milliseconds.
    init(_ state: AccountKeyState, outdated: Bool) {
        recoveryKey = state.recoveryKey
        fingerprint = state.fingerprint
        createdAt = Date(timeIntervalSince1970: Double(state.recoveryCreatedAt) / 1000)
        self.outdated = outdated
    }
}

extension KeyService {
    /// What `--new-account-key` did: the new recovery key shown, and how many objects of
    /// how many devices were sealed again.
    package struct NewAccountKey: Sendable, Equatable {
        package var shown: ShownRecoveryKey
        package var previousFingerprint: String
        package var sealed: Int
        package var devices: Int
        /// Objects that opened under neither key, left as they were.
        package var unreadable: [String]
    }
}

/// How a sign-in left the key, for `login`'s hint: made here (keep the recovery key), or
/// in any other state (`ready`, `needed`, `unreadable`).
package struct KeySignInOutcome: Sendable, Equatable {
    package var created: Bool
    package var state: DaemonStatus.Recovery.State
}

/// Why a `recovery-key` call (show, `--enter`, `--rotate`) changed nothing; each sentence
/// says what to do. The wire's error code is `code`; the audit trail records it as the reason.
package enum RecoveryKeyRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    case notSignedIn
    /// The key is being made, checked or rotated: asked again in a moment, it answers.
    case notYet(String)
    /// This NAS does not hold the key (needed, unreadable); the sentence says why.
    case notHeld(String)
    /// Not a recovery key as typed (a character, the length, or the check: a typo).
    case malformed(RecoveryKey.ParseError)
    /// A well-formed key that does not open the account key.
    case wrongKey
    /// The bucket has no key object to check a key against.
    case noKeyObject
    /// The key object changed while a rotation was under way.
    case changedMeanwhile
    /// This NAS holds the account key, and the key entered opens another one (its fingerprint
    /// is this NAS's): `logout` first to take another.
    case otherAccountKey(String)
    /// The key opens the bucket's key object, but no device record of the account opens with
    /// the key it holds: the key object was replaced.
    case keyObjectReplaced
    /// The key opens an account key that a new one replaced (`--new-account-key`).
    case superseded
    /// A new account key is being put in place: `--rotate` waits for it.
    case busy(String)
    /// The bucket could not be reached; `pending`: a rotation whose outcome is unknown.
    case bucket(String)
    /// The key file could not be written.
    case local(String)

    /// The wire's error code.
    package var code: String {
        switch self {
        case .notSignedIn: "not_signed_in"
        case .notYet: "not_yet"
        case .notHeld: "not_held"
        case .malformed(.typo): "typo"
        case .malformed: "malformed"
        case .wrongKey: "wrong_key"
        case .noKeyObject: "no_key_object"
        case .otherAccountKey: "other_account_key"
        case .keyObjectReplaced: "key_object_replaced"
        case .superseded: "superseded"
        case .busy: "busy"
        case .changedMeanwhile: "changed"
        case .bucket: "bucket"
        case .local: "local"
        }
    }

    package var description: String {
        switch self {
        case .notSignedIn:
            "this NAS is not signed in: sign in first (sudo photolalactl login)"
        case .notYet(let why), .notHeld(let why), .bucket(let why), .local(let why), .busy(let why):
            why
        case .malformed(let why):
            why.description
        case .wrongKey:
            "this recovery key is well formed but does not open this account's key: it belongs to another account or "
                + "was replaced by `recovery-key --rotate` (use the newest one: `sudo photolalactl recovery-key` on a NAS "
                + "that holds the key shows it). Nothing was changed."
        case .noKeyObject:
            "the bucket holds no key object for this account, so there is nothing to check the key against: on a NAS "
                + "that holds the account key, restart photolalad (it writes the key object again), then enter the key here. "
                + "Nothing was changed."
        case .otherAccountKey(let fingerprint):
            "this NAS already holds the account's key (fingerprint \(fingerprint)); the key entered opens another one; nothing was "
                + "changed. To take another account's key here, sign out first (sudo photolalactl logout), then sign in and enter it."
        case .keyObjectReplaced:
            "this recovery key opens the bucket's key object, but none of this account's device manifests opens with the key it "
                + "holds: the key object was replaced by someone else. Enter the recovery key you were shown (sudo photolalactl "
                + "recovery-key on a NAS of this account shows it). Nothing was changed."
        case .superseded:
            "this recovery key opens an account key that was replaced by a new one (recovery-key --rotate --new-account-key): "
                + "enter the new recovery key (sudo photolalactl recovery-key on the NAS that made it shows it). Nothing was changed."
        case .changedMeanwhile:
            "the key object in the bucket changed while the new recovery key was being put in place (another NAS "
                + "rotated it?): nothing was changed; run `sudo photolalactl recovery-key --rotate` again"
        }
    }
}
