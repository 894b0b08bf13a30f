import Foundation
import PhotolalaCore

/// What to tell, and when (config.md "Notifications"): a problem at once; its recovery
/// once it has been clear for `clearAfter` (30 s), so a flicker is one event; a lasting
/// problem again every `repeatInterval`; with `dailySummary`, a summary once a day from
/// `summaryHour` (local time). Nothing else twice: `memory` is what was told, kept in the
/// queue database by the service and read back at start, so a restart resends nothing.
///
/// A pure value: the attention items and the time come in, decisions go out.
package struct NotifyPolicy: Sendable, Equatable {
    package struct Config: Sendable, Equatable {
        package var repeatInterval: TimeInterval
        package var clearAfter: TimeInterval
        package var dailySummary: Bool
        /// The local hour from which the day's summary is sent.
        package var summaryHour: Int
        package var timeZone: TimeZone

        package init(repeatInterval: TimeInterval = 86400, clearAfter: TimeInterval = 30, dailySummary: Bool = false,
                    summaryHour: Int = 20, timeZone: TimeZone = .current) {
            self.repeatInterval = repeatInterval
            self.clearAfter = clearAfter
            self.dailySummary = dailySummary
            self.summaryHour = summaryHour
            self.timeZone = timeZone
        }
    }

    /// What was told: the persisted part (written only when something is sent).
    package struct Memory: Codable, Sendable, Equatable {
        package struct Told: Codable, Sendable, Equatable {
            package var reason: AttentionItem.Reason
            package var subject: String?
            /// When the problem was first told, and last told (a repeat).
            package var since: Date
            package var sentAt: Date
        }

        /// By `AttentionItem.key`.
        package var problems: [String: Told] = [:]
        /// The local day (`2026-11-22`) of the last summary.
        package var summaryDay: String?

        package init() {}
    }

    package enum Decision: Sendable, Equatable {
        /// A new problem, or a lasting one told again (`repeated`).
        case problem(AttentionItem, repeated: Bool)
        case recovered(AttentionItem.Reason, subject: String?)
        /// The day's summary (`day` as `Memory.summaryDay` writes it).
        case summary(day: String)
    }

    package var config: Config
    package private(set) var memory: Memory
    /// Problems told and now absent: since when (in memory only; a restart starts the
    /// 30 s again, which at worst delays a `recovered`).
    private var clearSince: [String: Date] = [:]

    package init(config: Config, memory: Memory = Memory()) {
        self.config = config
        self.memory = memory
    }

    /// Whether a problem is being told: the dead man's switch says `/fail` meanwhile.
    package var hasProblems: Bool { !memory.problems.isEmpty }

    /// The decisions for the attention items now, in order; `memory` is updated for each.
    package mutating func step(attention: [AttentionItem], now: Date) -> [Decision] {
        var out: [Decision] = []
        let present = Set(attention.map(\.key))
        var seen = Set<String>()
        for item in attention where seen.insert(item.key).inserted {
            let key = item.key
            clearSince[key] = nil
            if var told = memory.problems[key] {
                if now.timeIntervalSince(told.sentAt) >= config.repeatInterval {
                    told.sentAt = now
                    memory.problems[key] = told
                    out.append(.problem(item, repeated: true))
                }
            } else {
                memory.problems[key] = .init(reason: item.reason, subject: item.subject, since: now, sentAt: now)
                out.append(.problem(item, repeated: false))
            }
        }
        for (key, told) in memory.problems.sorted(by: { $0.key < $1.key }) where !present.contains(key) {
            guard let since = clearSince[key] else {
                clearSince[key] = now
                continue
            }
            if now.timeIntervalSince(since) >= config.clearAfter {
                memory.problems[key] = nil
                clearSince[key] = nil
                out.append(.recovered(told.reason, subject: told.subject))
            }
        }
        if let day = summaryDue(now: now) {
            memory.summaryDay = day
            out.append(.summary(day: day))
        }
        return out
    }

    /// When `step` has something to decide without any change to the attention items:
    /// a repeat, a recovery's 30 s ending, the day's summary.
    package func nextDeadline(now: Date) -> Date? {
        var dates: [Date] = []
        for (key, told) in memory.problems {
            if let since = clearSince[key] {
                dates.append(since.addingTimeInterval(config.clearAfter))
            } else {
                dates.append(told.sentAt.addingTimeInterval(config.repeatInterval))
            }
        }
        if config.dailySummary { dates.append(nextSummaryTime(now: now)) }
        return dates.min()
    }

    // MARK: the daily summary

    var calendar: Calendar {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = config.timeZone
        return c
    }

    func dayString(_ date: Date) -> String {
        let c = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", c.year ?? 0, c.month ?? 0, c.day ?? 0)
    }

    /// Today's day, if its summary is due and not sent.
    func summaryDue(now: Date) -> String? {
        guard config.dailySummary else { return nil }
        let hour = calendar.component(.hour, from: now)
        guard hour >= config.summaryHour else { return nil }
        let today = dayString(now)
        return memory.summaryDay == today ? nil : today
    }

    /// The next time a summary may be due: today's hour if not yet sent, else tomorrow's.
    func nextSummaryTime(now: Date) -> Date {
        let cal = calendar
        let todays = cal.date(bySettingHour: config.summaryHour, minute: 0, second: 0, of: now) ?? now
        if now < todays { return todays }
        if memory.summaryDay != dayString(now) { return now }
        let tomorrow = cal.date(byAdding: .day, value: 1, to: cal.startOfDay(for: now)) ?? now.addingTimeInterval(86400)
        return cal.date(bySettingHour: config.summaryHour, minute: 0, second: 0, of: tomorrow) ?? tomorrow
    }

    /// The start of the local day `now` is in: what the summary counts from.
    package func startOfDay(_ now: Date) -> Date { calendar.startOfDay(for: now) }
}
