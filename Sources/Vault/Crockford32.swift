/// Crockford's base32 (https://www.crockford.com/base32.html) for the recovery key: digits
/// and letters without I, L, O and U, so that nothing read aloud or copied by hand is
/// ambiguous. Bits are taken most significant first, 5 a character. The audit trail's
/// verification key is written with it too.
package enum Crockford32 {
    package static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    /// The value of a typed character: case-insensitive, `I`/`L` read as 1 and `O` as 0
    /// (Crockford's rule for look-alikes); nil for anything else.
    package static func value(of c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return value(of: c - 32)
        case UInt8(ascii: "O"): return 0
        case UInt8(ascii: "I"), UInt8(ascii: "L"): return 1
        default: return alphabet.firstIndex(of: c).map(UInt8.init)
        }
    }

    /// `bytes.count * 8` must be a multiple of 5 (the recovery key's 20 bytes are 32 characters).
    package static func encode(_ bytes: [UInt8]) -> String {
        precondition(bytes.count * 8 % 5 == 0)
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(alphabet[Int((buffer >> UInt32(bits)) & 31)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The inverse of `encode` for values already checked by `value(of:)`.
    package static func decode(_ values: [UInt8]) -> [UInt8] {
        precondition(values.count * 5 % 8 == 0)
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for v in values {
            buffer = (buffer << 5) | UInt32(v)
            bits += 5
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((buffer >> UInt32(bits)) & 0xFF))
            }
        }
        return out
    }
}

extension Crockford32 {
    /// What is wrong with a key as given, before its check is looked at.
    package enum KeyTextError: Error, Equatable {
        /// A character no key has (as given, and its position among the characters).
        case character(Unicode.Scalar, position: Int)
        /// Not `characters` characters (dashes and white space not counted).
        case length(Int)
    }

    /// The one reader of a key people copy or type (the recovery key, the audit trail's
    /// verification key): any case, dashes and white space ignored, `I`/`L` for 1 and `O`
    /// for 0, exactly `characters` characters. The bytes decoded, the check among them
    /// left to the key's own type.
    package static func keyBytes(_ text: String, characters: Int) throws(KeyTextError) -> [UInt8] {
        var values: [UInt8] = []
        var position = 0
        for scalar in text.unicodeScalars {
            if scalar == "-" || scalar.properties.isWhitespace { continue }
            position += 1
            guard scalar.isASCII, let v = value(of: UInt8(scalar.value)) else { throw .character(scalar, position: position) }
            values.append(v)
        }
        guard values.count == characters else { throw .length(values.count) }
        return decode(values)
    }
}
