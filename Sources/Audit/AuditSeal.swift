import Crypto
import Digests
import Foundation
import Vault

/// Forward sealing of the audit trail (cli.md "audit", docs/audit-seal.md, after journald's
/// Forward Secure Sealing): each batch of records is one *epoch*, sealed with that epoch's
/// key, which moves forward one way and is forgotten before the batch is done. Whoever
/// becomes root on the NAS later finds only the key of the next epoch, from which no
/// earlier key can be computed, so they cannot seal anything in the place of what was
/// sealed before they came. The verification key (the first epoch's key) computes every
/// epoch's key; it is shown to root once and then kept nowhere on the NAS.
///
/// Every primitive is swift-crypto's HMAC-SHA256; the byte layout is in docs/audit-seal.md.
package enum AuditSealing {
    static let label = "photolala-audit-seal-v1"
    static let nextLabel = Array("\(label) next".utf8)
    static let tagLabel = Array("\(label) tag".utf8)
    static let stateLabel = Array("\(label) state".utf8)
    static let fingerprintLabel = Array("\(label) fingerprint".utf8)
    static let checkLabel = Array("\(label) check".utf8)

    static func mac(_ key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        Array(HMAC<Crypto.SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }
}

/// The key of one epoch: K₀ is the verification key's 32 bytes, K₍ₙ₊₁₎ = HMAC-SHA256(Kₙ,
/// "photolala-audit-seal-v1 next"). Never printed (its description says so).
package struct SealingKey: Sendable, Equatable, CustomStringConvertible {
    package static let size = 32
    package let epoch: UInt64
    package let bytes: [UInt8]

    package init(epoch: UInt64, bytes: [UInt8]) {
        precondition(bytes.count == Self.size, "a sealing key is 32 bytes")
        self.epoch = epoch
        self.bytes = bytes
    }

    /// The next epoch's key. This one cannot be computed back from it.
    package func next() -> SealingKey {
        SealingKey(epoch: epoch + 1, bytes: AuditSealing.mac(bytes, AuditSealing.nextLabel))
    }

    /// The key `steps` epochs on.
    package func advanced(by steps: UInt64) -> SealingKey {
        var key = self
        for _ in 0..<steps { key = key.next() }
        return key
    }

    /// The epoch's seal of `seal`: HMAC-SHA256(Tₙ, message), Tₙ = HMAC-SHA256(Kₙ, "… tag"), hex.
    package func tag(_ seal: AuditSeal) -> String {
        let tagKey = AuditSealing.mac(bytes, AuditSealing.tagLabel)
        return Hex.string(AuditSealing.mac(tagKey, seal.message))
    }

    /// What the key file shows of its key without giving it away: HMAC-SHA256(Kₙ, "… state"),
    /// hex. The verifier computes it from the verification key, so a key file moved back to
    /// an earlier epoch (whose key nobody has any more) shows.
    package var commitment: String {
        Hex.string(AuditSealing.mac(bytes, AuditSealing.stateLabel))
    }

    package var description: String { "SealingKey(epoch \(epoch), redacted)" }
}

/// The key that checks every epoch: K₀, 32 random bytes. Written for people as 64 Crockford
/// base32 characters in 8 groups of 8 (the 32 bytes and an 8-byte check), so a typo or a
/// cut copy is caught before it is used.
package struct VerificationKey: Sendable, Equatable, CustomStringConvertible {
    package let bytes: [UInt8]

    package init(bytes: [UInt8]) {
        precondition(bytes.count == SealingKey.size, "a verification key is 32 bytes")
        self.bytes = bytes
    }

    package static func generate() -> VerificationKey {
        VerificationKey(bytes: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    /// Epoch 0's sealing key.
    package var first: SealingKey { SealingKey(epoch: 0, bytes: bytes) }

    /// The first 16 bytes of HMAC-SHA256(K₀, "… fingerprint"), hex: names the key (the trail
    /// and the `audit --verification-key` answer show it) and opens nothing.
    package var fingerprint: String {
        Hex.string(Array(AuditSealing.mac(bytes, AuditSealing.fingerprintLabel).prefix(16)))
    }

    var check: [UInt8] { Array(Crypto.SHA256.hash(data: AuditSealing.checkLabel + bytes).prefix(8)) }

    /// `XXXXXXXX-XXXXXXXX-…` (8 groups of 8), upper case.
    package var text: String {
        let chars = Array(Crockford32.encode(bytes + check).utf8)
        return stride(from: 0, to: chars.count, by: 8).map { String(decoding: chars[$0..<$0 + 8], as: UTF8.self) }
            .joined(separator: "-")
    }

    package var description: String { "VerificationKey(fingerprint \(fingerprint))" }

    package enum ParseError: Error, Equatable, CustomStringConvertible {
        case character(String, position: Int)
        case length(Int)
        case typo

        package var description: String {
            switch self {
            case .character(let c, let position):
                "'\(c)' (character \(position)) cannot be in a verification key: it uses the digits and the letters A–Z except I, L, O and U; check what you gave"
            case .length(let n):
                "a verification key has 64 characters (8 groups of 8; dashes and spaces do not count), this has \(n): check that none is missing"
            case .typo:
                "this verification key has a typo: its check does not match (a character is wrong, or two are swapped); compare it with the key you kept"
            }
        }
    }

    /// Reads a key as given (any case, dashes and white space ignored, `I`/`L` for 1 and
    /// `O` for 0), checked before any use.
    package static func parse(_ text: String) throws(ParseError) -> VerificationKey {
        let decoded: [UInt8]
        do {
            decoded = try Crockford32.keyBytes(text, characters: 64)
        } catch {
            switch error {
            case .character(let scalar, let position):
                throw .character(scalar.isASCII && scalar.value >= 0x20 && scalar.value < 0x7f ? String(Character(scalar)) : "U+\(String(scalar.value, radix: 16, uppercase: true))",
                                 position: position)
            case .length(let n): throw .length(n)
            }
        }
        let key = VerificationKey(bytes: Array(decoded.prefix(SealingKey.size)))
        guard key.check == Array(decoded.suffix(8)) else { throw .typo }
        return key
    }
}

/// One epoch's seal, a line of `audit.seals`: the records it covers (after record `from`,
/// up to record `seq`, whose line hashes to `hash`, which chains every record before it),
/// the trail's head when it was sealed, when, under which verification key, and the tag.
package struct AuditSeal: Sendable, Equatable {
    package var epoch: UInt64
    /// The last record the epoch before sealed (0 before the first record).
    package var from: Int64
    package var seq: Int64
    package var hash: String
    package var head: AuditMark
    /// ISO 8601 UTC with milliseconds, as the records' `at`.
    package var at: String
    /// The verification key's fingerprint.
    package var key: String
    package var tag: String

    package init(epoch: UInt64, from: Int64, seq: Int64, hash: String, head: AuditMark, at: String, key: String, tag: String = "") {
        self.epoch = epoch
        self.from = from
        self.seq = seq
        self.hash = hash
        self.head = head
        self.at = at
        self.key = key
        self.tag = tag
    }

    /// What the tag authenticates: one line of ASCII, every field in a fixed order.
    package var message: [UInt8] {
        Array("\(AuditSealing.label) epoch=\(epoch) from=\(from) seq=\(seq) hash=\(hash) head=\(head.seq):\(head.hash) at=\(at) key=\(key)".utf8)
    }

    /// The mark the seal names: record `seq` and its hash.
    package var mark: AuditMark { AuditMark(seq: seq, hash: hash) }

    /// Its line in `audit.seals` (keys in this order; no newline).
    package var line: String {
        "{\"epoch\":\(epoch),\"from\":\(from),\"seq\":\(seq),\"hash\":\"\(hash)\",\"head\":\"\(head.seq) \(head.hash)\",\"at\":\"\(at)\",\"key\":\"\(key)\",\"tag\":\"\(tag)\"}"
    }

    private struct Fields: Decodable {
        var epoch: UInt64
        var from: Int64
        var seq: Int64
        var hash: String
        var head: String
        var at: String
        var key: String
        var tag: String
    }

    /// A line read back; nil when it is not a seal.
    package static func parse(_ line: some Collection<UInt8>) -> AuditSeal? {
        guard let f = try? JSONDecoder().decode(Fields.self, from: Data(line)), let head = AuditMark(f.head),
              f.hash.utf8.count == 64, f.tag.utf8.count == 64, f.seq >= f.from, f.from >= 0,
              f.at.utf8.count <= 64, f.key.utf8.count <= 64 else { return nil }
        return AuditSeal(epoch: f.epoch, from: f.from, seq: f.seq, hash: f.hash, head: head, at: f.at, key: f.key, tag: f.tag)
    }

    /// Sealed with `key` (its epoch must be this seal's).
    package func sealed(with key: SealingKey) -> AuditSeal {
        precondition(key.epoch == epoch, "an epoch is sealed with its own key")
        var s = self
        s.tag = key.tag(self)
        return s
    }
}
