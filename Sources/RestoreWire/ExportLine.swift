import ManifestFormat

/// The daemon's answer to `GET /v1/restore/export`, one line at a time (fed in arbitrary
/// pieces), as text: a `wait` now and then while the catalog is read, one `catalog` line,
/// then per object of `photos/{userId}/` in key order an `object` line (or `skipped`,
/// for a key that is not `{md5}.dat`), and `end`; or `fail` when the bucket could not be
/// read. Words from the bucket (keys, reasons, storage classes) are percent-encoded, so
/// no line can be split or forged by a key holding spaces or newlines.
package enum ExportLine: Sendable, Equatable {
    case wait
    case catalog(Catalog)
    case object(ExportObject)
    case skipped(key: String, why: String)
    case fail(String)
    case end

    package enum Catalog: Sendable, Equatable {
        /// No pointer: the account has no catalog.
        case none
        /// Read whole: how many rows, and how many could not be read.
        case read(rows: Int, malformed: Int)
        /// There, but not usable (the sentence says why): objects are dated by their time.
        case unreadable(String)
    }

    package var text: String {
        switch self {
        case .wait: "wait\n"
        case .catalog(.none): "catalog none\n"
        case .catalog(.read(let rows, let malformed)): "catalog read \(rows) \(malformed)\n"
        case .catalog(.unreadable(let why)): "catalog unreadable \(Self.encode(why))\n"
        case .object(let o):
            "object \(o.md5.hex) \(o.size) \(Self.encode(o.storageClass)) \(o.modified.map(String.init) ?? "-") "
                + "\(o.catalogDate.map(String.init) ?? "-") \(o.ext)\n"
        case .skipped(let key, let why): "skipped \(Self.encode(key)) \(Self.encode(why))\n"
        case .fail(let why): "fail \(Self.encode(why))\n"
        case .end: "end\n"
        }
    }

    package struct Malformed: Error, CustomStringConvertible {
        package var line: String
        package var description: String { "the daemon sent a line this command does not understand: \(line.prefix(80))" }
    }

    /// One line without its `\n`.
    package static func parse(_ line: String) throws(Malformed) -> ExportLine {
        let f = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        switch (f.first, f.count) {
        case ("wait", 1): return .wait
        case ("end", 1): return .end
        case ("catalog", 2) where f[1] == "none": return .catalog(.none)
        case ("catalog", 4) where f[1] == "read":
            guard let rows = Int(f[2]), let malformed = Int(f[3]) else { break }
            return .catalog(.read(rows: rows, malformed: malformed))
        case ("catalog", 3) where f[1] == "unreadable":
            guard let why = decode(f[2]) else { break }
            return .catalog(.unreadable(why))
        case ("object", 7):
            guard isLowercaseMD5(f[1]), let md5 = MD5Value(hex: f[1]), let size = Int64(f[2]), size >= 0, let storageClass = decode(f[3]),
                  case .some(let modified) = optionalInt(f[4]), case .some(let date) = optionalInt(f[5]) else { break }
            return .object(.init(md5: md5, size: size, storageClass: storageClass, modified: modified, catalogDate: date,
                                 ext: ExportFormat.known(f[6])))
        case ("skipped", 3):
            guard let key = decode(f[1]), let why = decode(f[2]) else { break }
            return .skipped(key: key, why: why)
        case ("fail", 2):
            guard let why = decode(f[1]) else { break }
            return .fail(why)
        default: break
        }
        throw Malformed(line: line)
    }

    package static func isLowercaseMD5(_ text: some StringProtocol) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// `-` for none (`.some(nil)`), else a decimal number; nil when it is neither.
    private static func optionalInt(_ field: String) -> Int64?? {
        if field == "-" { return .some(nil) }
        return Int64(field).map { .some($0) }
    }

    /// Every byte but letters, digits and `-._~/:` as `%XX`; the empty word as `%`.
    package static func encode(_ text: String) -> String {
        if text.isEmpty { return "%" }
        var out = ""
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"), UInt8(ascii: ":"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                out += "%" + String(b >> 4, radix: 16, uppercase: true) + String(b & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// The inverse of `encode`; bytes that are not UTF-8 come back as U+FFFD.
    package static func decode(_ word: String) -> String? {
        if word == "%" { return "" }
        var bytes: [UInt8] = []
        var it = Array(word.utf8)[...]
        while let b = it.popFirst() {
            if b == UInt8(ascii: "%") {
                guard it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) else { return nil }
                bytes.append(v)
                it = it.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// One object of the export as the daemon lists it (`ExportLine.object`); the command
/// names its file from it (`RestoreCtl.ExportName`).
package struct ExportObject: Sendable, Equatable {
    package var md5: MD5Value
    package var size: Int64
    package var storageClass: String
    /// Last-modified, Unix seconds (nil: the listing gave none).
    package var modified: Int64?
    /// The catalog row's `photo_date`, whole seconds (nil: no row, or no date in it).
    package var catalogDate: Int64?
    package var ext: String

    package init(md5: MD5Value, size: Int64, storageClass: String, modified: Int64?, catalogDate: Int64?, ext: String) {
        self.md5 = md5
        self.size = size
        self.storageClass = storageClass
        self.modified = modified
        self.catalogDate = catalogDate
        self.ext = ext
    }
}

/// The lines of a stream arriving in pieces: bounded (a line over 64 KiB is refused).
package struct ExportLineReader: Sendable {
    private var partial: [UInt8] = []

    package init() {}

    package mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(ExportLine.Malformed) -> [ExportLine] {
        var out: [ExportLine] = []
        for b in bytes {
            if b == UInt8(ascii: "\n") {
                out.append(try ExportLine.parse(String(decoding: partial, as: UTF8.self)))
                partial.removeAll(keepingCapacity: true)
            } else {
                partial.append(b)
                if partial.count > 64 << 10 { throw ExportLine.Malformed(line: String(decoding: partial.prefix(80), as: UTF8.self)) }
            }
        }
        return out
    }
}
