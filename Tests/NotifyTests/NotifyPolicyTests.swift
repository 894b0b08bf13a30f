import Foundation
import PhotolalaCore
import Testing
import Notify

/// What is told and when, on plain dates: at once, once recovered for 30 s, again every
/// `repeat`, a daily summary, and nothing twice across a restart.
@Suite struct NotifyPolicyTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)   // 2027-01-15 08:00:00 UTC
    let utc = TimeZone(identifier: "UTC")!

    var revoked: AttentionItem {
        AttentionItem(reason: .appleRevoked, severity: .critical, message: "The Apple ID no longer authorizes Photolala.")
    }

    func folder(_ path: String) -> AttentionItem {
        AttentionItem(reason: .folderMissing, severity: .warning, message: "\(path) is missing.", subject: path)
    }

    func policy(repeat r: TimeInterval = 86400, summary: Bool = false) -> NotifyPolicy {
        NotifyPolicy(config: .init(repeatInterval: r, clearAfter: 30, dailySummary: summary, summaryHour: 20, timeZone: utc))
    }

    func at(_ seconds: TimeInterval) -> Date { t0.addingTimeInterval(seconds) }

    @Test func aProblemIsToldAtOnceAndOnce() {
        var p = policy()
        #expect(p.step(attention: [revoked], now: at(0)) == [.problem(revoked, repeated: false)])
        #expect(p.hasProblems)
        for s in stride(from: 1.0, to: 600, by: 7) {
            #expect(p.step(attention: [revoked], now: at(s)).isEmpty)
        }
    }

    @Test func recoveredOnceClearForThirtySeconds() {
        var p = policy()
        _ = p.step(attention: [revoked], now: at(0))
        #expect(p.step(attention: [], now: at(10)).isEmpty)
        #expect(p.nextDeadline(now: at(10)) == at(40))
        #expect(p.step(attention: [], now: at(39)).isEmpty)
        #expect(p.step(attention: [], now: at(40)) == [.recovered(.appleRevoked, subject: nil)])
        #expect(!p.hasProblems)
        #expect(p.step(attention: [], now: at(100)).isEmpty)
        #expect(p.nextDeadline(now: at(100)) == nil, "nothing to wake for")
    }

    @Test func aFlickerIsOneEvent() {
        var p = policy()
        var told: [NotifyPolicy.Decision] = []
        // Present, gone for 20 s, back, gone for 10 s, back: one problem, no recovery.
        for (s, on) in [(0.0, true), (5, false), (25, false), (26, true), (30, false), (40, true), (50, true)] {
            told += p.step(attention: on ? [revoked] : [], now: at(s))
        }
        #expect(told == [.problem(revoked, repeated: false)])
        // Gone for good: one recovery 30 s after it last left.
        told += p.step(attention: [], now: at(60))
        told += p.step(attention: [], now: at(89))
        #expect(told.count == 1)
        told += p.step(attention: [], now: at(90))
        #expect(told.last == .recovered(.appleRevoked, subject: nil))
    }

    @Test func aLastingProblemIsRepeated() {
        var p = policy(repeat: 3)
        var times: [TimeInterval] = []
        for s in stride(from: 0.0, through: 10, by: 0.5) {
            for d in p.step(attention: [revoked], now: at(s)) {
                if case .problem(_, let repeated) = d { times.append(s); #expect(repeated == (s > 0)) }
            }
        }
        #expect(times == [0, 3, 6, 9])
        #expect(p.nextDeadline(now: at(10)) == at(12))
    }

    @Test func eachReasonAndSubjectIsItsOwnProblem() {
        var p = policy()
        let a = folder("/srv/a")
        let b = folder("/srv/b")
        #expect(p.step(attention: [a], now: at(0)) == [.problem(a, repeated: false)])
        #expect(p.step(attention: [a, b, revoked], now: at(1)) == [.problem(b, repeated: false), .problem(revoked, repeated: false)])
        _ = p.step(attention: [b, revoked], now: at(2))
        #expect(p.step(attention: [b, revoked], now: at(32)) == [.recovered(.folderMissing, subject: "/srv/a")])
    }

    @Test func aRestartResendsNothing() throws {
        var before = policy(repeat: 3600)
        _ = before.step(attention: [revoked], now: at(0))
        // What the service writes to the queue database, and reads back at the next start.
        let saved = try JSONEncoder().encode(before.memory)
        var after = NotifyPolicy(config: before.config, memory: try JSONDecoder().decode(NotifyPolicy.Memory.self, from: saved))
        #expect(after.step(attention: [revoked], now: at(60)).isEmpty, "still revoked: already told")
        #expect(after.step(attention: [revoked], now: at(3600)) == [.problem(revoked, repeated: true)], "the repeat keeps its pace")
        // Cleared while the daemon was down: told once, 30 s after the start saw it clear.
        var cleared = NotifyPolicy(config: before.config, memory: try JSONDecoder().decode(NotifyPolicy.Memory.self, from: saved))
        #expect(cleared.step(attention: [], now: at(100)).isEmpty)
        #expect(cleared.step(attention: [], now: at(130)) == [.recovered(.appleRevoked, subject: nil)])
    }

    @Test func memoryChangesOnlyWhenSomethingIsTold() {
        var p = policy()
        let empty = p.memory
        _ = p.step(attention: [], now: at(0))
        #expect(p.memory == empty)
        _ = p.step(attention: [revoked], now: at(1))
        let told = p.memory
        _ = p.step(attention: [revoked], now: at(2))
        _ = p.step(attention: [], now: at(3))
        #expect(p.memory == told, "a clear period under way is not written")
    }

    @Test func theDailySummaryOnceADayFromTheHour() {
        var p = policy(summary: true)
        // 08:00 UTC: not yet; due at 20:00.
        #expect(p.step(attention: [], now: at(0)).isEmpty)
        #expect(p.nextDeadline(now: at(0)) == at(12 * 3600))
        #expect(p.step(attention: [], now: at(12 * 3600)) == [.summary(day: "2027-01-15")])
        #expect(p.step(attention: [], now: at(12 * 3600 + 60)).isEmpty)
        #expect(p.nextDeadline(now: at(12 * 3600 + 60)) == at(36 * 3600))
        #expect(p.step(attention: [], now: at(36 * 3600 + 5)) == [.summary(day: "2027-01-16")])
        // Off: never.
        var off = policy(summary: false)
        #expect(off.step(attention: [], now: at(13 * 3600)).isEmpty)
        #expect(off.nextDeadline(now: at(0)) == nil)
    }

    @Test func aSummaryMissedWhileStoppedIsSentAtStart() {
        var p = policy(summary: true)
        #expect(p.step(attention: [], now: at(14 * 3600)) == [.summary(day: "2027-01-15")], "22:00, nothing sent today yet")
        #expect(p.startOfDay(at(14 * 3600)) == at(-8 * 3600))
    }
}
