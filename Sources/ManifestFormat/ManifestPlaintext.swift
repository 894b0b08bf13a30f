import Foundation

/// A format-2 plaintext taken apart and put together again with its header's JSON edited
/// and everything else byte for byte (`recovery-key --rotate --new-account-key` seals every
/// object again and relinks the chain): fields this release does not know are kept, and
/// the records are never decoded, so nothing a later writer added is lost.
package enum ManifestPlaintext {
    /// A segment's plaintext: header length, header (JSON or a zlib stream of it), records.
    package static func header(of plaintext: [UInt8]) -> (header: [String: Any], records: ArraySlice<UInt8>)? {
        guard plaintext.count >= 4 else { return nil }
        let length = plaintext[0..<4].reduce(0) { $0 << 8 | Int($1) }
        guard plaintext.count >= 4 + length, let json = SealedJSON.unpack(Array(plaintext[4..<(4 + length)])),
              let header = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any] else { return nil }
        return (header, plaintext[(4 + length)...])
    }

    /// `header` (deflated) and `records` as a segment's plaintext.
    package static func segment(header: [String: Any], records: ArraySlice<UInt8>) -> [UInt8]? {
        guard let json = encode(header) else { return nil }
        let packed = SealedJSON.pack(json)
        let n = UInt32(packed.count)
        return [UInt8(n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
            + packed + records
    }

    /// A device record's plaintext (the JSON, or a zlib stream of it) as a dictionary.
    package static func record(_ plaintext: [UInt8]) -> [String: Any]? {
        guard let json = SealedJSON.unpack(plaintext) else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any]
    }

    /// A dictionary as a device record's plaintext (deflated JSON).
    package static func record(_ fields: [String: Any]) -> [UInt8]? {
        encode(fields).map(SealedJSON.pack)
    }

    private static func encode(_ object: [String: Any]) -> [UInt8]? {
        guard JSONSerialization.isValidJSONObject(object),
              let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return nil }
        return Array(data)
    }
}
