import Crypto

/// The account key as the bucket holds it, `metadata/{userId}/keys/account-key`
/// (docs/manifest.md "The key object").
///
/// Version 1 (earlier releases, still read): `PLAKEY\0` 0x01, a 12-byte nonce, then
/// AES-256-GCM under the recovery key's wrapping key W of K ‖ the recovery key's creation
/// time (int64 big-endian Unix milliseconds), with the 8 header bytes ‖ the object's key as
/// associated data. 76 bytes.
///
/// Version 2 (written from this release) keeps that wrap (bytes 8..76, the same associated
/// data but for the version byte) and proves who made it (privacy.md "No side doors"):
///
///     76          sections: bit 0 the previous account key follows, bit 1 its endorsement follows
///     +60         previous key: nonce ‖ AES-GCM under T(K) of K_prev ‖ tag  (while a new account key is put in place)
///     +32         successor: HMAC-SHA256 under E(K_prev) of bytes 0..76 ‖ the object's key
///     last 36     proof: nonce ‖ AES-GCM under P(K) of the generation (uint64 BE) ‖ tag
///
/// Every section's associated data is every byte before it ‖ the object's key, so the proof
/// covers the whole object: only a holder of K can write one that its holders accept.
package enum KeyObject {
    package static let magicV1: [UInt8] = Array("PLAKEY".utf8) + [0, 1]
    package static let magic: [UInt8] = Array("PLAKEY".utf8) + [0, 2]
    /// Version 1's size: header, nonce, 40 bytes of plaintext, tag.
    package static let sizeV1 = 8 + 12 + 40 + 16
    static let wrapEnd = sizeV1
    static let previousSize = 12 + 32 + 16
    static let successorSize = 32
    static let proofSize = 12 + 8 + 16
    /// The smallest version-2 object: the wrap, the sections byte and the proof.
    package static let size = wrapEnd + 1 + proofSize

    package static func objectKey(userId: String) -> String { "metadata/\(userId)/keys/account-key" }

    /// What a version-2 object holds besides the wrap.
    package struct Extras: Sendable, Equatable {
        /// Grows by one with every recovery key (`--rotate`, `--new-account-key`): a holder
        /// that knows a higher one takes a lower one for an old copy put back.
        package var generation: UInt64
        /// While a new account key is put in place: the one it replaces, which still seals
        /// what is not sealed again yet (readable with the new recovery key only).
        package var previous: AccountKey?
        /// The account key this one replaces, which endorses it (so its holders stop using it
        /// and ask for the new recovery key instead of taking the object for a substitution).
        package var endorsedBy: AccountKey?

        package init(generation: UInt64, previous: AccountKey? = nil, endorsedBy: AccountKey? = nil) {
            self.generation = generation
            self.previous = previous
            self.endorsedBy = endorsedBy
        }
    }

    /// A version-2 key object of generation 0 with nothing else: the tests' shorthand.
    package static func wrap(_ key: AccountKey, recoveryCreatedAt: Int64, recovery: RecoveryKey, userId: String) -> [UInt8] {
        wrap(key, recoveryCreatedAt: recoveryCreatedAt, recovery: recovery, userId: userId, extras: .init(generation: 0))
    }

    /// A version-2 key object with fresh nonces.
    package static func wrap(_ key: AccountKey, recoveryCreatedAt: Int64, recovery: RecoveryKey, userId: String,
                             extras: Extras) -> [UInt8] {
        wrap(key, recoveryCreatedAt: recoveryCreatedAt, recovery: recovery, userId: userId, extras: extras,
             nonces: (AES.GCM.Nonce(), AES.GCM.Nonce(), AES.GCM.Nonce()))
    }

    /// With given nonces (wrap, previous key, proof): for the test vectors only.
    static func wrap(_ key: AccountKey, recoveryCreatedAt: Int64, recovery: RecoveryKey, userId: String, extras: Extras,
                     nonces: (AES.GCM.Nonce, AES.GCM.Nonce, AES.GCM.Nonce)) -> [UInt8] {
        let objectKey = Array(objectKey(userId: userId).utf8)
        var out = sealWrap(key, recoveryCreatedAt: recoveryCreatedAt, wrappingKey: recovery.wrappingKey(userId: userId),
                           header: magic, objectKey: objectKey, nonce: nonces.0)
        var sections: UInt8 = 0
        if extras.previous != nil { sections |= 1 }
        if extras.endorsedBy != nil { sections |= 2 }
        out.append(sections)
        if let previous = extras.previous {
            // Cannot fail: a 256-bit key and a 96-bit nonce are what AES-GCM takes.
            let box = try! AES.GCM.seal(previous.bytes, using: key.previousKey, nonce: nonces.1, authenticating: out + objectKey)
            out += Array(box.combined!)
        }
        if let endorsedBy = extras.endorsedBy {
            out += endorsement(by: endorsedBy, of: Array(out[0..<wrapEnd]), objectKey: objectKey)
        }
        let box = try! AES.GCM.seal(withUnsafeBytes(of: extras.generation.bigEndian, Array.init), using: key.proofKey,
                                    nonce: nonces.2, authenticating: out + objectKey)
        return out + Array(box.combined!)
    }

    /// Version 1, as earlier releases wrote it: for the tests of what this release does with
    /// the objects of an older one.
    package static func wrapV1(_ key: AccountKey, recoveryCreatedAt: Int64, recovery: RecoveryKey, userId: String) -> [UInt8] {
        wrapV1(key, recoveryCreatedAt: recoveryCreatedAt, recovery: recovery, userId: userId, nonce: AES.GCM.Nonce())
    }

    static func wrapV1(_ key: AccountKey, recoveryCreatedAt: Int64, recovery: RecoveryKey, userId: String, nonce: AES.GCM.Nonce) -> [UInt8] {
        sealWrap(key, recoveryCreatedAt: recoveryCreatedAt, wrappingKey: recovery.wrappingKey(userId: userId), header: magicV1,
                 objectKey: Array(objectKey(userId: userId).utf8), nonce: nonce)
    }

    /// `header` ‖ nonce ‖ AES-GCM under `wrappingKey` of K ‖ createdAt ‖ tag, with `header` ‖
    /// `objectKey` as associated data: the wrap the key object and a device record share.
    package static func sealWrap(_ key: AccountKey, recoveryCreatedAt: Int64, wrappingKey: SymmetricKey, header: [UInt8],
                                 objectKey: [UInt8], nonce: AES.GCM.Nonce = AES.GCM.Nonce()) -> [UInt8] {
        let plaintext = key.bytes + withUnsafeBytes(of: recoveryCreatedAt.bigEndian, Array.init)
        let box = try! AES.GCM.seal(plaintext, using: wrappingKey, nonce: nonce, authenticating: header + objectKey)
        return header + Array(box.combined!)
    }

    /// The inverse of `sealWrap` for the 68 bytes after `header`; nil when they do not open.
    package static func openWrap(_ wrap: ArraySlice<UInt8>, wrappingKey: SymmetricKey, header: [UInt8], objectKey: [UInt8])
        -> (key: AccountKey, recoveryCreatedAt: Int64)? {
        guard wrap.count == 68, let box = try? AES.GCM.SealedBox(combined: wrap),
              let plaintext = try? AES.GCM.open(box, using: wrappingKey, authenticating: header + objectKey) else { return nil }
        let bytes = Array(plaintext)
        let createdAt = bytes[32..<40].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return (AccountKey(bytes: Array(bytes[0..<32])), Int64(bitPattern: createdAt))
    }

    /// The endorsement of the object whose wrap is `wrap` (bytes 0..76) by `previous`.
    static func endorsement(by previous: AccountKey, of wrap: [UInt8], objectKey: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: wrap + objectKey, using: previous.successorKey))
    }

    /// What a key object is, as far as its bytes alone tell: version 1 or 2 with their
    /// sections, or why it is not one.
    package struct Layout: Sendable, Equatable {
        package var version: UInt8
        /// Where each version-2 section starts (nil: absent).
        var previousAt: Int?
        var successorAt: Int?
        var proofAt: Int
    }

    package static func layout(_ bytes: [UInt8], userId: String) throws(VaultFailure) -> Layout {
        let objectKey = objectKey(userId: userId)
        guard bytes.count >= 8, bytes.starts(with: magic.prefix(7)) else { throw .notAKeyObject(objectKey) }
        switch bytes[7] {
        case 1:
            guard bytes.count == sizeV1 else { throw .notAKeyObject(objectKey) }
            return Layout(version: 1, proofAt: sizeV1)
        case 2:
            guard bytes.count > wrapEnd, bytes[wrapEnd] & ~3 == 0 else { throw .notAKeyObject(objectKey) }
            var at = wrapEnd + 1
            var layout = Layout(version: 2, proofAt: 0)
            if bytes[wrapEnd] & 1 != 0 { layout.previousAt = at; at += previousSize }
            if bytes[wrapEnd] & 2 != 0 { layout.successorAt = at; at += successorSize }
            layout.proofAt = at
            guard bytes.count == at + proofSize else { throw .notAKeyObject(objectKey) }
            return layout
        default:
            throw .newerFormat(objectKey, version: bytes[7])
        }
    }

    /// What `recovery` opens of the object: the account key and its recovery key's creation
    /// time and, in version 2 (whose proof must then open under that account key, or the
    /// object is not believed), the generation and the previous account key.
    package struct Opened: Sendable, Equatable {
        package var key: AccountKey
        package var recoveryCreatedAt: Int64
        package var version: UInt8
        package var generation: UInt64
        package var previous: AccountKey?
        /// An endorsement by the previous account key is there (checked only by its holders).
        package var endorsed: Bool
    }

    package static func unwrap(_ bytes: [UInt8], recovery: RecoveryKey, userId: String) throws(VaultFailure) -> Opened {
        let layout = try layout(bytes, userId: userId)
        let objectKey = Self.objectKey(userId: userId)
        let key = Array(objectKey.utf8)
        guard let (account, createdAt) = openWrap(bytes[8..<wrapEnd], wrappingKey: recovery.wrappingKey(userId: userId),
                                                  header: Array(bytes[0..<8]), objectKey: key) else {
            throw .wrongRecoveryKey(objectKey)
        }
        var opened = Opened(key: account, recoveryCreatedAt: createdAt, version: layout.version, generation: 0, previous: nil,
                            endorsed: layout.successorAt != nil)
        guard layout.version == 2 else { return opened }
        guard let generation = proof(bytes, layout: layout, key: account, objectKey: key) else { throw .unproven(objectKey) }
        opened.generation = generation
        if let at = layout.previousAt {
            guard let box = try? AES.GCM.SealedBox(combined: bytes[at..<(at + previousSize)]),
                  let previous = try? AES.GCM.open(box, using: account.previousKey, authenticating: Array(bytes[0..<at]) + key) else {
                throw .unproven(objectKey)
            }
            opened.previous = AccountKey(bytes: Array(previous))
        }
        return opened
    }

    /// What the object says to a NAS that holds `key` (and no recovery key opens it):
    /// written by a holder of this account key (its generation), the successor this key
    /// endorsed, or neither.
    package enum Standing: Sendable, Equatable {
        /// Version 2, proven under this account key.
        case proven(generation: UInt64)
        /// Version 2 of another account key that this one endorsed: a new account key.
        case successor
        /// Nothing ties it to this account key (a version-1 object proves nothing).
        case unproven
    }

    package static func standing(_ bytes: [UInt8], holding key: AccountKey, userId: String) throws(VaultFailure) -> Standing {
        let layout = try layout(bytes, userId: userId)
        guard layout.version == 2 else { return .unproven }
        let objectKey = Array(Self.objectKey(userId: userId).utf8)
        if let generation = proof(bytes, layout: layout, key: key, objectKey: objectKey) { return .proven(generation: generation) }
        if let at = layout.successorAt,
           HMAC<SHA256>.isValidAuthenticationCode(bytes[at..<(at + successorSize)], authenticating: Array(bytes[0..<wrapEnd]) + objectKey,
                                                  using: key.successorKey) {
            return .successor
        }
        return .unproven
    }

    /// The generation, if the proof opens under `key`.
    private static func proof(_ bytes: [UInt8], layout: Layout, key: AccountKey, objectKey: [UInt8]) -> UInt64? {
        let at = layout.proofAt
        guard let box = try? AES.GCM.SealedBox(combined: bytes[at...]),
              let plain = try? AES.GCM.open(box, using: key.proofKey, authenticating: Array(bytes[0..<at]) + objectKey),
              plain.count == 8 else { return nil }
        return plain.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }
}
