import Foundation
import Testing
import PhotolalaCore

/// The timetable of `upload.bandwidth_limit` on plain dates: which slot is in force, when it
/// ends, past midnight, by weekday, and on the days the clock jumps.
@Suite struct BandwidthTimetableTests {
    let utc = TimeZone(identifier: "UTC")!
    let berlin = TimeZone(identifier: "Europe/Berlin")!

    func date(_ text: String, _ zone: TimeZone) -> Date {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = zone
        f.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return f.date(from: text)!
    }

    func table(_ text: String) throws -> BandwidthTimetable {
        try BandwidthTimetable.parse(text)
    }

    @Test func parsesRclonesFormAndPrintsItBack() throws {
        let t = try table("18:00,0 08:00,2MiB/s   23:00,off")
        #expect(t.entries.map(\.rate) == [.limit(2 << 20), .paused, .unlimited], "sorted by time")
        #expect(t.description == "08:00,2MiB/s 18:00,0 23:00,off")
        #expect(!t.isWeekly)
        #expect(try table("mon-08:00,1MiB/s Sat-00:00,off").description == "Mon-08:00,1MiB/s Sat-00:00,off")
        #expect(try table("7:05,500KB/s").entries == [.init(weekday: nil, hour: 7, minute: 5, rate: .limit(500_000))])
    }

