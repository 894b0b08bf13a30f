import Foundation
import Testing
import Notify

/// A channel's deliveries: in order, retried with backoff for a day, then dropped.
@Suite struct OutboxTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func at(_ s: TimeInterval) -> Date { t0.addingTimeInterval(s) }

    @Test func inOrderAndRemovedOnceDelivered() {
        var box = Outbox<String>()
        #expect(box.next(now: at(0)) == .idle)
        box.add("a", now: at(0))
        box.add("b", now: at(0))
        #expect(box.next(now: at(0)) == .send("a"))
        box.succeeded("a", now: at(1))
        #expect(box.next(now: at(1)) == .send("b"))
        #expect(box.lastSentAt == at(1) && box.sent == 1 && box.pending == 1)
    }

    @Test func aFailureWaitsWithBackoffAndKeepsTheOrder() {
        var box = Outbox<String>()
        box.add("a", now: at(0))
        box.add("b", now: at(0))
        // random 0: the equal jitter's lower half, 1 s after the first failure (base 2).
        let droppedFirst = box.failed("a", "HTTP 500 from ntfy.example", now: at(0), random: 0)
        #expect(!droppedFirst)
        #expect(box.lastError == "HTTP 500 from ntfy.example")
        #expect(box.next(now: at(0.5)) == .wait(until: at(1)))
        #expect(box.next(now: at(1)) == .send("a"), "the next is the same, not b")
        let droppedSecond = box.failed("a", "HTTP 500 from ntfy.example", now: at(1), random: 0)
        #expect(!droppedSecond)
        #expect(box.next(now: at(1)) == .wait(until: at(3)))
        box.succeeded("a", now: at(3))
        #expect(box.lastError == nil)
        #expect(box.next(now: at(3)) == .send("b"))
    }

    @Test func droppedAfterADay() {
        var box = Outbox<String>()
        box.add("a", now: at(0))
        var now = at(0)
        var attempts = 0
        while case .send = box.next(now: now) {
            attempts += 1
            if box.failed("a", "refused", now: now, random: 0.5) { break }
            if case .wait(let until) = box.next(now: now) { now = until }
        }
        #expect(box.pending == 0 && box.dropped == 1)
        #expect(now.timeIntervalSince(at(0)) <= 86400)
        #expect(now.timeIntervalSince(at(0)) > 86400 - 1800, "tried until close to a day")
        // 2 s doubling to the 30 min cap: a dozen quick tries, then one every half hour or so.
        #expect(attempts > 40 && attempts < 90, "\(attempts)")
        #expect(box.lastError == "refused")
    }

    @Test func aPeriodicPingIsNotRetried() {
        var box = Outbox<HealthSignal>(coalescing: true)
        box.add(.ok, now: at(0), retries: false)
        let dropped = box.failed(.ok, "connection refused", now: at(0), random: 0)
        #expect(dropped)
        #expect(box.next(now: at(0)) == .idle)
    }

    @Test func coalescingKeepsTheNewestOnly() {
        var box = Outbox<HealthSignal>(coalescing: true)
        box.add(.fail("quota"), now: at(0))
        _ = box.failed(.fail("quota"), "HTTP 502", now: at(0), random: 0)
        box.add(.ok, now: at(5))
        #expect(box.next(now: at(5)) == .send(.ok), "the receiver wants the state now, not the one it missed")
        // The old ping answered after all: counted, but the new one still goes out.
        box.succeeded(.fail("quota"), now: at(6))
        #expect(box.next(now: at(6)) == .send(.ok))
    }

    @Test func boundedWhileAReceiverIsDown() {
        var box = Outbox<Int>()
        for i in 0..<150 { box.add(i, now: at(Double(i))) }
        #expect(box.pending == 100 && box.dropped == 50)
        #expect(box.next(now: at(200)) == .send(50))
    }

    @Test func clearedWhenTheChannelGoes() {
        var box = Outbox<Int>()
        box.add(1, now: at(0))
        box.clear()
        #expect(box.next(now: at(0)) == .idle)
    }
}
