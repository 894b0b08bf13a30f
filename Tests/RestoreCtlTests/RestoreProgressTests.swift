import Foundation
import Testing
import RestoreCtl

@Suite struct RestoreProgressTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func rateAndTimeLeftOverTheWindow() {
        var p = RestoreProgress(filesTotal: 10, bytesTotal: 1_000_000_000)
        #expect(p.rate(now: t0) == 0 && p.eta(now: t0) == nil)
        p.moved(0, now: t0)
        p.moved(100_000_000, now: t0.addingTimeInterval(1))
        p.moved(100_000_000, now: t0.addingTimeInterval(2))
        #expect(p.rate(now: t0.addingTimeInterval(2)) == 100_000_000)
        #expect(p.eta(now: t0.addingTimeInterval(2)) == 8)
        // Old samples leave the window: the rate follows what happens now.
        p.moved(10_000_000, now: t0.addingTimeInterval(10))
        p.moved(10_000_000, now: t0.addingTimeInterval(11))
        #expect(p.rate(now: t0.addingTimeInterval(11)) == 10_000_000)
    }

    @Test func theLineShowsCountsBytesRateAndTimeLeft() {
        var p = RestoreProgress(filesTotal: 500, bytesTotal: 2_500_000_000)
        p.restored = 200
        p.alreadyThere = 5
        p.bytesDone = 1_000_000_000
        p.moved(0, now: t0)
        p.moved(1_000_000_000, now: t0.addingTimeInterval(10))
        let line = p.line(now: t0.addingTimeInterval(10), width: 10)
        #expect(line == "[####------]  40%  205/500 files  1.0 GB/2.5 GB  100.0 MB/s  ETA 15s")
    }

    @Test func archivedObjectsShowTheWaitInsteadOfATime() {
        var p = RestoreProgress(filesTotal: 2, bytesTotal: 100)
        p.waitingArchived = 1
        p.archiveClass = "DEEP_ARCHIVE"
        p.moved(0, now: t0)
        p.moved(50, now: t0.addingTimeInterval(1))
        #expect(p.eta(now: t0.addingTimeInterval(1)) == nil)
        #expect(p.line(now: t0.addingTimeInterval(1)).hasSuffix("waiting for 1 in DEEP_ARCHIVE (usually within 12 hours)"))
    }

    @Test func durationsReadAsPeopleSayThem() {
        #expect(RestoreProgress.duration(42) == "42s")
        #expect(RestoreProgress.duration(125) == "2m05s")
        #expect(RestoreProgress.duration(7_380) == "2h03m")
    }
}