    @Test(arguments: [
        ("08:00", "08:00", "a time and a rate"),
        ("08:00,2MiB/s 18:00", "18:00", "a time and a rate"),
        ("25:00,off", "25:00,off", "00:00 to 23:59"),
        ("08:60,off", "08:60,off", "00:00 to 23:59"),
        ("8h,off", "8h,off", "HH:MM"),
        ("08:00,fast", "08:00,fast", "a rate after the comma"),
        ("08:00,10MiB", "08:00,10MiB", "size per second"),
        ("08:00,-1", "08:00,-1", "a rate"),
        ("Mon-08:00,off 18:00,0", "18:00,0", "not mixed"),
        ("Funday-08:00,off", "Funday-08:00,off", "weekday"),
        ("08:00,off 08:00,0", "08:00,0", "starts at the same time"),
        ("08:00,off,1", "08:00,off,1", "a time and a rate"),
    ])
    func refusesAMalformedEntryNamingIt(text: String, entry: String, expected: String) {
        #expect {
            try table(text)
        } throws: { error in
            guard let p = error as? BandwidthTimetable.Problem else { return false }
            return p.entry == entry && p.expected.contains(expected)
        }
    }

    @Test func slotRunsUntilTheNextEntry() throws {
        let t = try table("08:00,2MiB/s 18:00,0 23:00,off")
        let morning = t.slot(at: date("2026-11-23 09:30:00", utc), in: utc)
        #expect(morning == .init(rate: .limit(2 << 20), endsAt: date("2026-11-23 18:00:00", utc), nextRate: .paused))
        let evening = t.slot(at: date("2026-11-23 18:00:00", utc), in: utc)
        #expect(evening.rate == .paused && evening.endsAt == date("2026-11-23 23:00:00", utc))
        #expect(t.slot(at: date("2026-11-23 17:59:58", utc), in: utc).rate == .limit(2 << 20))
    }

    @Test func theLastEntryWrapsPastMidnight() throws {
        let t = try table("08:00,2MiB/s 23:00,0")
        let late = t.slot(at: date("2026-11-23 23:30:00", utc), in: utc)
        #expect(late == .init(rate: .paused, endsAt: date("2026-11-24 08:00:00", utc), nextRate: .limit(2 << 20)))
        // Before the first entry of the day, yesterday's last is in force.
        let early = t.slot(at: date("2026-11-24 03:00:00", utc), in: utc)
        #expect(early == .init(rate: .paused, endsAt: date("2026-11-24 08:00:00", utc), nextRate: .limit(2 << 20)))
    }

    @Test func oneEntryIsTheWholeDay() throws {
        let t = try table("12:00,0")
        let s = t.slot(at: date("2026-11-23 09:00:00", utc), in: utc)
        #expect(s == .init(rate: .paused, endsAt: date("2026-11-23 12:00:00", utc), nextRate: .paused))
    }

    @Test func weekdaysWrapPastSunday() throws {
        // 2026-11-23 is a Monday.
        let t = try table("Mon-08:00,1MiB/s Fri-18:00,0 Sat-00:00,off")
        let tuesday = t.slot(at: date("2026-11-24 12:00:00", utc), in: utc)
        #expect(tuesday == .init(rate: .limit(1 << 20), endsAt: date("2026-11-27 18:00:00", utc), nextRate: .paused))
        let fridayNight = t.slot(at: date("2026-11-27 20:00:00", utc), in: utc)
        #expect(fridayNight == .init(rate: .paused, endsAt: date("2026-11-28 00:00:00", utc), nextRate: .unlimited))
        let sunday = t.slot(at: date("2026-11-29 23:59:00", utc), in: utc)
        #expect(sunday == .init(rate: .unlimited, endsAt: date("2026-11-30 08:00:00", utc), nextRate: .limit(1 << 20)))
        let mondayDawn = t.slot(at: date("2026-11-30 07:00:00", utc), in: utc)
        #expect(mondayDawn.rate == .unlimited, "Monday before 08:00 is still Saturday's slot")
    }

    @Test func localTimeIsTheZonesNotUTC() throws {
        let t = try table("08:00,0 18:00,off")
        // 07:30 UTC is 08:30 in Berlin (winter): paused there, not in UTC.
        let at = date("2026-11-23 07:30:00", utc)
        #expect(t.slot(at: at, in: berlin).rate == .paused)
        #expect(t.slot(at: at, in: utc).rate == .unlimited)
        #expect(t.slot(at: at, in: berlin).endsAt == date("2026-11-23 18:00:00", berlin))
    }

    @Test func springForwardStartsASkippedEntryWhenTheClockJumpsPastIt() throws {
        // Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 never happens.
        let t = try table("02:30,0 05:00,off")
        let before = t.slot(at: date("2026-03-29 01:50:00", berlin), in: berlin)
        #expect(before.rate == .unlimited)
        #expect(before.endsAt == date("2026-03-29 03:00:00", berlin), "the skipped 02:30 begins at 03:00")
        let after = t.slot(at: date("2026-03-29 03:10:00", berlin), in: berlin)
        #expect(after == .init(rate: .paused, endsAt: date("2026-03-29 05:00:00", berlin), nextRate: .unlimited))
        // From 01:50 CET the slot has ten minutes of real time left, not seventy.
        #expect(before.endsAt.timeIntervalSince(date("2026-03-29 01:50:00", berlin)) == 600)
    }

    @Test func fallBackKeepsAnEntryThroughTheRepeatedHour() throws {
        // Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:00–03:00 comes twice.
        let t = try table("02:30,0 05:00,off")
        let firstPass = date("2026-10-25 00:40:00", utc)   // 02:40 CEST
        #expect(t.slot(at: firstPass, in: berlin).rate == .paused)
        let secondPass = date("2026-10-25 01:10:00", utc)  // 02:10 CET, after the entry began
        let s = t.slot(at: secondPass, in: berlin)
        #expect(s.rate == .paused, "the 02:30 entry began in the first pass and stays in force")
        #expect(s.endsAt == date("2026-10-25 04:00:00", utc), "05:00 CET")
        // Two entries inside the repeated hour: each begins once, at its first pass.
        let two = try table("02:15,0 02:45,1MiB/s 05:00,off")
        let later = two.slot(at: date("2026-10-25 01:20:00", utc), in: berlin)   // 02:20 CET, second pass
        #expect(later.rate == .limit(1 << 20), "02:45 CEST began last")
        #expect(later.endsAt == date("2026-10-25 04:00:00", utc))
    }

    @Test func aSlotDueWithinASecondCountsAsBegun() throws {
        // A timer set for 18:00 may wake a hair early and must see the new slot.
        let t = try table("08:00,off 18:00,0")
        let early = t.slot(at: date("2026-11-23 18:00:00", utc).addingTimeInterval(-0.4), in: utc)
        #expect(early.rate == .paused && early.endsAt == date("2026-11-24 08:00:00", utc))
    }

    @Test func ratesAsATokenBucketTakesThem() {
        #expect(BandwidthTimetable.Rate.unlimited.bytesPerSecond == nil)
        #expect(BandwidthTimetable.Rate.paused.bytesPerSecond == 0)
        #expect(BandwidthTimetable.Rate.limit(42).bytesPerSecond == 42)
    }
}
