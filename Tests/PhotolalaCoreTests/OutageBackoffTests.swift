import Foundation
import Testing
import PhotolalaCore

@Suite struct OutageBackoffTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func noOutageLetsEveryoneGo() {
        var b = OutageBackoff()
        #expect(b.admit(now: t0) == .go)
        #expect(b.admit(now: t0) == .go)
        #expect(!b.isActive)
    }

    @Test func aFailureMakesEveryoneWaitThenOneProbes() {
        var b = OutageBackoff()
        let epoch = b.epoch
        b.failed("503", startedIn: epoch, now: t0, random: 1)
        #expect(b.failures == 1 && b.until == t0.addingTimeInterval(1))
        #expect(b.admit(now: t0) == .wait(until: t0.addingTimeInterval(1)))
        let later = t0.addingTimeInterval(1)
        #expect(b.admit(now: later) == .probe)
        // While the probe runs, the others wait for its outcome, not for a date.
        #expect(b.admit(now: later) == .wait(until: nil))
        b.succeeded()
        #expect(b.admit(now: later) == .go)
        #expect(b.failures == 0 && b.lastError == nil)
    }

    @Test func waitsGrowExponentiallyToTheCapAndNeverBelowHalfTheStep() {
        var b = OutageBackoff(base: 1, cap: 300)
        var now = t0
        var steps: [TimeInterval] = []
        for _ in 0..<12 {
            b.failed("reset", startedIn: b.epoch, now: now, random: 0)
            steps.append(b.until!.timeIntervalSince(now))
            now = b.until!
        }
        #expect(steps == [0.5, 1, 2, 4, 8, 16, 32, 64, 128, 150, 150, 150])
    }

    @Test func attemptsCutOffByTheSameOutageCountOnce() {
        var b = OutageBackoff()
        let started = b.epoch   // four uploads in flight when S3 goes down
        for _ in 0..<4 { b.failed("503", startedIn: started, now: t0, random: 1) }
        #expect(b.failures == 1)
        #expect(b.lastError == "503")
        #expect(b.until == t0.addingTimeInterval(1))
    }

    @Test func anInconclusiveProbeFreesTheProbe() {
        var b = OutageBackoff()
        b.failed("timeout", startedIn: b.epoch, now: t0, random: 1)
        let later = t0.addingTimeInterval(5)
        #expect(b.admit(now: later) == .probe)
        b.inconclusive(probe: true)
        #expect(b.admit(now: later) == .probe)
        // A non-probe's inconclusive outcome leaves the probe alone.
        b.inconclusive(probe: false)
        #expect(b.admit(now: later) == .wait(until: nil))
        #expect(b.failures == 1)
    }

    @Test func requestsDuringAThirtySecondOutageStayFew() {
        // One probe per wait; even with the shortest jitter a 30 s outage gets few tries.
        var b = OutageBackoff()
        var now = t0
        var probes = 0
        b.failed("503", startedIn: b.epoch, now: now, random: 0)
        while now < t0.addingTimeInterval(30) {
            now = now.addingTimeInterval(0.05)
            if b.admit(now: now) == .probe {
                probes += 1
                b.failed("503", startedIn: b.epoch, now: now, random: 0)
            }
        }
        #expect(probes <= 7, "\(probes) probes in 30 s")
    }
}
