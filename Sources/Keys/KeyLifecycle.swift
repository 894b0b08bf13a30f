import Vault

/// What a NAS does about the account key, given what it keeps (`AccountKeyState`) and what
/// the bucket holds (privacy.md "The account key and the recovery key", "No side doors"). A
/// pure value: the key service looks, asks `decide`, and performs the answer.
///
/// The rules behind every answer: the account stays readable with a recovery key the user
/// was shown (or that `recovery-key` on this NAS shows now), never none, so a NAS makes a
/// key only when the bucket holds no trace of one, drops a key of its own only while no one
/// can have seen it (still `creating`), and keeps whichever recovery key opens the bucket's
/// key object; and a NAS that holds the account key believes a key object only when it
/// proves (version 2) that a holder of this account key wrote it: anything else is a
/// substitution, which it writes over with its own.
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
        /// A new account key being put in place (`--new-account-key`); `resealing`: the
        /// transitional key object is in the bucket and objects are being sealed again, so
        /// the previous key may no longer open everything and the step is never undone.
        case newAccountKey(resealing: Bool)

        package init(_ state: AccountKeyState?) {
            switch state?.pending {
            case nil: self = state == nil ? .nothing : .confirmed
            case .creating?: self = .creating
            case .rotating?: self = .rotating
            case .newAccountKey(let old)?: self = .newAccountKey(resealing: old.resealing)
            }
        }
    }

    /// What this NAS's own device record says to the account key it holds: a key object
    /// that proves nothing is a substitution while the NAS's own manifest still opens with
    /// its key; when it does not, the account key may have been replaced while this NAS was
    /// away, and nothing is written over what may be the account's new key object.
    package enum OwnRecord: Sendable, Equatable {
        /// Not looked at (nothing held, or not needed).
        case unknown
        /// This NAS has no record in the bucket.
        case absent
        case opens
        case doesNotOpen
    }

    /// What the bucket's key object (`metadata/{userId}/keys/account-key`) says to the keys
    /// this NAS holds.
    package enum Finding: Sendable, Equatable {
        /// No key object. `otherKeyMaterial`: something else says the account has a key
        /// (another object under `keys/`, or a format-2 object under the user's metadata).
        case missing(otherKeyMaterial: Bool)
        /// This NAS's current recovery key opens it, and it holds this NAS's account key
        /// (and, in version 2, proves it). `transition`: it also carries the previous
        /// account key (a new account key being put in place).
        case opensWithCurrent(transition: Bool)
        /// The previous recovery key of a rotation under way opens it (or, for a new account
        /// key under way, the previous account key's object).
        case opensWithPrevious
        /// None of this NAS's recovery keys opens it, but it proves it was written by a
        /// holder of this NAS's account key, with this generation: a rotation elsewhere, or
        /// (a generation below this NAS's) an older copy put back.
        case proven(generation: UInt64)
        /// Written for another account key that this NAS's key endorsed: a new account key
        /// made elsewhere (`--new-account-key`).
        case successor
        /// Nothing ties it to this NAS's account key; `ownRecord` says whether this NAS's
        /// own manifest still opens with it. With nothing held, every key object is this.
        case unproven(ownRecord: OwnRecord)
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
            /// The account has a key this NAS does not hold: enter its recovery key. `why`:
            /// a sentence when this NAS held a key that no longer serves (nil: the usual one).
            case needed(String?)
            /// Nothing here can read the account's encrypted objects, and nothing may be
            /// made in their place; the sentence says what to do.
            case unreadable(String)
            /// The bucket holds no trace of a key: make one (then decide again as `creating`).
            case create
            /// A new account key is being put in place: seal every object again, then write
            /// the final key object (`KeyService` performs it).
            case reseal
        }

        /// What happens to the key file, in this order around the upload: `revert` and
        /// `erase` before it, `confirm` only once the bucket took it.
        package enum LocalChange: Sendable, Equatable {
            case keep
            /// The pending step is done: clear the marker (after the upload, if any).
            case confirm
            /// Back to the previous recovery key (or account key) of a step that did not
            /// reach the bucket (before the upload, if any).
            case revert
            /// Drop the key made here: another won, or the account already had one.
            case erase
        }

        /// What to write to the bucket, wrapped by the recovery key in force after `local`.
        package enum Upload: Sendable, Equatable {
            case none
            /// A new key object, `If-None-Match: *`: never over another.
            case fresh
            /// Over the object found, `If-Match` its ETag: never over one that changed since.
            case repair
            /// The transitional key object of a new account key (the new key under the new
            /// recovery key, the previous account key inside, endorsed by it), `If-Match` the
            /// object found (`If-None-Match: *` when there was none).
            case transition
        }

        package var state: State
        package var local: LocalChange = .keep
        package var upload: Upload = .none
        /// The bucket's key object was not written by a holder of this account key (or is an
        /// older copy put back): status attention `keyObjectReplaced`, an audit record.
        package var replaced = false

        package init(_ state: State, local: LocalChange = .keep, upload: Upload = .none, replaced: Bool = false) {
            self.state = state
            self.local = local
            self.upload = upload
            self.replaced = replaced
        }
    }

    /// `generation`: this NAS's recovery key's (the highest it knows of). `seen`: the highest
    /// generation a proven key object showed this NAS (a lower one is an old copy put back).
    package static func decide(local: Local, finding: Finding, generation: UInt64 = 0, seen: UInt64 = 0) -> Decision {
        switch (local, finding) {
        // Nothing here: the bucket decides whether this NAS makes the key or asks for it.
        case (.nothing, .missing(otherKeyMaterial: false)):
            return Decision(.create)
        case (.nothing, .missing(otherKeyMaterial: true)):
            return Decision(.unreadable(missingKeyObject))
        case (.nothing, .opensWithCurrent), (.nothing, .opensWithPrevious), (.nothing, .proven), (.nothing, .successor),
             (.nothing, .unproven):
            return Decision(.needed(nil))
        case (.nothing, .damaged(let why)), (.nothing, .newer(let why)):
            return Decision(.unreadable(unusable(why)))

        // Made here, not yet confirmed: ours only if the bucket takes it or already holds it.
        case (.creating, .missing(otherKeyMaterial: false)):
            return Decision(.ready(outdated: false), local: .confirm, upload: .fresh)
        case (.creating, .missing(otherKeyMaterial: true)):
            return Decision(.unreadable(missingKeyObject), local: .erase)
        case (.creating, .opensWithCurrent):
            return Decision(.ready(outdated: false), local: .confirm)
        case (.creating, .opensWithPrevious), (.creating, .proven), (.creating, .successor), (.creating, .unproven):
            return Decision(.needed(nil), local: .erase)
        case (.creating, .damaged(let why)), (.creating, .newer(let why)):
            return Decision(.unreadable(unusable(why)), local: .erase)

        // The key is confirmed: it stays, whatever the bucket holds now.
        case (.confirmed, .missing):
            return Decision(.ready(outdated: false), upload: .fresh)
        case (.confirmed, .opensWithCurrent), (.confirmed, .newer):
            return Decision(.ready(outdated: false))
        case (.confirmed, .opensWithPrevious):
            return Decision(.ready(outdated: true))
        case (.confirmed, .proven(let g)):
            // A rotation elsewhere makes a higher generation than any this NAS knows; a lower
            // (or the same) one under another recovery key is an old copy put back.
            return g > generation && g >= seen ? Decision(.ready(outdated: true))
                : Decision(.ready(outdated: generation < seen), upload: .repair, replaced: true)
        case (.confirmed, .successor):
            return Decision(.needed(successorSentence))
        case (.confirmed, .unproven(let own)):
            return own == .doesNotOpen ? Decision(.needed(keyChangedSentence))
                : Decision(.ready(outdated: false), upload: .repair, replaced: true)
        case (.confirmed, .damaged):
            return Decision(.ready(outdated: false), upload: .repair, replaced: true)

        // A rotation cut short: keep whichever recovery key the bucket's object opens with.
        case (.rotating, .opensWithCurrent):
            return Decision(.ready(outdated: false), local: .confirm)
        case (.rotating, .opensWithPrevious), (.rotating, .newer):
            return Decision(.ready(outdated: false), local: .revert)
        case (.rotating, .missing):
            return Decision(.ready(outdated: false), local: .revert, upload: .fresh)
        case (.rotating, .proven(let g)):
            return g > generation && g >= seen ? Decision(.ready(outdated: true), local: .revert)
                : Decision(.ready(outdated: false), local: .revert, upload: .repair, replaced: true)
        case (.rotating, .successor):
            return Decision(.needed(successorSentence), local: .revert)
        case (.rotating, .unproven(let own)):
            return own == .doesNotOpen ? Decision(.needed(keyChangedSentence), local: .revert)
                : Decision(.ready(outdated: false), local: .revert, upload: .repair, replaced: true)
        case (.rotating, .damaged):
            return Decision(.ready(outdated: false), local: .revert, upload: .repair, replaced: true)

        // A new account key under way. Before the transitional object is in the bucket
        // nothing was sealed again: whatever the bucket says of the previous key wins (the
        // step starts over from the user's command, or is dropped). Once it is, the step
        // only goes forward: objects sealed under the new key open with nothing else.
        case (.newAccountKey, .opensWithCurrent(transition: true)):
            return Decision(.reseal)
        // The final key object is written only once everything is sealed again: done.
        case (.newAccountKey, .opensWithCurrent(transition: false)):
            return Decision(.ready(outdated: false), local: .confirm)
        case (.newAccountKey(resealing: false), .opensWithPrevious):
            return Decision(.reseal, upload: .transition)
        case (.newAccountKey(resealing: false), _):
            return Decision(.ready(outdated: false), local: .revert)
        case (.newAccountKey(resealing: true), .newer(let why)):
            return Decision(.unreadable(unusable(why)))
        case (.newAccountKey(resealing: true), .missing), (.newAccountKey(resealing: true), .opensWithPrevious),
             (.newAccountKey(resealing: true), .proven), (.newAccountKey(resealing: true), .successor),
             (.newAccountKey(resealing: true), .unproven), (.newAccountKey(resealing: true), .damaged):
            return Decision(.reseal, upload: .transition, replaced: true)
        }
    }

    /// What the key object's `bytes` say to the keys in `state` (nil: none held; then only
    /// whether it is a key object at all). `.unproven` comes with `ownRecord` unknown: the
    /// service looks at its own record when the decision depends on it.
    package static func finding(_ bytes: [UInt8], holding state: AccountKeyState?, userId: String) -> Finding {
        do throws(VaultFailure) {
            _ = try KeyObject.layout(bytes, userId: userId)
        } catch .newerFormat(let key, let version) {
            return .newer(VaultFailure.newerFormat(key, version: version).description)
        } catch {
            return .damaged(error.description)
        }
        guard let state else { return .unproven(ownRecord: .unknown) }
        var keys: [(RecoveryKey, AccountKey, Finding)] = [(state.recoveryKey, state.accountKey, .opensWithCurrent(transition: false))]
        switch state.pending {
        case .rotating(let previous, _)?: keys.append((previous, state.accountKey, .opensWithPrevious))
        case .newAccountKey(let old)?: keys.append((old.recoveryKey, old.accountKey, .opensWithPrevious))
        default: break
        }
        for (recovery, account, finding) in keys {
            do throws(VaultFailure) {
                let opened = try KeyObject.unwrap(bytes, recovery: recovery, userId: userId)
                guard opened.key == account else { continue }
                if case .opensWithCurrent = finding { return .opensWithCurrent(transition: opened.previous != nil) }
                return finding
            } catch .wrongRecoveryKey {
                continue
            } catch {
                // The wrap opens but the proof does not: altered, whoever's it claims to be.
                return .unproven(ownRecord: .unknown)
            }
        }
        switch try? KeyObject.standing(bytes, holding: state.accountKey, userId: userId) {
        case .proven(let g)?: return .proven(generation: g)
        case .successor?: return .successor
        default: return .unproven(ownRecord: .unknown)
        }
    }

    package static let neededSentence = "This account already has a recovery key that this NAS does not hold: enter it with sudo "
        + "photolalactl recovery-key --enter. Photos, thumbnails and the catalog go on meanwhile; only the manifest waits."

    package static let successorSentence = "A new account key was made on another NAS (recovery-key --rotate --new-account-key): the key "
        + "this NAS held opens nothing written since. Enter the new recovery key with sudo photolalactl recovery-key --enter "
        + "(sudo photolalactl recovery-key on the NAS that made it shows it). Photos, thumbnails and the catalog go on meanwhile; "
        + "only the manifest waits."

    package static let keyChangedSentence = "The account key this NAS holds opens neither the bucket's key object nor this NAS's own "
        + "manifest record any more: a new account key was made while this NAS was away, or the bucket was tampered with. "
        + "Enter the account's current recovery key with sudo photolalactl recovery-key --enter. Nothing is sealed meanwhile; "
        + "photos, thumbnails and the catalog go on."

    package static let outdatedSentence = "This NAS's copy of the recovery key is outdated: a new one was made on another NAS "
        + "(recovery-key --rotate) and this one opens nothing any more. The account key is the same, so backups go on; keep "
        + "the new recovery key (sudo photolalactl recovery-key on the NAS that made it)."

    package static let missingKeyObject = "The bucket holds this account's encrypted manifests but not its key object, so no NAS can open "
        + "them from the bucket and none may make a new key in its place. On a NAS that still holds the account key, restart "
        + "photolalad (sudo systemctl restart photolalad): it writes the key object again, and this NAS then asks for the "
        + "recovery key. Photos, thumbnails and the catalog are backed up meanwhile."

    static func unusable(_ why: String) -> String {
        "This account's key object cannot be used: \(why). Photos, thumbnails and the catalog are backed up meanwhile; "
            + "no new key is made in its place."
    }
}

