import NIOCore
import Testing
import Control

@Suite struct ConnectionLimitsTests {
    func limits() -> ControlServer.Limits {
        var l = ControlServer.Limits()
        l.maxConnections = 10
        l.maxConnectionsPerUser = 3
        l.reservedForPrivileged = 4
        l.maxPendingResponseBytes = 1000
        return l
    }

    @Test func oneUserCannotTakeEverySlot() {
        let c = ConnectionCounter(limits: limits())
        for _ in 0..<3 { #expect(c.tryAcquire(uid: 1000, privileged: false)) }
        #expect(!c.tryAcquire(uid: 1000, privileged: false), "per-user limit")
        #expect(c.tryAcquire(uid: 1001, privileged: false), "another member still gets in")
        c.release(uid: 1000, privileged: false)
        #expect(c.tryAcquire(uid: 1000, privileged: false))
    }

    @Test func rootKeepsReservedSlots() {
        let c = ConnectionCounter(limits: limits())
        // Members fill everything that is not reserved (10 - 4 = 6).
        for uid: UInt32 in [1, 1, 1, 2, 2, 2] { #expect(c.tryAcquire(uid: uid, privileged: false)) }
        #expect(!c.tryAcquire(uid: 3, privileged: false))
        for _ in 0..<4 { #expect(c.tryAcquire(uid: 0, privileged: true)) }
        #expect(!c.tryAcquire(uid: 0, privileged: true), "the hard limit holds for root too")
    }

    @Test func pendingAnswersAreBounded() {
        let c = ConnectionCounter(limits: limits())
        #expect(c.tryReserveResponse(600))
        #expect(!c.tryReserveResponse(600))
        c.releaseResponse(600)
        #expect(c.tryReserveResponse(600))
        c.releaseResponse(600)
        #expect(c.tryReserveResponse(5000), "one answer larger than the bound still goes when nothing waits")
    }

    @Test func refusalsAreLoggedAFewTimesAMinutePerUser() {
        let log = RefusalLog()
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var logged = 0
        for i in 0..<100 where log.shouldLog(uid: 1000, now: t0 + .milliseconds(Int64(i))).log { logged += 1 }
        #expect(logged == RefusalLog.linesPerMinute)
        #expect(log.shouldLog(uid: 1001, now: t0).log, "another user is logged on its own")
        let later = log.shouldLog(uid: 1000, now: t0 + .seconds(61))
        #expect(later.log && later.suppressed == 100 - RefusalLog.linesPerMinute)
    }

    @Test func acceptingPausesAtTheCapAndResumesBelowIt() {
        let s = AcceptThrottle.State(cap: 8)
        var paused = false
        for _ in 0..<8 { if s.opened() { paused = true } }
        #expect(paused && s.paused)
        #expect(!s.closed(), "7 open: not yet")
        #expect(s.closed(), "6 open = 3/4 of the cap: resume")
        #expect(!s.paused)
    }
}
