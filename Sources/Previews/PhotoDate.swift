import Foundation

/// When a photo was taken, as the catalog's `photo_date` (integer Unix seconds): EXIF
/// DateTimeOriginal with OffsetTimeOriginal when present, read as the NAS's local time
/// when not, and the file's modification time when there is no usable date.
package struct PhotoDate: Sendable, Equatable {
    package var timeZone: TimeZone

    package init(timeZone: TimeZone = .current) {
        self.timeZone = timeZone
    }

    /// - Parameters:
    ///   - original: DateTimeOriginal as written, "YYYY:MM:DD HH:MM:SS" (dashes, slashes
    ///     and a "T" are accepted, as some programs write them).
    ///   - offset: OffsetTimeOriginal, "+HH:MM" or "-HH:MM" (or "Z").
    ///   - modified: the file's modification time in Unix seconds.
    package func seconds(original: String?, offset: String?, modified: Int64) -> Int64 {
        guard let original, let parts = Self.fields(original) else { return modified }
        var components = DateComponents(year: parts[0], month: parts[1], day: parts[2],
                                        hour: parts[3], minute: parts[4], second: parts[5])
        var calendar = Calendar(identifier: .gregorian)
        if let offset, let seconds = Self.offsetSeconds(offset), let zone = TimeZone(secondsFromGMT: seconds) {
            calendar.timeZone = zone
        } else {
            calendar.timeZone = timeZone
        }
        components.calendar = calendar
        guard components.isValidDate, let date = calendar.date(from: components) else { return modified }
        return Int64(date.timeIntervalSince1970.rounded(.down))
    }

    /// Year, month, day, hour, minute, second; nil for a blank or impossible date
    /// ("0000:00:00 00:00:00", which cameras write when their clock was never set).
    static func fields(_ text: String) -> [Int]? {
        let numbers = text.trimmingCharacters(in: .whitespaces).split(whereSeparator: { ":-/T ".contains($0) }).map { Int($0) }
        guard numbers.count >= 6, numbers.prefix(6).allSatisfy({ $0 != nil }) else { return nil }
        let f = numbers.prefix(6).map { $0! }
        guard (1800...2999).contains(f[0]), (1...12).contains(f[1]), (1...31).contains(f[2]),
              (0...23).contains(f[3]), (0...59).contains(f[4]), (0...60).contains(f[5]) else { return nil }
        return f
    }

    static func offsetSeconds(_ text: String) -> Int? {
        let t = text.trimmingCharacters(in: .whitespaces)
        if t == "Z" { return 0 }
        guard let sign = t.first, sign == "+" || sign == "-" else { return nil }
        let parts = t.dropFirst().split(separator: ":").map { Int($0) }
        guard parts.count == 2, let h = parts[0], let m = parts[1], (0...14).contains(h), (0...59).contains(m) else { return nil }
        return (sign == "-" ? -1 : 1) * (h * 3600 + m * 60)
    }
}
