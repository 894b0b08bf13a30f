import Digests
import Foundation
import PhotolalaCore

/// A record as its line in `audit.log`: the keys in cli.md's order (seq, at, event, actor,
/// outcome, details, prev), so a person reading the file sees the number and time first.
/// The chain hashes the bytes as written, so no canonical form is needed to check it.
package enum AuditLine {
    package static func render(_ r: AuditRecord) -> String {
        let fields: [(String, String)] = [
            ("seq", "\(r.seq)"), ("at", json(r.at)), ("event", json(r.event.rawValue)), ("actor", json(r.actor)),
            ("outcome", json(r.outcome.rawValue)), ("details", json(r.details)), ("prev", json(r.prev)),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// The two fields the chain needs (`seq`, `prev`) of a line as read back; nil when it
    /// is not a record. The rest of the line counts only through its hash.
    package static func head(_ line: some Collection<UInt8>) -> (seq: Int64, prev: String)? {
        guard let h = try? JSONDecoder().decode(Head.self, from: Data(line)) else { return nil }
        return (h.seq, h.prev)
    }

    private struct Head: Decodable {
        var seq: Int64
        var prev: String
    }

    /// The hex SHA-256 of a line without its newline: the next record's `prev`.
    package static func hash(_ line: String) -> String {
        SHA256.hexDigest(line)
    }

    /// The same, of a line as read back (bytes, whatever they hold).
    package static func hash(_ line: some Collection<UInt8>) -> String {
        SHA256.hexDigest(Array(line))
    }

    /// ISO 8601 UTC with milliseconds: records a moment apart stay apart.
    package static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// JSON text of one value: strings escaped (a newline can never split a record),
    /// objects with sorted keys.
    private static func json(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(value)) ?? Data("null".utf8), as: UTF8.self)
    }
}
