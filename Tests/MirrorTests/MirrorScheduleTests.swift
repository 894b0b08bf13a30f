import Foundation
import Testing
import Mirror

@Suite struct MirrorScheduleTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let plan = MirrorSchedule(checkInterval: 900, listInterval: 86400)

    @Test func aFullPassAtStartThenChecksThenAFullPassADay() {
        var m = MirrorSchedule.Memory()
        #expect(plan.next(m, now: t0, random: 0.5) == .fullPass)
        m.fullPassAt = t0
        m.checkedAt = t0
        #expect(plan.next(m, now: t0.addingTimeInterval(10), random: 0.5) == .wait(until: t0.addingTimeInterval(900)))
        #expect(plan.next(m, now: t0.addingTimeInterval(900), random: 0.5) == .check)
        m.checkedAt = t0.addingTimeInterval(86_000)
        #expect(plan.next(m, now: t0.addingTimeInterval(86_100), random: 0.5) == .wait(until: t0.addingTimeInterval(86_400)))
        #expect(plan.next(m, now: t0.addingTimeInterval(86_400), random: 0.5) == .fullPass)
    }

    @Test func aPassAskedForComesAtOnce() {
        let m = MirrorSchedule.Memory(fullPassAt: t0, checkedAt: t0, passAsked: true)
        #expect(plan.next(m, now: t0.addingTimeInterval(1), random: 0.5) == .fullPass)
    }

    @Test func aFailureIsTriedAgainSoonerNeverInATightLoop() {
        var m = MirrorSchedule.Memory(fullPassAt: t0, checkedAt: t0, failures: 1, failedAt: t0.addingTimeInterval(1000))
        guard case .wait(let until) = plan.next(m, now: t0.addingTimeInterval(1000), random: 0) else { Issue.record("no wait"); return }
        #expect(until.timeIntervalSince(t0.addingTimeInterval(1000)) >= 10)
        #expect(plan.next(m, now: until, random: 0) == .check, "the check that failed is tried again")
        m.fullPassAt = nil
        #expect(plan.next(m, now: t0.addingTimeInterval(5000), random: 0) == .fullPass, "a first pass that failed is a pass again")
    }

    @Test func statusSaysWhenTheNextLookIs() {
        let m = MirrorSchedule.Memory(fullPassAt: t0, checkedAt: t0)
        #expect(plan.nextLookAt(m, now: t0) == t0.addingTimeInterval(900))
        #expect(plan.nextLookAt(MirrorSchedule.Memory(), now: t0) == t0, "due: now")
    }

    @Test func thawedObjectsAreLookedAtSoonThenLessOften() {
        let rule = ThawRule(checkInterval: 60)
        #expect(rule.nextLook(askedAt: t0, looks: 1) == t0.addingTimeInterval(60))
        #expect(rule.nextLook(askedAt: t0, looks: 2) == t0.addingTimeInterval(180))
        #expect(rule.nextLook(askedAt: t0, looks: 30).timeIntervalSince(rule.nextLook(askedAt: t0, looks: 29)) == 6 * 3600, "capped")
    }

    @Test func whatAHeadOfAThawingObjectSays() {
        #expect(ThawRule.step(storageClass: "GLACIER", restore: .available, exists: true) == .fetch)
        #expect(ThawRule.step(storageClass: "DEEP_ARCHIVE", restore: .inProgress, exists: true) == .wait)
        #expect(ThawRule.step(storageClass: "GLACIER", restore: nil, exists: true) == .askAgain, "an expired copy is asked back again")
        #expect(ThawRule.step(storageClass: nil, restore: nil, exists: true) == .readable)
        #expect(ThawRule.step(storageClass: "GLACIER", restore: nil, exists: false) == .gone)
    }
}
