import Vault

/// What the key service tells the status, the log, the audit trail and a refused command,
/// worded in one place: pure, from what it is given.
extension KeyService {
    static let transitionSentence = "a new account key is being put in place (recovery-key --rotate --new-account-key): "
        + "everything under the account's metadata is being sealed again; try again once that is done"

    static func replacedSentence(_ finding: KeyLifecycle.Finding) -> String {
        let what = switch finding {
        case .proven: "an older copy of the account's key object was put back in the bucket"
        case .damaged: "the account's key object in the bucket was damaged or replaced by something that is not a key object"
        default: "the account's key object in the bucket was replaced by one that was not written with this account's key"
        }
        return "\(what): this NAS wrote its own back (the account key and recovery key are unchanged). Someone with write access "
            + "to the bucket did this: check who holds the storage credentials, and see `photolalactl audit`."
    }

    static func found(_ finding: KeyLifecycle.Finding) -> String {
        switch finding {
        case .proven: "older copy"
        case .damaged: "damaged"
        case .missing: "missing"
        default: "not written with this account key"
        }
    }

    /// Why `logout` must not forget `held`, with the command that shows its recovery key.
    static func logoutHoldSentence(_ held: AccountKeyState) -> String {
        let making = held.pending == .creating
            ? " (it is still being made: run the command again in a few seconds)" : ""
        return "This NAS holds the account's key (fingerprint \(held.fingerprint)), and its recovery key was never shown "
            + "nor entered here: after a logout no NAS could read this account's manifests. Show it and keep it somewhere "
            + "other than this NAS: sudo photolalactl recovery-key\(making); then log out again. To log out anyway and lose "
            + "this copy: sudo photolalactl logout --forget-key"
    }
}
