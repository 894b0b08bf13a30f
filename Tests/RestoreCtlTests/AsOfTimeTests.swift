import Foundation
import Testing
import RestoreCtl

@Suite struct AsOfTimeTests {
    let utc = TimeZone(secondsFromGMT: 0)!
    let paris = TimeZone(secondsFromGMT: 3600)!

    @Test func timesWithAZoneAreExact() {
        #expect(AsOfTime.parse("2026-11-22T07:00:00Z", timeZone: paris) == 1_795_330_800_000)
        #expect(AsOfTime.parse("2026-11-22T07:00:00.250Z") == 1_795_330_800_250)
        #expect(AsOfTime.parse("2026-11-22T08:00:00+01:00") == 1_795_330_800_000)
        #expect(AsOfTime.parse("2026-11-22T02:00:00-0500") == 1_795_330_800_000)
        #expect(AsOfTime.parse("2026-11-22T07:00:00.1Z") == 1_795_330_800_100)
        #expect(AsOfTime.parse("2026-11-22T07:00:00.123456Z") == 1_795_330_800_123)
    }

    @Test func timesWithoutAZoneAreLocal() {
        #expect(AsOfTime.parse("2026-11-22T08:00:00", timeZone: paris) == 1_795_330_800_000)
        #expect(AsOfTime.parse("2026-11-22 07:00", timeZone: utc) == 1_795_330_800_000)
    }

    @Test func aDateMeansTheEndOfThatDay() {
        #expect(AsOfTime.parse("2026-11-22", timeZone: utc) == 1_795_391_999_999)
        #expect(AsOfTime.parse("2026-11-22", timeZone: paris) == 1_795_388_399_999)
    }

    @Test func nonsenseIsRefused() {
        for text in ["", "yesterday", "2026-13-01", "2026-02-30", "2026-11-22T25:00:00Z", "2026-11-22T07:00:00Q",
                     "2026-11-22T07", "22/11/2026", "2026-11-22T07:00:00.Z", "2026-11-22T07:00:00+1"] {
            #expect(AsOfTime.parse(text) == nil, "\(text)")
        }
    }
}
