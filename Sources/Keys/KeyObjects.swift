import Foundation
import PhotolalaCore
import Vault

/// What a key state puts in the bucket, and what of it the redactor must know before any
/// use: the same for a first key, a repair, a rotation and a new account key.
extension AccountKeyState {
    /// This NAS's key object: its account key under its recovery key, proven.
    func keyObject(uid: String) -> [UInt8] {
        KeyObject.wrap(accountKey, recoveryCreatedAt: recoveryCreatedAt, recovery: recoveryKey, userId: uid,
                       extras: .init(generation: generation))
    }

    /// The transitional key object of a new account key: the new key under the new recovery
    /// key, the previous key inside, endorsed by it.
    func transitionalKeyObject(uid: String, replacing old: AccountKeyState.Replaced) -> [UInt8] {
        KeyObject.wrap(accountKey, recoveryCreatedAt: recoveryCreatedAt, recovery: recoveryKey, userId: uid,
                       extras: .init(generation: generation, previous: old.accountKey, endorsedBy: old.accountKey))
    }

    /// The final key object of a new account key: without the previous key.
    func finalKeyObject(uid: String, replacing old: AccountKeyState.Replaced) -> [UInt8] {
        KeyObject.wrap(accountKey, recoveryCreatedAt: recoveryCreatedAt, recovery: recoveryKey, userId: uid,
                       extras: .init(generation: generation, endorsedBy: old.accountKey))
    }

    /// Every form a secret could be printed in, known to the redactor before any use.
    func registerSecrets() {
        var keys = [recoveryKey]
        var accountKeys = [accountKey]
        if case .rotating(let previous, _)? = pending { keys.append(previous) }
        if case .newAccountKey(let old)? = pending {
            keys.append(old.recoveryKey)
            accountKeys.append(old.accountKey)
        }
        for key in keys { key.registerSecret() }
        for key in accountKeys { SecretRedactor.shared.register(Data(key.bytes).base64EncodedString()) }
    }
}

extension RecoveryKey {
    /// As shown and as typed without its dashes.
    func registerSecret() {
        SecretRedactor.shared.register(formatted)
        SecretRedactor.shared.register(formatted.replacingOccurrences(of: "-", with: ""))
    }
}
