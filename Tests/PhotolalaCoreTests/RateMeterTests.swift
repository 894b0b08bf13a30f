import Foundation
import Testing
import PhotolalaCore

@Suite struct RateMeterTests {
    @Test func averagesTheWindowAndForgetsOlderBytes() {
        let meter = RateMeter(window: 10)
        let t0 = Date(timeIntervalSince1970: 1_000_000)
        #expect(meter.rate(now: t0) == 0)
        for s in 0..<5 { meter.add(1000, at: t0.addingTimeInterval(Double(s))) }
        // 5000 bytes since t0, 4 s ago.
        #expect(meter.rate(now: t0.addingTimeInterval(4)) == 1250)
        // Less than a second of data counts as one second.
        let fresh = RateMeter()
        fresh.add(500, at: t0)
        #expect(fresh.rate(now: t0) == 500)
        // Everything older than the window is forgotten.
        #expect(meter.rate(now: t0.addingTimeInterval(30)) == 0)
        meter.add(2000, at: t0.addingTimeInterval(30))
        #expect(meter.rate(now: t0.addingTimeInterval(30)) == 2000)
    }

    @Test func manySmallAddsCostNoMoreThanAFew() {
        // A first scan's thousands of small photos a second: one bucket a second whatever
        // the adds (their cost is in docs/benchmarks.md, not timed here), and the rate right.
        let meter = RateMeter(window: 10)
        let t0 = Date(timeIntervalSince1970: 2_000_000)
        for i in 0..<200_000 { meter.add(100, at: t0.addingTimeInterval(Double(i) / 20_000)) }
        #expect(abs(meter.rate(now: t0.addingTimeInterval(10)) - 2_000_000) < 250_000)
    }
}
