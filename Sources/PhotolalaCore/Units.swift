/// Parses and prints the duration, size and rate forms of config.md ("90s", "16MiB",
/// "10MiB/s"), so the config reader and `--check-config` agree on one spelling.
package enum Units {
    private static let durationUnits: [(String, Int64)] = [
        ("ms", 0), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400),
    ]

    /// "90s", "15m", "6h", "1h30m", "250ms", or a bare number of seconds.
    package static func parseDuration(_ text: String) -> Duration? {
        let s = text.trimmingSpaces()
        guard !s.isEmpty else { return nil }
        if let n = Double(s), n >= 0, n.isFinite { return .milliseconds(Int64((n * 1000).rounded())) }
        var total: Duration = .zero
        var rest = Substring(s)
        while !rest.isEmpty {
            let digits = rest.prefix { $0.isNumber || $0 == "." }
            guard !digits.isEmpty, let value = Double(digits) else { return nil }
            rest = rest.dropFirst(digits.count)
            let unit = rest.prefix { $0.isLetter }
            rest = rest.dropFirst(unit.count)
            switch unit.lowercased() {
            case "ms": total += .milliseconds(Int64(value.rounded()))
            case "s": total += .milliseconds(Int64((value * 1000).rounded()))
            case "m": total += .milliseconds(Int64((value * 60_000).rounded()))
            case "h": total += .milliseconds(Int64((value * 3_600_000).rounded()))
            case "d": total += .milliseconds(Int64((value * 86_400_000).rounded()))
            default: return nil
            }
        }
        return total
    }

    private static let sizeUnits: [String: Int64] = [
        "": 1, "b": 1,
        "k": 1000, "kb": 1000, "m": 1_000_000, "mb": 1_000_000, "g": 1_000_000_000, "gb": 1_000_000_000,
        "t": 1_000_000_000_000, "tb": 1_000_000_000_000,
        "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    ]

    /// "16MiB", "1GiB", "500KB", "1048576".
    package static func parseSize(_ text: String) -> Int64? {
        let s = text.trimmingSpaces()
        let number = s.prefix { $0.isNumber || $0 == "." }
        guard !number.isEmpty, let value = Double(number), value >= 0 else { return nil }
        let unit = s.dropFirst(number.count).trimmingSpaces().lowercased()
        guard let factor = sizeUnits[unit] else { return nil }
        let bytes = value * Double(factor)
        guard bytes < 9.0e18 else { return nil }
        return Int64(bytes.rounded())
    }

    /// "off" → .some(nil); "10MiB/s" → bytes per second.
    package static func parseRate(_ text: String) -> Int64?? {
        let s = text.trimmingSpaces().lowercased()
        if s == "off" { return .some(nil) }
        guard s.hasSuffix("/s"), let bytes = parseSize(String(s.dropLast(2))), bytes > 0 else { return nil }
        return .some(bytes)
    }

    package static func format(_ d: Duration) -> String {
        let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        if ms % 1000 != 0 { return "\(ms)ms" }
        let s = ms / 1000
        for (name, f) in durationUnits.reversed() where f > 0 && s % f == 0 && s >= f {
            return "\(s / f)\(name)"
        }
        return "\(s)s"
    }

    package static func formatSize(_ bytes: Int64) -> String {
        for (name, f) in [("TiB", Int64(1) << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        where bytes >= f && bytes % f == 0 {
            return "\(bytes / f)\(name)"
        }
        return "\(bytes)"
    }

    /// A rounded human figure for status output ("1.2 GB").
    package static func humanBytes(_ bytes: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB", "PB"]
        var v = Double(bytes)
        var i = 0
        while v >= 1000, i < units.count - 1 { v /= 1000; i += 1 }
        if i == 0 { return "\(bytes) B" }
        let rounded = (v * 10).rounded() / 10
        return "\(rounded) \(units[i])"
    }

    package static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
