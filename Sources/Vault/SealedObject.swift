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
        // A device record that also keeps the wrapped account key (`SealedRecord`).
        case 3: return try SealedRecord.open(sealed, key: key, objectKey: objectKey)
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

/// A device record (`device.json`) from this release: a sealed object that also keeps the
/// account key wrapped under the recovery key (privacy.md "No side doors"), so the user's
/// recovery key opens the account on a new NAS while any device record survives, whatever
/// happened to the key object (docs/manifest.md "`device.json`"):
///
///     "PLMANIF" 0x03 | wrap length (1: 0 or 68) | wrap | nonce (12) | AES-256-GCM under M | tag (16)
///
/// The wrap is the key object's (nonce ‖ AES-GCM under W of K ‖ createdAt ‖ tag), with
/// bytes 0..9 ‖ the object's key as associated data; the seal's associated data is every
/// byte before its nonce ‖ the object's key, so it covers the wrap too.
package enum SealedRecord {
    package static let magic: [UInt8] = Array("PLMANIF".utf8) + [3]
    package static let wrapSize = 68

    /// What a NAS that holds the current recovery key puts in its record.
    package struct Wrap: Sendable, Equatable {
        package var recovery: RecoveryKey
        package var createdAt: Int64
        package init(recovery: RecoveryKey, createdAt: Int64) {
            self.recovery = recovery
            self.createdAt = createdAt
        }
    }

    package static func seal(_ plaintext: [UInt8], key: AccountKey, wrap: Wrap?, userId: String, objectKey: String) -> [UInt8] {
        seal(plaintext, key: key, wrap: wrap, userId: userId, objectKey: objectKey, nonces: (AES.GCM.Nonce(), AES.GCM.Nonce()))
    }

    /// With given nonces (wrap, seal): for the test vectors only.
    static func seal(_ plaintext: [UInt8], key: AccountKey, wrap: Wrap?, userId: String, objectKey: String,
                     nonces: (AES.GCM.Nonce, AES.GCM.Nonce)) -> [UInt8] {
        let objectKeyBytes = Array(objectKey.utf8)
        var out: [UInt8]
        if let wrap {
            out = KeyObject.sealWrap(key, recoveryCreatedAt: wrap.createdAt, wrappingKey: wrap.recovery.wrappingKey(userId: userId),
                                     header: magic + [UInt8(wrapSize)], objectKey: objectKeyBytes, nonce: nonces.0)
        } else {
            out = magic + [0]
        }
        // Cannot fail: a 256-bit key and a 96-bit nonce are what AES-GCM takes.
        let box = try! AES.GCM.seal(plaintext, using: key.metadataKey.key, nonce: nonces.1, authenticating: out + objectKeyBytes)
        return out + Array(box.combined!)
    }

    /// The account key the record's wrap holds for `recovery`, if it has one that opens and
    /// the record then opens under it (so the wrap is the one its writer sealed).
    package static func unwrap(_ bytes: [UInt8], recovery: RecoveryKey, userId: String, objectKey: String)
        -> (key: AccountKey, recoveryCreatedAt: Int64)? {
        guard bytes.count >= 9 + wrapSize, bytes.starts(with: magic), bytes[8] == UInt8(wrapSize) else { return nil }
        guard let opened = KeyObject.openWrap(bytes[9..<(9 + wrapSize)], wrappingKey: recovery.wrappingKey(userId: userId),
                                              header: Array(bytes[0..<9]), objectKey: Array(objectKey.utf8)),
              (try? open(bytes, key: opened.key.metadataKey, objectKey: objectKey)) != nil else { return nil }
        return opened
    }

    /// The record's plaintext, if it authenticates as `objectKey` under `key`.
    package static func open(_ bytes: [UInt8], key: MetadataKey, objectKey: String) throws(VaultFailure) -> [UInt8] {
        guard bytes.count >= 9, bytes.starts(with: magic), bytes[8] == 0 || bytes[8] == UInt8(wrapSize) else {
            throw .notSealed(objectKey)
        }
        let at = 9 + Int(bytes[8])
        guard bytes.count >= at + 28 else { throw .notSealed(objectKey) }
        do {
            let box = try AES.GCM.SealedBox(combined: bytes[at...])
            return Array(try AES.GCM.open(box, using: key.key, authenticating: Array(bytes[0..<at]) + Array(objectKey.utf8)))
        } catch {
            throw .doesNotOpen(objectKey)
        }
    }

    /// Whether the record carries a wrap of the account key.
    package static func hasWrap(_ bytes: [UInt8]) -> Bool {
        bytes.count > 8 && bytes.starts(with: magic) && bytes[8] == UInt8(wrapSize)
    }
}
