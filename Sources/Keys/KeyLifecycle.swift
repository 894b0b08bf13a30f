import Vault

/// What a NAS does about the account key, given what it keeps (`AccountKeyState`) and what
/// the bucket holds (privacy.md "The account key and the recovery key"). A pure value: the
/// key service looks, asks `decide`, and performs the answer.
///
/// The one rule behind every answer: the account stays readable with a recovery key the
/// user was shown (or that `recovery-key` on this NAS shows now), never none. So a NAS
/// makes a key only when the bucket holds no trace of one, drops a key of its own only
/// while no one can have seen it (still `creating`), and keeps whichever recovery key
/// opens the bucket's key object.
package enum KeyLifecycle {
    /// What this NAS keeps, as far as the decision goes.
    package enum Local: Sendable, Equatable {
        /// No key file (never made or entered here, or erased by a logout).
        case nothing
        /// The key, confirmed in the bucket once.
        case confirmed
        /// Made here, its key object not yet confirmed in the bucket.
        case creating
        /// A new recovery key being put in place of the previous one.
        case rotating

        package init(_ state: AccountKeyState?) {
            switch state?.pending {
            case nil: self = state == nil ? .nothing : .confirmed
            case .creating?: self = .creating
            case .rotating?: self = .rotating
            }
        }
    }

    /// What the bucket's key object (`metadata/{userId}/keys/account-key`) says to the
    /// recovery keys this NAS holds.
    package enum Finding: Sendable, Equatable {
        /// No key object. `otherKeyMaterial`: something else says the account has a key
        /// (another object under `keys/`, or a format-2 object under the user's metadata).
        case missing(otherKeyMaterial: Bool)
        /// This NAS's current recovery key opens it, and it holds this NAS's account key.
        case opensWithCurrent
        /// The previous recovery key of a rotation under way opens it (this account key).
        case opensWithPrevious
        /// None of the recovery keys this NAS holds opens it (or it holds another account
        /// key): another NAS's key, or a rotation made elsewhere. With nothing held, every
        /// well-formed key object is this.
        case foreign
        /// Not a key object at all (wrong header or size); the sentence says so.
        case damaged(String)
        /// A later version than this release reads; the sentence says to update.
        case newer(String)
    }

    package struct Decision: Sendable, Equatable {
        package enum State: Sendable, Equatable {
            /// The account key is in hand. `outdated`: this NAS's recovery key no longer
            /// opens the key object (rotated elsewhere); the account key still serves.
            case ready(outdated: Bool)
            /// The account has a key this NAS does not hold: enter its recovery key.
            case needed
            /// Nothing here can read the account's encrypted objects, and nothing may be
            /// made in their place; the sentence says what to do.
            case unreadable(String)
            /// The bucket holds no trace of a key: make one (then decide again as `creating`).
            case create
        }

        /// What happens to the key file, in this order around the upload: `revert` and
        /// `erase` before it, `confirm` only once the bucket took it.
        package enum LocalChange: Sendable, Equatable {
            case keep
            /// The pending step is done: clear the marker (after the upload, if any).
            case confirm
            /// Back to the previous recovery key of a rotation (before the upload, if any).
            case revert
            /// Drop the key made here: another won, or the account already had one.
            case erase
        }

        /// What to write to the bucket, wrapped by the recovery key in force after `local`.
        package enum Upload: Sendable, Equatable {
            case none
            /// A new key object, `If-None-Match: *`: never over another.
            case fresh
            /// Over the damaged object, `If-Match` its ETag: never over one that changed since.
            case repair
        }

        package var state: State
        package var local: LocalChange = .keep
        package var upload: Upload = .none

        package init(_ state: State, local: LocalChange = .keep, upload: Upload = .none) {
            self.state = state
            self.local = local
            self.upload = upload
        }
    }

    package static func decide(local: Local, finding: Finding) -> Decision {
        switch (local, finding) {
        // Nothing here: the bucket decides whether this NAS makes the key or asks for it.
        case (.nothing, .missing(otherKeyMaterial: false)):
            return Decision(.create)
        case (.nothing, .missing(otherKeyMaterial: true)):
            return Decision(.unreadable(missingKeyObject))
        case (.nothing, .opensWithCurrent), (.nothing, .opensWithPrevious), (.nothing, .foreign):
            return Decision(.needed)
        case (.nothing, .damaged(let why)), (.nothing, .newer(let why)):
            return Decision(.unreadable(unusable(why)))

        // Made here, not yet confirmed: ours only if the bucket takes it or already holds it.
        case (.creating, .missing(otherKeyMaterial: false)):
            return Decision(.ready(outdated: false), local: .confirm, upload: .fresh)
        case (.creating, .missing(otherKeyMaterial: true)):
            return Decision(.unreadable(missingKeyObject), local: .erase)
        case (.creating, .opensWithCurrent):
            return Decision(.ready(outdated: false), local: .confirm)
        case (.creating, .opensWithPrevious), (.creating, .foreign):
            return Decision(.needed, local: .erase)
        case (.creating, .damaged(let why)), (.creating, .newer(let why)):
            return Decision(.unreadable(unusable(why)), local: .erase)

        // The key is confirmed: it stays, whatever the bucket holds now.
        case (.confirmed, .missing):
            return Decision(.ready(outdated: false), upload: .fresh)
        case (.confirmed, .opensWithCurrent), (.confirmed, .newer):
            return Decision(.ready(outdated: false))
        case (.confirmed, .opensWithPrevious), (.confirmed, .foreign):
            return Decision(.ready(outdated: true))
        case (.confirmed, .damaged):
            return Decision(.ready(outdated: false), upload: .repair)

        // A rotation cut short: keep whichever recovery key the bucket's object opens with.
        case (.rotating, .opensWithCurrent):
            return Decision(.ready(outdated: false), local: .confirm)
        case (.rotating, .opensWithPrevious), (.rotating, .newer):
            return Decision(.ready(outdated: false), local: .revert)
        case (.rotating, .missing):
            return Decision(.ready(outdated: false), local: .revert, upload: .fresh)
        case (.rotating, .foreign):
            return Decision(.ready(outdated: true), local: .revert)
        case (.rotating, .damaged):
            return Decision(.ready(outdated: false), local: .revert, upload: .repair)
        }
    }

    /// What the key object's `bytes` say to the recovery keys in `state` (nil: none held;
    /// then only whether it is a key object at all).
    package static func finding(_ bytes: [UInt8], holding state: AccountKeyState?, userId: String) -> Finding {
        // With nothing held, a key of no one's opens nothing: only the header is judged.
        var keys: [(RecoveryKey, Finding)] = [(state?.recoveryKey ?? .generate(), .opensWithCurrent)]
        if case .rotating(let previous, _)? = state?.pending { keys.append((previous, .opensWithPrevious)) }
        for (recovery, finding) in keys {
            do throws(VaultFailure) {
                let opened = try KeyObject.unwrap(bytes, recovery: recovery, userId: userId)
                return opened.key == state?.accountKey ? finding : .foreign
            } catch .wrongRecoveryKey {
                continue
            } catch .newerFormat(let key, let version) {
                return .newer(VaultFailure.newerFormat(key, version: version).description)
            } catch {
                return .damaged(error.description)
            }
        }
        return .foreign
    }

    /// What this NAS keeps when the user enters `recovery` (`recovery-key --enter`): the
    /// account key the key object's `bytes` hold, whatever key file this NAS had, since the
    /// bucket's is the one every other NAS reads with. A key that opens nothing changes nothing.
    package static func entered(_ recovery: RecoveryKey, opening bytes: [UInt8], userId: String) throws(RecoveryKeyRefusal)
        -> AccountKeyState {
        do throws(VaultFailure) {
            let opened = try KeyObject.unwrap(bytes, recovery: recovery, userId: userId)
            return AccountKeyState(userId: userId, accountKey: opened.key, recoveryKey: recovery, recoveryCreatedAt: opened.recoveryCreatedAt)
        } catch .wrongRecoveryKey {
            throw .wrongKey
        } catch {
            throw .notHeld("\(error). Nothing was changed.")
        }
    }

    static let neededSentence = "This account already has a recovery key that this NAS does not hold: enter it with sudo "
        + "photolalactl recovery-key --enter. Photos, thumbnails and the catalog go on meanwhile; only the manifest waits."

    static let outdatedSentence = "This NAS's copy of the recovery key is outdated: a new one was made on another NAS "
        + "(recovery-key --rotate) and this one opens nothing any more. The account key is the same, so backups go on; keep "
        + "the new recovery key (sudo photolalactl recovery-key on the NAS that made it)."

    static let missingKeyObject = "The bucket holds this account's encrypted manifests but not its key object, so no NAS can open "
        + "them from the bucket and none may make a new key in its place. On a NAS that still holds the account key, restart "
        + "photolalad (sudo systemctl restart photolalad): it writes the key object again, and this NAS then asks for the "
        + "recovery key. Photos, thumbnails and the catalog are backed up meanwhile."

    static func unusable(_ why: String) -> String {
        "This account's key object cannot be used: \(why). Photos, thumbnails and the catalog are backed up meanwhile; "
            + "no new key is made in its place."
    }
}
