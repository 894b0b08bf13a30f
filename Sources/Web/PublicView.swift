import Control
import Foundation
import PhotolalaCore

/// What the page's read-only routes show to anyone who reaches them (privacy.md "No side
/// doors": names of files and folders only with a session). The status loses its folder
/// paths, the account's id, the pairing code and every path-like word in a message; what
/// is left still says how the backup is doing and what needs the user.
package enum PublicView {
    package static func status(_ s: DaemonStatus) -> DaemonStatus {
        var s = s
        s.account.userId = nil
        s.pairing = nil
        s.watch.paths = []
        s.watch.missingFolders = s.watch.missingFolders.map { _ in "(a watched folder)" }
        s.attention = s.attention.map { item in
            var item = item
            if item.subject != nil { item.subject = nil }
            if item.reason == .folderMissing {
                item.message = "A watched folder is missing or unreadable: nothing in it is backed up."
            }
            return item
        }
        return s
    }

    /// The JSON of `value` with every string scrubbed of paths: a safety net for fields
    /// added later (the mirror's `folder`, an error quoting a file) that the explicit
    /// redactions above do not know.
    package static func scrubbed(_ json: [UInt8]) -> [UInt8] {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(json)) else { return json }
        return (try? ControlJSON.encode(value.scrubbed)) ?? json
    }

    /// Replaces each absolute path in `text` (a `/` not inside a word or a URL, up to the
    /// next space or quote) with "(a path)"; `10MiB/s`, `https://host/x` stay as they are.
    package static func scrub(_ text: String) -> String {
        guard text.contains("/") else { return text }
        var out = ""
        var chars = Array(text)
        var i = 0
        func partOfWordOrURL(_ c: Character) -> Bool { c.isLetter || c.isNumber || c == ":" || c == "/" || c == "_" || c == "." || c == "-" }
        while i < chars.count {
            let c = chars[i]
            if c == "/", i == 0 || !partOfWordOrURL(chars[i - 1]) {
                var j = i + 1
                while j < chars.count, !" \t\n\"'`,;()<>".contains(chars[j]) { j += 1 }
                // A trailing period or colon ends the sentence, not the path.
                while j > i + 1, ".:".contains(chars[j - 1]) { j -= 1 }
                if j > i + 1 {
                    out += "(a path)"
                    i = j
                    continue
                }
            }
            out.append(c)
            i += 1
        }
        chars.removeAll()
        return out
    }
}

/// Any JSON, to walk the strings of a value whose shape the page does not know.
enum JSONValue: Codable, Equatable {
    case null, bool(Bool), int(Int64), double(Double), string(String), array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null } else if let b = try? c.decode(Bool.self) { self = .bool(b) } else if let i = try? c.decode(Int64.self) {
            self = .int(i)
        } else if let d = try? c.decode(Double.self) { self = .double(d) } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) { self = .array(a) } else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    var scrubbed: JSONValue {
        switch self {
        case .string(let s): .string(PublicView.scrub(s))
        case .array(let a): .array(a.map(\.scrubbed))
        case .object(let o): .object(o.mapValues(\.scrubbed))
        default: self
        }
    }
}