// MARK: recovery-key --enter

extension KeyLifecycle {
    /// What this NAS keeps when the user enters `recovery` (`recovery-key --enter`).
    package struct Entered: Sendable, Equatable {
        package var state: AccountKeyState
        /// The bucket's key object does not hold this key (it was replaced, or is an older
        /// one): this NAS writes its own over it (`If-Match`) and says so.
        package var repairKeyObject: Bool
        /// The key object opens with another (newer) recovery key of the same account key.
        package var outdated: Bool

        package init(state: AccountKeyState, repairKeyObject: Bool = false, outdated: Bool = false) {
            self.state = state
            self.repairKeyObject = repairKeyObject
            self.outdated = outdated
        }
    }

    /// A device record of the account as the bucket holds it.
    package struct Record: Sendable, Equatable {
        package var objectKey: String
        package var bytes: [UInt8]
        package init(objectKey: String, bytes: [UInt8]) {
            self.objectKey = objectKey
            self.bytes = bytes
        }
    }

    /// The account key `recovery` opens: the key object's, if it does and that key opens
    /// the account's device records (or there are none); otherwise the one any device
    /// record keeps wrapped under it (privacy.md "No side doors": the user's recovery key
    /// keeps working while any record survives, whatever was put in the key object's place).
    ///
    /// `holding`: the key this NAS holds and uses (state `ready`): a recovery key that
    /// opens another account key is refused, unless the key object is that key's endorsed
    /// successor. A key that opens nothing changes nothing.
    package static func entered(_ recovery: RecoveryKey, keyObject: [UInt8]?, records: [Record], holding: AccountKeyState?,
                                userId: String) throws(RecoveryKeyRefusal) -> Entered {
        var fromObject: KeyObject.Opened?
        var objectProblem: VaultFailure?
        if let keyObject {
            do throws(VaultFailure) {
                fromObject = try KeyObject.unwrap(keyObject, recovery: recovery, userId: userId)
            } catch .wrongRecoveryKey {
            } catch {
                objectProblem = error
            }
        }
        // A NAS that uses an account key takes no other (but the new one it endorsed).
        func successorOf(_ held: AccountKey, _ key: AccountKey) -> Bool {
            fromObject?.key == key && keyObject.map { (try? KeyObject.standing($0, holding: held, userId: userId)) == .successor } == true
        }
        if let held = holding, let o = fromObject, o.key != held.accountKey, !successorOf(held.accountKey, o.key) {
            throw .otherAccountKey(held.fingerprint)
        }
        let sealed = records.filter { DeviceRecordBytes.isSealed($0.bytes) }
        func opensAny(_ key: AccountKey, _ previous: AccountKey?) -> Bool {
            sealed.contains { r in
                [key, previous].compactMap { $0 }.contains { (try? SealedObject.open(r.bytes, key: $0.metadataKey, objectKey: r.objectKey)) != nil }
            }
        }
        let fromRecords = sealed.lazy.compactMap { SealedRecord.unwrap($0.bytes, recovery: recovery, userId: userId, objectKey: $0.objectKey) }
        var result: Entered
        if let o = fromObject, sealed.isEmpty || opensAny(o.key, o.previous) {
            result = Entered(state: AccountKeyState(userId: userId, accountKey: o.key, recoveryKey: recovery,
                                                    recoveryCreatedAt: o.recoveryCreatedAt, generation: o.generation))
        } else if let r = fromRecords.first {
            var standing: KeyObject.Standing?
            if let keyObject { standing = try? KeyObject.standing(keyObject, holding: r.key, userId: userId) }
            if standing == .successor { throw .superseded }
            var proven = false
            if case .proven? = standing { proven = true }
            result = Entered(state: AccountKeyState(userId: userId, accountKey: r.key, recoveryKey: recovery,
                                                    recoveryCreatedAt: r.recoveryCreatedAt),
                             repairKeyObject: !proven, outdated: proven)
        } else if fromObject != nil {
            throw .keyObjectReplaced
        } else if let objectProblem {
            throw .notHeld("\(objectProblem). Nothing was changed.")
        } else if keyObject == nil {
            throw .noKeyObject
        } else {
            throw .wrongKey
        }
        if let held = holding, held.accountKey != result.state.accountKey, !successorOf(held.accountKey, result.state.accountKey) {
            throw .otherAccountKey(held.fingerprint)
        }
        return result
    }

    /// Without device records or a key held: the key object alone decides.
    package static func entered(_ recovery: RecoveryKey, opening bytes: [UInt8], userId: String) throws(RecoveryKeyRefusal) -> AccountKeyState {
        try entered(recovery, keyObject: bytes, records: [], holding: nil, userId: userId).state
    }
}

/// What the first bytes of a manifest object say, without any key.
package enum DeviceRecordBytes {
    /// Sealed (format 2): `PLMANIF` 0x02 or, a record with the wrapped key, 0x03.
    package static func isSealed(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 8 && (bytes.starts(with: SealedObject.magic) || bytes.starts(with: SealedRecord.magic))
    }
}
