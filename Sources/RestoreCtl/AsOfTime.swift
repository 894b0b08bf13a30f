import Foundation

/// `--as-of`: an ISO 8601 time (`2026-11-22T07:00:00Z`, `2026-11-22T08:00:00.250+01:00`,
/// or without a zone, in local time) or a date (`2026-11-22`: as the folders were at the
/// end of that day, local time). Milliseconds since the epoch, as the manifest counts.
package enum AsOfTime {
    package static func parse(_ text: String, timeZone: TimeZone = .current) -> Int64? {
        let t = text.trimmingCharacters(in: .whitespaces)
        let chars = Array(t.utf8)
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= chars.count, chars[from..<(from + count)].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int(String(decoding: chars[from..<(from + count)], as: UTF8.self))
        }
        guard chars.count >= 10, let year = number(0, 4), chars[4] == UInt8(ascii: "-"), let month = number(5, 2),
              chars[7] == UInt8(ascii: "-"), let day = number(8, 2), (1...12).contains(month), (1...31).contains(day) else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        if chars.count == 10 {
            guard let start = calendar.date(from: DateComponents(year: year, month: month, day: day)),
                  calendar.component(.day, from: start) == day,
                  let next = calendar.date(byAdding: .day, value: 1, to: start) else { return nil }
            return Int64((next.timeIntervalSince1970 * 1000).rounded()) - 1
        }
        guard chars[10] == UInt8(ascii: "T") || chars[10] == UInt8(ascii: " "), let hour = number(11, 2),
              chars.count >= 16, chars[13] == UInt8(ascii: ":"), let minute = number(14, 2), hour < 24, minute < 60 else { return nil }
        var i = 16
        var second = 0
        var millis = 0
        if i < chars.count, chars[i] == UInt8(ascii: ":") {
            guard let s = number(i + 1, 2), s < 61 else { return nil }
            second = s
            i += 3
            if i < chars.count, chars[i] == UInt8(ascii: ".") || chars[i] == UInt8(ascii: ",") {
                var digits = 0
                var j = i + 1
                while j < chars.count, chars[j] >= 0x30, chars[j] <= 0x39 {
                    if digits < 3 { millis = millis * 10 + Int(chars[j] - 0x30) }
                    digits += 1
                    j += 1
                }
                guard digits > 0 else { return nil }
                if digits < 3 { for _ in digits..<3 { millis *= 10 } }
                i = j
            }
        }
        var zone = timeZone
        if i < chars.count {
            if chars[i] == UInt8(ascii: "Z") && i + 1 == chars.count {
                zone = TimeZone(secondsFromGMT: 0)!
            } else if chars[i] == UInt8(ascii: "+") || chars[i] == UInt8(ascii: "-") {
                let sign = chars[i] == UInt8(ascii: "+") ? 1 : -1
                guard let h = number(i + 1, 2) else { return nil }
                var m = 0
                if i + 3 < chars.count {
                    let colon = chars[i + 3] == UInt8(ascii: ":")
                    guard let mm = number(i + (colon ? 4 : 3), 2), i + (colon ? 6 : 5) == chars.count else { return nil }
                    m = mm
                } else if i + 3 != chars.count {
                    return nil
                }
                guard let z = TimeZone(secondsFromGMT: sign * (h * 3600 + m * 60)) else { return nil }
                zone = z
            } else {
                return nil
            }
        }
        calendar.timeZone = zone
        guard let date = calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)),
              calendar.component(.day, from: date) == day else { return nil }
        return Int64((date.timeIntervalSince1970 * 1000).rounded()) + Int64(millis)
    }
}
