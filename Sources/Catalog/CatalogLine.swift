/// A line of a snapshot someone else wrote, read the way the apps read one: columns split
/// at commas, spaces and tabs around them ignored. Only what the merge needs is taken (the
/// date to sort by, the photo MD5 to match ours against); the line itself goes into the
/// next snapshot byte for byte, whatever else it holds.
package struct CatalogLine: Sendable, Equatable {
    /// The third column in lowercase, when it is an MD5.
    package var md5: String?
    /// `photo_date` as the apps parse it (seconds, a decimal number); nil when it is not
    /// one. Such a line sorts after every dated one.
    package var date: Double?

    package init(md5: String?, date: Double?) {
        self.md5 = md5
        self.date = date
    }

    package static func parse(_ text: String) -> CatalogLine {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBufferPointer { parse(UnsafeBufferPointer($0)) }
    }

    package static func parse(_ line: UnsafeBufferPointer<UInt8>) -> CatalogLine {
        var result = CatalogLine(md5: nil, date: nil)
        var column = 0
        var start = 0
        var index = 0
        while index <= line.count {
            if index == line.count || line[index] == UInt8(ascii: ",") {
                let field = trimmed(line, start, index)
                if column == 2 { result.md5 = md5(line, field) }
                if column == 3 { result.date = number(line, field); break }
                column += 1
                start = index + 1
            }
            index += 1
        }
        return result
    }

    /// The first line of a snapshot is a header when it starts like ours (older apps wrote
    /// four columns); otherwise it is a row, kept like any other.
    package static func isHeader(_ line: UnsafeBufferPointer<UInt8>) -> Bool {
        let prefix = Array("photo_head_md5".utf8)
        return line.count >= prefix.count && zip(line, prefix).allSatisfy { $0 == $1 }
    }

    /// Empty or only spaces: not a row (the apps skip it), so not carried over.
    package static func isBlank(_ line: UnsafeBufferPointer<UInt8>) -> Bool {
        line.allSatisfy(CatalogFormat.isSpace)
    }

    /// Whether a row dated `a` comes before (or beside) one dated `b`, newest first;
    /// undated rows last.
    package static func isNewerOrSame(_ a: Double?, than b: Double?) -> Bool {
        switch (a, b) {
        case let (a?, b?): a >= b
        case (_?, nil), (nil, nil): true
        case (nil, _?): false
        }
    }

    private static func trimmed(_ line: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Range<Int> {
        var lower = start
        var upper = end
        while lower < upper, line[lower] == 0x20 || line[lower] == 0x09 { lower += 1 }
        while upper > lower, line[upper - 1] == 0x20 || line[upper - 1] == 0x09 || line[upper - 1] == 0x0D { upper -= 1 }
        return lower..<upper
    }

    private static func md5(_ line: UnsafeBufferPointer<UInt8>, _ field: Range<Int>) -> String? {
        guard field.count == 32 else { return nil }
        var lower = [UInt8]()
        lower.reserveCapacity(32)
        for i in field {
            let byte = line[i]
            guard CatalogFormat.isHex(byte) else { return nil }
            lower.append((65...70).contains(byte) ? byte + 32 : byte)
        }
        return String(decoding: lower, as: UTF8.self)
    }

    private static func number(_ line: UnsafeBufferPointer<UInt8>, _ field: Range<Int>) -> Double? {
        guard !field.isEmpty else { return nil }
        // Whole seconds, what every writer puts there: no String made for a million rows.
        var value: Int64 = 0
        var i = field.lowerBound
        let negative = line[i] == UInt8(ascii: "-")
        if negative || line[i] == UInt8(ascii: "+") { i += 1 }
        if i < field.upperBound, field.upperBound - i <= 18, (i..<field.upperBound).allSatisfy({ (48...57).contains(line[$0]) }) {
            for j in i..<field.upperBound { value = value * 10 + Int64(line[j] - 48) }
            return Double(negative ? -value : value)
        }
        // Anything else the apps' `TimeInterval(String)` accepts (fractions, exponents).
        guard let parsed = Double(String(decoding: UnsafeBufferPointer(rebasing: line[field]), as: UTF8.self)),
              !parsed.isNaN else { return nil }
        return parsed
    }
}
