import Foundation

/// `upload.bandwidth_limit` as a timetable, in rclone's form (config.md "Bandwidth
/// timetable"): `"08:00,2MiB/s 18:00,0 23:00,off"`, each entry in force from its time
/// until the next one, wrapping past midnight (or past Sunday, when the entries carry a
/// weekday: `"Mon-08:00,1MiB/s Sat-00:00,off"`). A rate of `0` pauses uploading.
///
/// A pure value: the time and the time zone come in, so tests use plain dates.
package struct BandwidthTimetable: Sendable, Equatable, CustomStringConvertible {
    package enum Rate: Sendable, Equatable, Hashable, CustomStringConvertible {
        case unlimited
        case paused
        case limit(Int64)

        /// What a `TokenBucket` takes: nil is no limit, 0 is "send nothing".
        package var bytesPerSecond: Int64? {
            switch self {
            case .unlimited: nil
            case .paused: 0
            case .limit(let n): n
            }
        }

        package var description: String {
            switch self {
            case .unlimited: "off"
            case .paused: "0"
            case .limit(let n): Units.formatSize(n) + "/s"
            }
        }
    }

    package struct Entry: Sendable, Equatable {
        /// 1 = Monday … 7 = Sunday; nil in a timetable for every day.
        package var weekday: Int?
        package var hour: Int
        package var minute: Int
        package var rate: Rate

        package init(weekday: Int?, hour: Int, minute: Int, rate: Rate) {
            self.weekday = weekday
            self.hour = hour
            self.minute = minute
            self.rate = rate
        }

        /// Minutes from the start of the cycle (Monday 00:00, or midnight).
        var position: Int { ((weekday ?? 1) - 1) * 1440 + hour * 60 + minute }

        package var description: String {
            let day = weekday.map { Self.dayNames[$0 - 1] + "-" } ?? ""
            return day + String(format: "%02d:%02d", hour, minute) + ",\(rate)"
        }

        static let dayNames = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    }

    /// The slot `date` falls in: its rate, and when the next entry takes over.
    package struct Slot: Sendable, Equatable {
        package var rate: Rate
        package var endsAt: Date
        /// The rate from `endsAt` (the same as `rate` when one entry is the whole cycle).
        package var nextRate: Rate

        package init(rate: Rate, endsAt: Date, nextRate: Rate) {
            self.rate = rate
            self.endsAt = endsAt
            self.nextRate = nextRate
        }
    }

    /// A refused entry, named, and what was expected instead.
    package struct Problem: Error, Sendable, Equatable {
        package var entry: String
        package var expected: String
    }

    /// Sorted by their place in the cycle; never empty.
    package let entries: [Entry]

    package var isWeekly: Bool { entries.first?.weekday != nil }

    package var description: String { entries.map(\.description).joined(separator: " ") }

    /// Whether `text` is meant as a timetable rather than a single rate: entries have a comma.
    package static func looksLikeTimetable(_ text: String) -> Bool { text.contains(",") }

    package static func parse(_ text: String) throws(Problem) -> BandwidthTimetable {
        let tokens = text.split(whereSeparator: \.isWhitespace).map(String.init)
        guard !tokens.isEmpty else {
            throw Problem(entry: text, expected: "at least one entry such as \"08:00,2MiB/s\"")
        }
        var entries: [Entry] = []
        for token in tokens {
            let entry = try parseEntry(token)
            if let first = entries.first, (first.weekday == nil) != (entry.weekday == nil) {
                throw Problem(entry: token, expected: "entries all with a weekday (\"Mon-08:00,1MiB/s\") or all without (\"08:00,1MiB/s\"), not mixed")
            }
            if let same = entries.first(where: { $0.position == entry.position }) {
                throw Problem(entry: token, expected: "a time of its own (\"\(same.description)\" starts at the same time)")
            }
            entries.append(entry)
        }
        return BandwidthTimetable(entries: entries.sorted { $0.position < $1.position })
    }

    static func parseEntry(_ token: String) throws(Problem) -> Entry {
        let parts = token.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw Problem(entry: token, expected: "a time and a rate joined by a comma, such as \"08:00,2MiB/s\" or \"Mon-08:00,off\"")
        }
        var time = Substring(parts[0])
        var weekday: Int?
        if let dash = time.firstIndex(of: "-") {
            let name = time[..<dash].lowercased()
            guard let day = Entry.dayNames.firstIndex(where: { $0.lowercased() == name }) else {
                throw Problem(entry: token, expected: "a weekday of Mon, Tue, Wed, Thu, Fri, Sat, Sun before the time, such as \"Mon-08:00\"")
            }
            weekday = day + 1
            time = time[time.index(after: dash)...]
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 2, (1...2).contains(clock[0].count), clock[1].count == 2,
              clock.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              let hour = Int(clock[0]), let minute = Int(clock[1]), (0..<24).contains(hour), (0..<60).contains(minute)
        else {
            throw Problem(entry: token, expected: "a time of day HH:MM from 00:00 to 23:59, such as \"18:30,0\"")
        }
        guard let rate = parseRate(String(parts[1])) else {
            throw Problem(entry: token, expected: "a rate after the comma: \"off\", 0 (pause) or a size per second such as \"2MiB/s\"")
        }
        return Entry(weekday: weekday, hour: hour, minute: minute, rate: rate)
    }

    static func parseRate(_ text: String) -> Rate? {
        if text == "0" { return .paused }
        switch Units.parseRate(text) {
        case .some(.none): return .unlimited
        case .some(.some(let n)): return .limit(n)
        case .none: return nil
        }
    }

    /// The slot in force at `date` in `timeZone` (the NAS's local time).
    ///
    /// Each entry's latest start at or before `date` is found on the calendar rather than
    /// from the wall clock's reading, so a day with a DST change behaves: an entry whose
    /// time is skipped (02:30 on a spring-forward day) starts when the clock jumps past
    /// it, and one whose time comes twice starts the first time and stays in force
    /// through the repeated hour.
    package func slot(at date: Date, in timeZone: TimeZone) -> Slot {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        // An entry due within the next second counts as begun: a timer set for a slot's
        // end may wake a hair early, and must then see the new slot.
        let probe = date.addingTimeInterval(1)
        var current = entries[entries.count - 1]
        var currentStart = Date.distantPast
        var nextStart = Date.distantFuture
        var next = entries[0]
        // The second pass of a time the clock sets back over is not a start: the entry began
        // at the first.
        func secondPass(_ date: Date) -> Bool {
            calendar.dateComponents([.hour, .minute], from: date) == calendar.dateComponents([.hour, .minute], from: date.addingTimeInterval(-3600))
        }
        for entry in entries {
            let match = components(entry)
            if var start = calendar.nextDate(after: probe, matching: match, matchingPolicy: .nextTime,
                                             repeatedTimePolicy: .first, direction: .backward) {
                if secondPass(start) { start.addTimeInterval(-3600) }
                if start > currentStart {
                    currentStart = start
                    current = entry
                }
            }
            if var start = calendar.nextDate(after: probe, matching: match, matchingPolicy: .nextTime,
                                             repeatedTimePolicy: .first, direction: .forward) {
                if secondPass(start), let later = calendar.nextDate(after: start, matching: match, matchingPolicy: .nextTime,
                                                                    repeatedTimePolicy: .first, direction: .forward) {
                    start = later
                }
                if start < nextStart {
                    nextStart = start
                    next = entry
                }
            }
        }
        if nextStart == .distantFuture { nextStart = date.addingTimeInterval(isWeekly ? 7 * 86400 : 86400) }
        return Slot(rate: current.rate, endsAt: nextStart, nextRate: next.rate)
    }

    private func components(_ entry: Entry) -> DateComponents {
        var c = DateComponents()
        c.hour = entry.hour
        c.minute = entry.minute
        c.second = 0
        // Calendar's weekdays count from Sunday (1); ours from Monday.
        if let day = entry.weekday { c.weekday = day % 7 + 1 }
        return c
    }
}
