import Crypto

/// The account key as the bucket holds it, `metadata/{userId}/keys/account-key`
/// (docs/manifest.md): `PLAKEY\0` 0x01, a 12-byte nonce, then AES-256-GCM under the
/// recovery key's wrapping key of K ‖ the recovery key's creation time (int64 big-endian
/// Unix milliseconds), with the 8 header bytes ‖ the object's key as associated data.
package enum KeyObject {
    package static let magic: [UInt8] = Array("PLAKEY".utf8) + [0, 1]
    /// Header, nonce, 40 bytes of plaintext, tag.
    package static let size = 8 + 12 + 40 + 16

    package static func objectKey(userId: String) -> String { "metadata/\(userId)/keys/account-key" }

    package static func wrap(_ key: AccountKey, recoveryCreatedAt: Int64, recovery: RecoveryKey, userId: String) -> [UInt8] {
        wrap(key, recoveryCreatedAt: recoveryCreatedAt, recovery: recovery, userId: userId, nonce: AES.GCM.Nonce())
    }

    /// With a given nonce: for the test vectors only; every real wrap takes a fresh one.
    static func wrap(_ key: AccountKey, recoveryCreatedAt: Int64, recovery: RecoveryKey, userId: String, nonce: AES.GCM.Nonce) -> [UInt8] {
        let plaintext = key.bytes + withUnsafeBytes(of: recoveryCreatedAt.bigEndian, Array.init)
        let aad = magic + Array(objectKey(userId: userId).utf8)
        // Cannot fail: a 256-bit key and a 96-bit nonce are what AES-GCM takes.
        let box = try! AES.GCM.seal(plaintext, using: recovery.wrappingKey(userId: userId), nonce: nonce, authenticating: aad)
        return magic + Array(box.combined!)
    }

    /// K and the recovery key's creation time, if `recovery` opens the object as stored for `userId`.
    package static func unwrap(_ bytes: [UInt8], recovery: RecoveryKey, userId: String) throws(VaultFailure) -> (key: AccountKey, recoveryCreatedAt: Int64) {
        let objectKey = objectKey(userId: userId)
        guard bytes.count == size, bytes.starts(with: magic.prefix(7)) else { throw .notAKeyObject(objectKey) }
        guard bytes[7] == magic[7] else { throw .newerFormat(objectKey, version: bytes[7]) }
        let plaintext: [UInt8]
        do {
            let box = try AES.GCM.SealedBox(combined: bytes[8...])
            plaintext = Array(try AES.GCM.open(box, using: recovery.wrappingKey(userId: userId), authenticating: magic + Array(objectKey.utf8)))
        } catch {
            throw .wrongRecoveryKey(objectKey)
        }
        let createdAt = plaintext[32..<40].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return (AccountKey(bytes: Array(plaintext[0..<32])), Int64(bitPattern: createdAt))
    }
}
