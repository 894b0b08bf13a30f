import Crypto

/// The account's recovery key (privacy.md): 128 random bits, generated, never chosen,
/// written for people as 32 Crockford base32 characters in 8 groups of 4. The last 4 of
/// its 20 bytes are a check, so a typo is caught before anything is sent or tried.
///
/// Its only use is to derive the key that wraps the account key in the bucket. Being
/// random and 128 bits long, it needs no slow derivation: HKDF-SHA256 (docs/decisions.md).
package struct RecoveryKey: Sendable, Equatable, CustomStringConvertible {
    package static let secretSize = 16
    static let checkLabel = Array("photolala recovery key check v1".utf8)
    static let wrapInfo = Array("photolala recovery wrap v1".utf8)

    /// The 16 random bytes: the secret itself.
    package let secret: [UInt8]

    package init(secret: [UInt8]) {
        precondition(secret.count == Self.secretSize, "a recovery key is 16 bytes")
        self.secret = secret
    }

    /// A new key from the system's cryptographic random source.
    package static func generate() -> RecoveryKey {
        RecoveryKey(secret: SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) })
    }

    /// The first 4 bytes of SHA-256("photolala recovery key check v1" ‖ secret).
    package var check: [UInt8] {
        Array(SHA256.hash(data: Self.checkLabel + secret).prefix(4))
    }

    /// `XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX`, upper case.
    package var formatted: String {
        let text = Array(Crockford32.encode(secret + check).utf8)
        return stride(from: 0, to: text.count, by: 4).map { String(decoding: text[$0..<$0 + 4], as: UTF8.self) }.joined(separator: "-")
    }

    /// Never the key: values get printed by accident (a log line, a test failure).
    package var description: String { "RecoveryKey(redacted)" }

    /// W = HKDF-SHA256(ikm: the secret, salt: UTF-8(userId), info: "photolala recovery wrap v1"):
    /// the key that wraps the account key for this account.
    package func wrappingKey(userId: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: secret), salt: Array(userId.utf8), info: Self.wrapInfo,
                               outputByteCount: 32)
    }

    package enum ParseError: Error, Equatable, CustomStringConvertible {
        /// A character that cannot be in a key (as typed, with its position among the characters).
        case character(String, position: Int)
        /// Not 32 characters (dashes and white space not counted).
        case length(Int)
        /// Well formed, but the check does not match.
        case typo

        package var description: String {
            switch self {
            case .character(let c, let position):
                "\(c) (character \(position)) cannot be in a recovery key: recovery keys use the digits and the letters A–Z except I, L, O and U; check what you typed"
            case .length(let n):
                "a recovery key has 32 characters (8 groups of 4; dashes and spaces do not count), this has \(n): check that none is missing or doubled"
            case .typo:
                "this recovery key has a typo: its check does not match (a character is wrong, or two are swapped); compare it with the key you kept"
            }
        }
    }

    /// Reads a key as a person may type it: any case, with or without dashes and white
    /// space, `I`/`L` for 1 and `O` for 0. Refuses anything else before any use of it.
    package static func parse(_ text: String) throws(ParseError) -> RecoveryKey {
        let bytes: [UInt8]
        do {
            bytes = try Crockford32.keyBytes(text, characters: 32)
        } catch {
            switch error {
            case .character(let scalar, let position): throw .character(Self.shown(scalar), position: position)
            case .length(let n): throw .length(n)
            }
        }
        let key = RecoveryKey(secret: Array(bytes.prefix(secretSize)))
        guard key.check == Array(bytes.suffix(4)) else { throw .typo }
        return key
    }

    /// A character for an error message: quoted when printable, its code point otherwise.
    private static func shown(_ scalar: Unicode.Scalar) -> String {
        let printable = scalar.properties.generalCategory != .control && scalar.properties.generalCategory != .format
            && scalar.properties.generalCategory != .unassigned
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return printable ? "'\(Character(scalar))'" : "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
