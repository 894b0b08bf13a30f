/// Why a key object or a sealed object was not opened. AES-GCM cannot tell a wrong key
/// from altered or moved bytes, so the sentences name every cause and what to do.
package enum VaultFailure: Error, Equatable, CustomStringConvertible {
    /// Not the layout of a key object (magic or size).
    case notAKeyObject(String)
    /// A key object that does not open with this recovery key.
    case wrongRecoveryKey(String)
    /// Not the layout of a sealed object.
    case notSealed(String)
    /// A format-1 manifest object: readable, but plaintext and unauthenticated.
    case plaintext(String)
    /// A later format than this release reads.
    case newerFormat(String, version: UInt8)
    /// A sealed object that does not authenticate under this account key.
    case doesNotOpen(String)
    /// A version-2 key object whose wrap opens but whose proof does not: altered.
    case unproven(String)

    package var description: String {
        switch self {
        case .notAKeyObject(let key):
            "\(key) is not a Photolala key object (wrong header or size): it was damaged or replaced; a NAS that holds the account key writes it again"
        case .wrongRecoveryKey(let key):
            "this recovery key does not open \(key): it is another account's key or one replaced by `recovery-key --rotate`, or the object was altered; enter the account's current recovery key"
        case .notSealed(let key):
            "\(key) is not an encrypted manifest object (wrong header or too short): it was damaged or written by something else"
        case .plaintext(let key):
            "\(key) is in the old plaintext format (1), which nothing authenticates"
        case .newerFormat(let key, let version):
            "\(key) is in format \(version), newer than this photolalad reads: update photolalad"
        case .unproven(let key):
            "\(key) opens with this recovery key but does not prove it was written with the account key it holds: it was altered; a NAS that holds the account key writes it again"
        case .doesNotOpen(let key):
            "\(key) does not authenticate under this account's key: it was written with another key, altered, or copied from another object"
        }
    }
}
