import Crypto

/// The account key K (privacy.md): 256 random bits that encrypt and authenticate
/// everything under `metadata/{userId}/`. Made once per account, by its first NAS; it
/// leaves a NAS only wrapped by a key derived from the recovery key (`KeyObject`).
package struct AccountKey: Sendable, Equatable, CustomStringConvertible {
    package static let size = 32
    static let fingerprintInfo = Array("photolala account key fingerprint v1".utf8)
    static let metadataInfo = Array("photolala metadata v2".utf8)
    /// The key object's own keys (docs/manifest.md "The key object"): its proof that a holder
    /// of K wrote it, the previous account key it carries while a new one is put in place, and
    /// the endorsement of the account key that replaces this one.
    static let proofInfo = Array("photolala key object proof v1".utf8)
    static let previousInfo = Array("photolala key object previous key v1".utf8)
    static let successorInfo = Array("photolala key object successor v1".utf8)

    package let bytes: [UInt8]

    package init(bytes: [UInt8]) {
        precondition(bytes.count == Self.size, "an account key is 32 bytes")
        self.bytes = bytes
    }

    package static func generate() -> AccountKey {
        AccountKey(bytes: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    /// HKDF-SHA256(K, no salt, "photolala account key fingerprint v1", 16 bytes) as 32 lowercase
    /// hex: the same on every NAS of the account, and says nothing about K.
    package var fingerprint: String {
        derive(Self.fingerprintInfo, count: 16).withUnsafeBytes { $0.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined() }
    }

    /// M = HKDF-SHA256(K, no salt, "photolala metadata v2", 32 bytes): the key of every sealed object.
    package var metadataKey: MetadataKey { MetadataKey(key: derive(Self.metadataInfo, count: 32)) }

    /// P: seals the key object's proof (its generation), so a holder of K tells an object
    /// written by a holder of K from anything else.
    package var proofKey: SymmetricKey { derive(Self.proofInfo, count: 32) }
    /// T: seals the previous account key inside the key object while a new one is put in place.
    package var previousKey: SymmetricKey { derive(Self.previousInfo, count: 32) }
    /// E: the HMAC key with which this account key endorses the one that replaces it.
    package var successorKey: SymmetricKey { derive(Self.successorInfo, count: 32) }

    /// Never the key itself.
    package var description: String { "AccountKey(fingerprint \(fingerprint))" }

    /// An empty salt: HMAC pads its key with zeros, so this equals RFC 5869's default salt
    /// of 32 zero bytes (what Python's `HKDF(salt=None)` uses).
    private func derive(_ info: [UInt8], count: Int) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: bytes), salt: [UInt8](), info: info, outputByteCount: count)
    }
}

/// M, derived from the account key; a type of its own so no other key is sealed with by mistake.
package struct MetadataKey: Sendable, CustomStringConvertible {
    package let key: SymmetricKey
    package var description: String { "MetadataKey(redacted)" }
}
