import Crypto

/// Every object under `metadata/{userId}/devices/…` from manifest format 2
/// (docs/manifest.md): `PLMANIF` 0x02, a random 12-byte nonce, then AES-256-GCM under the
/// metadata key, with the 8 header bytes ‖ the object's key as associated data, so an
/// object copied or moved to another key does not open.
package enum SealedObject {
    package static let magic: [UInt8] = Array("PLMANIF".utf8) + [2]
    /// Header, nonce and tag: what sealing adds to the plaintext.
    package static let overhead = 8 + 12 + 16

    package static func seal(_ plaintext: [UInt8], key: MetadataKey, objectKey: String) -> [UInt8] {
        seal(plaintext, key: key, objectKey: objectKey, nonce: AES.GCM.Nonce())
    }

    /// With a given nonce: for the test vectors only. Random 96-bit nonces stay safe far
    /// beyond the objects an account writes (docs/manifest.md).
    static func seal(_ plaintext: [UInt8], key: MetadataKey, objectKey: String, nonce: AES.GCM.Nonce) -> [UInt8] {
        // Cannot fail: a 256-bit key and a 96-bit nonce are what AES-GCM takes.
        let box = try! AES.GCM.seal(plaintext, using: key.key, nonce: nonce, authenticating: magic + Array(objectKey.utf8))
        return magic + Array(box.combined!)
    }

    /// The plaintext, if the object authenticates as `objectKey` under `key`.
    package static func open(_ sealed: [UInt8], key: MetadataKey, objectKey: String) throws(VaultFailure) -> [UInt8] {
        guard sealed.count >= 8, sealed.starts(with: magic.prefix(7)) else { throw .notSealed(objectKey) }
        switch sealed[7] {
        case 1: throw .plaintext(objectKey)
        case 2: break
        default: throw .newerFormat(objectKey, version: sealed[7])
        }
        guard sealed.count >= overhead else { throw .notSealed(objectKey) }
        do {
            let box = try AES.GCM.SealedBox(combined: sealed[8...])
            return Array(try AES.GCM.open(box, using: key.key, authenticating: magic + Array(objectKey.utf8)))
        } catch {
            throw .doesNotOpen(objectKey)
        }
    }
}
