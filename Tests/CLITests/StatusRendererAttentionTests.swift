import Foundation
import PhotolalaCore
import Testing
import CLI

/// "Action needed" is the daemon's attention list, exactly; the timetable's pause says
/// until when; the notification channels say how they fare.
@Suite struct StatusRendererAttentionTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func lines(_ s: DaemonStatus) -> [String] {
        StatusRenderer.human(s, color: false, now: now).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    func running() -> DaemonStatus {
        var s = DaemonStatus(state: .running)
        s.account = .init(signedIn: true, userId: "550E8400-E29B-41D4-A716-446655440000")
        s.queue.uploaded = 10
        return s
    }

    @Test func eachAttentionItemIsOneActionNeededLine() {
        var s = running()
        s.state = .paused
        s.pauseReason = .appleRevoked
        s.watch.missingFolders = ["/srv/phone"]
        s.attention = AttentionRules().items(for: s, facts: .init(), now: now)
        let out = lines(s)
        #expect(out[1] == "  Action needed: The Apple ID no longer authorizes Photolala on this NAS: uploads are paused. Sign in again: sudo photolalactl login")
        #expect(out[2] == "  Action needed: The watched folder /srv/phone is missing or unreadable: nothing in it is backed up. Mount it again, or let the user photolala read it; the daemon looks again by itself.")
        #expect(!out.contains("  \(DaemonStatus.PauseReason.appleRevoked.explanation)"), "said once, by the attention line")
        #expect(out.filter { $0.contains("Action needed") }.count == 2)
    }

    @Test func aLostSignInReplacesTheFreshInstallHint() {
        var s = DaemonStatus(state: .needsLogin)
        s.attention = AttentionRules().items(for: s, facts: .init(signedInBefore: true), now: now)
        let out = lines(s)
        #expect(out[1] == "  Action needed: This NAS is not signed in to Photolala any more: nothing is backed up. Sign in again: sudo photolalactl login")
        #expect(!out.contains { $0.contains("Not signed in yet") })
    }

    @Test func aDatabaseProblemShownAsAttentionIsNotRepeatedAsAProblem() {
        var s = running()
        let problem = "disk full: the queue database (/var/lib/photolala/queue.db) cannot grow; free space on that disk — the daemon retries by itself"
        s.problems = [problem, "Thumbnails are off: no worker"]
        s.attention = AttentionRules().items(for: s, facts: .init(databaseProblem: problem), now: now)
        let out = lines(s)
        #expect(out[1].hasPrefix("  Action needed: Nothing new can be recorded (disk full): the queue database"))
        #expect(out[2] == "  Problem: Thumbnails are off: no worker")
        #expect(!out.contains { $0.hasPrefix("  Problem: disk full") })
    }

    @Test func theTimetablesPauseSaysUntilWhen() {
        var s = running()
        s.state = .paused
        s.pauseReason = .schedule
        let until = now.addingTimeInterval(2 * 3600 + 13 * 60)
        s.bandwidth = .init(limit: 0, timetable: "18:00,0 23:00,off", until: Timestamp.string(until), nextLimit: nil)
        let out = lines(s)
        #expect(out[0].hasPrefix("‖ Paused (schedule)"))
        #expect(out[1] == "  \(DaemonStatus.PauseReason.schedule.explanation)")
        let local = StatusRenderer.localTime(until, now: now)
        #expect(out[2] == "  Uploads resume at \(local) (in 2h13m).")
        #expect(out.contains("Bandwidth  paused (timetable) until \(local), then no limit"))
    }

    @Test func aRateSlotAndAFixedRateAreShown() {
        var s = running()
        s.bandwidth = .init(limit: 2 << 20, timetable: "08:00,2MiB/s 18:00,0", until: Timestamp.string(now.addingTimeInterval(600)), nextLimit: 0)
        #expect(lines(s).contains { $0.hasPrefix("Bandwidth  2.1 MB/s (timetable) until ") && $0.hasSuffix(", then paused") })
        s.bandwidth = .init(limit: 10 << 20)
        #expect(lines(s).contains("Bandwidth  10.5 MB/s"))
        s.bandwidth = .init()
        #expect(!lines(s).contains { $0.hasPrefix("Bandwidth") }, "no limit, no line")
    }

    @Test func localTimesBeyondADayNameTheWeekday() {
        let utc = TimeZone(identifier: "UTC")!
        #expect(StatusRenderer.localTime(now.addingTimeInterval(3600), now: now, timeZone: utc) == "09:00")
        // 2027-01-15 is a Friday.
        #expect(StatusRenderer.localTime(now.addingTimeInterval(3 * 86400), now: now, timeZone: utc) == "Mon 08:00")
    }

    @Test func notificationChannelsAndAFailingOne() {
        var s = running()
        s.notify = .init(channels: ["webhook", "healthcheck"], lastSentAt: "2027-01-15T07:00:00Z", lastError: "webhook: HTTP 500 from ntfy.sh",
                         perChannel: [.init(channel: "webhook", lastError: "HTTP 500 from ntfy.sh", pending: 1),
                                      .init(channel: "healthcheck", lastSentAt: "2027-01-15T07:00:00Z")])
        let out = lines(s)
        #expect(out.contains("Notify     webhook, healthcheck; last sent 2027-01-15T07:00:00Z"))
        #expect(out.contains("           webhook failing: HTTP 500 from ntfy.sh (1 waiting, retried)"))
        s.notify = .init()
        #expect(!lines(s).contains { $0.hasPrefix("Notify") })
    }

    @Test func notifyTestSaysWhatEachChannelAnswered() {
        let report = NotifyTestReport(results: [.init(channel: "webhook", ok: true, answer: "HTTP 200 from ntfy.sh"),
                                                .init(channel: "healthcheck", ok: false, answer: "hc-ping.com: connection refused")])
        #expect(NotifyCommand.render(report) == "webhook      ok      HTTP 200 from ntfy.sh\nhealthcheck  FAILED  hc-ping.com: connection refused\n")
        #expect(NotifyCommand.render(NotifyTestReport(results: [])).hasPrefix("No notification channel is configured"))
    }
}
