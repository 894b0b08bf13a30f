import Foundation
import Testing
import Previews

/// The catalog's photo_date: EXIF with its offset, else in the NAS's zone, else the mtime.
@Suite struct PhotoDateTests {
    let tokyo = PhotoDate(timeZone: TimeZone(identifier: "Asia/Tokyo")!)
    let newYork = PhotoDate(timeZone: TimeZone(identifier: "America/New_York")!)

    @Test func theOffsetWins() {
        // 2021-05-06 07:08:09 +09:00 = 2021-05-05T22:08:09Z
        #expect(newYork.seconds(original: "2021:05:06 07:08:09", offset: "+09:00", modified: 1) == 1_620_252_489)
        #expect(tokyo.seconds(original: "2022:02:03 04:05:06", offset: "-05:00", modified: 1) == 1_643_879_106)
        #expect(tokyo.seconds(original: "2022:02:03 04:05:06", offset: "Z", modified: 1) == 1_643_861_106)
    }

    @Test func withoutAnOffsetItIsTheNASsLocalTime() {
        #expect(tokyo.seconds(original: "2021:05:06 07:08:09", offset: nil, modified: 1) == 1_620_252_489)
        // New York is on summer time (-04:00) in May.
        #expect(newYork.seconds(original: "2021:05:06 07:08:09", offset: nil, modified: 1) == 1_620_299_289)
        #expect(newYork.seconds(original: "2021:05:06 07:08:09", offset: "garbage", modified: 1) == 1_620_299_289)
    }

    @Test func otherSeparatorsAreRead() {
        #expect(tokyo.seconds(original: "2021-05-06T07:08:09", offset: "+09:00", modified: 1) == 1_620_252_489)
        #expect(tokyo.seconds(original: " 2021:05:06 07:08:09 ", offset: "+09:00", modified: 1) == 1_620_252_489)
    }

    @Test(arguments: ["0000:00:00 00:00:00", "", "    :  :     :  :  ", "2021:13:06 07:08:09", "2021:02:30 07:08:09", "yesterday"])
    func unusableDatesFallBackToTheModificationTime(_ text: String) {
        #expect(tokyo.seconds(original: text, offset: "+09:00", modified: 1_600_000_000) == 1_600_000_000)
    }

    @Test func noDateAtAllIsTheModificationTime() {
        #expect(tokyo.seconds(original: nil, offset: "+09:00", modified: 42) == 42)
    }
}
