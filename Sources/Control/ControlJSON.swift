import Foundation

/// One JSON style for the wire and `--json` output: sorted keys, ISO dates, no escaped slashes.
package enum ControlJSON {
    package static func encode<T: Encodable>(_ value: T, pretty: Bool = false) throws -> [UInt8] {
        let e = JSONEncoder()
        e.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        return Array(try e.encode(value))
    }

    package static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}
