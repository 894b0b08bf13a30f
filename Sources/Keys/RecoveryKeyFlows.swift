import Bucket
import Foundation
import Logging
import PhotolalaCore
import Vault

/// The recovery-key commands' work that is not the key service's state: the bucket's
/// reads and writes each step awaits, the re-seal, what the log and the audit trail say;
/// the loop's writes of the key object too, which `--enter` shares. A value the actor
/// holds beside `KeyMemory`: the actor reads and changes its state, and writes the key
/// file, between these steps, at the points where a command must see or leave it (the
/// pending marker saved before the bucket is written); these answer what the bucket did,
/// and the actor applies it.
package struct RecoveryKeyFlows: Sendable {
    let bucket: KeyBucket
    let logger: Logger
    let audit: (any AuditRecorder)?

    // MARK: the audit trail

    func record(_ kind: AuditEvent.Kind, _ caller: AuditActor, _ outcome: AuditOutcome, _ details: AuditDetails) {
        audit?.record(AuditEvent(kind, by: caller, outcome, details))
    }

    /// Answers `refusal`, for the command to throw, once the audit trail has it.
    func refuse(_ action: String, _ caller: AuditActor, _ refusal: RecoveryKeyRefusal) -> RecoveryKeyRefusal {
        record(.recoveryKeyRefused, caller, .refused, ["action": .string(action), "reason": .string(refusal.code)])
        return refusal
    }

    /// `body`'s answer; its refusal goes to the audit trail as `action`'s.
    func refusing<T>(_ action: String, _ caller: AuditActor, _ body: () throws(RecoveryKeyRefusal) -> T) throws(RecoveryKeyRefusal) -> T {
        do throws(RecoveryKeyRefusal) {
            return try body()
        } catch {
            throw refuse(action, caller, error)
        }
    }

    // MARK: the key object, as the loop and the commands read and write it

    /// The key object's bytes and ETag; nil when there is none.
    func keyObject(_ uid: String) async throws(KeyLookFailure) -> (bytes: [UInt8], etag: String)? {
        do throws(S3Error) {
            return try await bucket.keyObject(uid)
        } catch {
            throw KeyLookFailure(error)
        }
    }

    /// `state`'s own key object, or (`transitional`) the one that carries the account key it
    /// replaces; nil: no new account key is under way to carry one.
    package static func keyObject(_ state: AccountKeyState, uid: String, transitional: Bool) -> [UInt8]? {
        guard transitional else { return state.keyObject(uid: uid) }
        guard case .newAccountKey(let old)? = state.pending else { return nil }
        return state.transitionalKeyObject(uid: uid, replacing: old)
    }

    /// The loop's write of the key object, over the one `etag` names (nil: where there is none).
    func write(_ object: [UInt8], uid: String, over etag: String?) async throws(KeyLookFailure) -> String {
        do throws(S3Error) {
            return try await bucket.putKeyObject(object, uid: uid, ifMatch: etag)
        } catch {
            // Someone wrote the key object meanwhile (or our own write answered late):
            // look again, and the lifecycle decides with what is there now.
            if Self.lost(error) { throw .again }
            throw KeyLookFailure(error)
        }
    }

    /// What the log and the audit trail say of the loop's write; answers why, when the key
    /// object found was a substitution (status attention `keyObjectReplaced`).
    func written(_ decision: KeyLifecycle.Decision, _ state: AccountKeyState, finding: KeyLifecycle.Finding, wasCreating: Bool) -> String? {
        if decision.replaced {
            let why = KeyService.replacedSentence(finding)
            logger.warning("\(why)", metadata: ["fingerprint": "\(state.fingerprint)"])
            record(.keyObjectRepaired, .daemon, .ok, ["fingerprint": .string(state.fingerprint), "found": .string(KeyService.found(finding))])
            return why
        }
        if !wasCreating && decision.upload != .transition {
            logger.notice(decision.upload == .repair ? "the key object in the bucket was damaged: written again"
                                                     : "the key object was missing from the bucket: written again")
        }
        return nil
    }

    /// What the log and the audit trail say once the key file no longer says a step is
    /// pending: the key made here, a rotation, or (`replacing`) a new account key.
    func confirmed(_ state: AccountKeyState, replacing old: AccountKeyState.Replaced?, made: Bool) {
        if let old {
            record(.recoveryKeyNewAccountKey, .daemon, .ok, ["fingerprint": .string(state.fingerprint),
                                                             "previous": .string(old.accountKey.fingerprint)])
        }
        if made {
            logger.notice("made this account's key; keep its recovery key somewhere other than this NAS (sudo photolalactl recovery-key)",
                          metadata: ["fingerprint": "\(state.fingerprint)"])
        } else {
            logger.notice("the new recovery key is in place", metadata: ["fingerprint": "\(state.fingerprint)"])
        }
    }

    /// Another NAS wrote the key object since it was read (412), or took it away.
    static func lost(_ error: S3Error) -> Bool {
        error.kind == .preconditionFailed || error.kind == .notFound
    }

    /// A command refused because the key object could not be read: nothing was changed.
    static func unread(_ failure: KeyLookFailure) -> RecoveryKeyRefusal {
        .bucket("cannot read this account's key object from the bucket (\(failure)); nothing was changed: try again")
    }

    // MARK: recovery-key --enter

    /// `--enter`'s text as a recovery key, kept out of the logs from here on.
    func parse(_ text: String, by caller: AuditActor) throws(RecoveryKeyRefusal) -> RecoveryKey {
        let recovery: RecoveryKey
        do throws(RecoveryKey.ParseError) {
            recovery = try RecoveryKey.parse(text)
        } catch {
            throw refuse("enter", caller, .malformed(error))
        }
        recovery.registerSecret()
        return recovery
    }

    /// What an entered key is checked against: the key object and every device record.
    func entryMaterial(_ uid: String) async throws(RecoveryKeyRefusal)
        -> (keyObject: (bytes: [UInt8], etag: String)?, records: [KeyLifecycle.Record]) {
        do throws(KeyLookFailure) {
            let found = try await keyObject(uid)
            do throws(S3Error) {
                return (found, try await bucket.deviceRecords(uid))
            } catch {
                throw KeyLookFailure(error)
            }
        } catch .unavailable {
            throw .notSignedIn
        } catch {
            throw Self.unread(error)
        }
    }

    /// What keeping `recovery` means; another account key while this NAS uses its own
    /// (`holding`) is refused, and the log says so.
    func entered(_ recovery: RecoveryKey, keyObject: [UInt8]?, records: [KeyLifecycle.Record], holding: AccountKeyState?,
                 userId uid: String) throws(RecoveryKeyRefusal) -> KeyLifecycle.Entered {
        do throws(RecoveryKeyRefusal) {
            return try KeyLifecycle.entered(recovery, keyObject: keyObject, records: records, holding: holding, userId: uid)
        } catch {
            if case .otherAccountKey = error {
                logger.warning("a recovery key that opens another account key was entered and refused: this NAS keeps its own",
                               metadata: ["fingerprint": "\(holding?.fingerprint ?? "-")"])
            }
            throw error
        }
    }

    /// The key entered opened a device record, not the key object (`found`, nil: none there):
    /// what stands there was not written with this account key. Ours goes back over it.
    package static func repair(over found: Bool) -> (decision: KeyLifecycle.Decision, finding: KeyLifecycle.Finding) {
        (KeyLifecycle.Decision(.ready(outdated: false), upload: found ? .repair : .fresh, replaced: found),
         found ? .unproven(ownRecord: .unknown) : .missing(otherKeyMaterial: true))
    }

    // MARK: a change of the keys (--rotate, --new-account-key)

    /// The ETag of the key object a change replaces: its conditional write fails if another
    /// NAS wrote it meanwhile.
    func keyObjectETag(_ uid: String) async throws(RecoveryKeyRefusal) -> String? {
        do throws(KeyLookFailure) {
            return try await keyObject(uid)?.etag
        } catch {
            throw Self.unread(error)
        }
    }

    /// What a conditional write of a change's key object came to.
    package enum Put: Sendable, Equatable {
        case written(etag: String)
        /// Another NAS wrote the key object meanwhile (412, or gone): the change did not happen.
        case lost
        /// Whether the bucket took it is unknown; the sentence tells the user what follows.
        case unknown(String)
    }

    /// The key object of `state`, pending a change from `before`, put over the one `etag` names.
    func put(_ state: AccountKeyState, replacing before: AccountKeyState, over etag: String?) async -> Put {
        let object: [UInt8], newAccountKey: Bool
        if case .newAccountKey(let old)? = state.pending {
            logger.notice("making a new account key: every object under the account's metadata is sealed again",
                          metadata: ["fingerprint": "\(state.fingerprint)", "previous": "\(before.fingerprint)"])
            (object, newAccountKey) = (state.transitionalKeyObject(uid: state.userId, replacing: old), true)
        } else {
            (object, newAccountKey) = (state.keyObject(uid: state.userId), false)
        }
        do throws(S3Error) {
            return .written(etag: try await bucket.putKeyObject(object, uid: state.userId, ifMatch: etag))
        } catch {
            return Self.put(failed: error, newAccountKey: newAccountKey)
        }
    }

    /// A change's write that failed with `error`: lost to another NAS, or of unknown outcome,
    /// in which case the loop looks at once and finds out.
    package static func put(failed error: S3Error, newAccountKey: Bool) -> Put {
        if lost(error) { return .lost }
        // The loop goes on with the new key if the bucket took it (the transitional object
        // is there), or keeps the previous one; a rotation keeps whichever recovery key the
        // key object opens with.
        return .unknown(newAccountKey
            ? "the new account key may not have reached the bucket (\(error)): photolalad goes on with it if "
                + "it did, or keeps the previous one; run `sudo photolalactl recovery-key` in a few minutes to see which"
            : "the new recovery key may not have reached the bucket (\(error)): photolalad keeps whichever "
                + "recovery key the bucket's key object opens with; run `sudo photolalactl recovery-key` in a minute to see it")
    }

    /// A rotation's keys once the bucket has them; shown, as the command's answer carries
    /// the new key to it, which prints it.
    package static func rotated(_ pending: AccountKeyState) -> AccountKeyState {
        var state = pending
        state.pending = nil
        state.recoveryShownAt = state.recoveryCreatedAt
        return state
    }

    /// `state` once its transitional key object is in the bucket: the step is never undone
    /// from then on. nil: no new account key is under way.
    package static func resealing(_ state: AccountKeyState) -> AccountKeyState? {
        guard case .newAccountKey(var old)? = state.pending else { return nil }
        old.resealing = true
        var marked = state
        marked.pending = .newAccountKey(old)
        return marked
    }

    /// Every object sealed again under `state`'s new key, then the final key object (without
    /// the previous key) over the one there; answers what was sealed and the final ETag.
    func reseal(_ uid: String, _ state: AccountKeyState, replacing old: AccountKeyState.Replaced, over etag: String?,
                progress: @Sendable (Int) async -> Void) async throws(KeyLookFailure) -> (AccountReseal.Report, etag: String) {
        let reseal = AccountReseal(userId: uid, old: old.accountKey, new: state.accountKey,
                                   wrap: SealedRecord.Wrap(recovery: state.recoveryKey, createdAt: state.recoveryCreatedAt))
        let total: AccountReseal.Report
        do {
            total = try await reseal.runUntilSettled(ResealBucket(bucket: bucket, uid: uid)) { await progress($0.sealed) }
        } catch let error as S3Error {
            throw KeyLookFailure(error)
        } catch {
            throw .local("cannot seal the account's objects again: \(error)")
        }
        let final = state.finalKeyObject(uid: uid, replacing: old)
        do throws(S3Error) {
            let current = try await bucket.keyObject(uid)
            return (total, try await bucket.putKeyObject(final, uid: uid, ifMatch: current?.etag ?? etag))
        } catch {
            if error.kind == .preconditionFailed { throw .again }
            throw KeyLookFailure(error)
        }
    }

    /// The new account key in place (`state`, the key file now), said in the log and the audit trail.
    func newAccountKey(_ state: AccountKeyState, replacing old: AccountKeyState.Replaced, _ total: AccountReseal.Report,
                       by caller: AuditActor) -> KeyService.NewAccountKey {
        logger.notice("the new account key is in place: the previous recovery key and key object open nothing written since",
                      metadata: ["fingerprint": "\(state.fingerprint)", "sealed": "\(total.sealed)", "devices": "\(total.devices)"])
        var details: AuditDetails = ["fingerprint": .string(state.fingerprint), "previous": .string(old.accountKey.fingerprint),
                                     "sealed": .int(Int64(total.sealed)), "devices": .int(Int64(total.devices))]
        if !total.unreadable.isEmpty { details["unreadable"] = .int(Int64(total.unreadable.count)) }
        record(.recoveryKeyNewAccountKey, caller, .ok, details)
        return KeyService.NewAccountKey(shown: ShownRecoveryKey(state, outdated: false), previousFingerprint: old.accountKey.fingerprint,
                                        sealed: total.sealed, devices: total.devices, unreadable: total.unreadable)
    }

    /// The new account key's command ended after its transitional key object reached the
    /// bucket: the loop goes on from there.
    static func unfinished(_ failure: KeyLookFailure) -> RecoveryKeyRefusal {
        .bucket("the new account key is in place but not every object is sealed under it yet (\(failure)): "
            + "photolalad goes on by itself; run `sudo photolalactl recovery-key` once status says the key is ready")
    }
}
