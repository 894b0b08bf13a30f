import Foundation
import Logging
import PhotolalaCore
import Queue
import Testing
import Daemon

/// The timetable's pause where the parts meet, the schedule's slots, and the attention
/// list the assembled status carries.
@Suite struct ScheduleAndAttentionTests {
    struct Part: StatusContributor {
        let edit: @Sendable (inout DaemonStatus) -> Void
        func contribute(to status: inout DaemonStatus) async { edit(&status) }
    }

    struct Witness: AttentionWitness {
        let signedInBefore: Bool
        func note(_ facts: inout AttentionRules.Facts) async { facts.signedInBefore = signedInBefore }
    }

    let utc = TimeZone(identifier: "UTC")!

    func core() async throws -> DaemonCore {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("daemon-attention-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var s = Settings()
        s.watch.folders = ["/srv/photos"]
        return try await DaemonCore(settings: s, database: try QueueDatabase.open(path: dir.path + "/queue.db"), logger: Logger(label: "test"),
                              attentionRules: AttentionRules(s3FailingAfter: 5))
    }

    @Test func aZeroSlotPausesWithReasonScheduleButLast() {
        var s = DaemonStatus(state: .running)
        s.bandwidth = .init(limit: 0, timetable: "18:00,0 23:00,off", until: "2027-01-15T23:00:00Z")
        DaemonCore.finish(&s, userPaused: false, databaseProblem: nil)
        #expect(s.state == .paused && s.pauseReason == .schedule)

        var user = DaemonStatus(state: .running)
        user.bandwidth = s.bandwidth
        DaemonCore.finish(&user, userPaused: true, databaseProblem: nil)
        #expect(user.pauseReason == .user, "the user's own pause says what they must undo")

        var login = DaemonStatus(state: .needsLogin)
        login.bandwidth = s.bandwidth
        DaemonCore.finish(&login, userPaused: false, databaseProblem: nil)
        #expect(login.state == .needsLogin && login.pauseReason == nil)

        var slow = DaemonStatus(state: .running)
        slow.bandwidth = .init(limit: 1 << 20, timetable: "08:00,1MiB/s", until: "2027-01-16T08:00:00Z")
        DaemonCore.finish(&slow, userPaused: false, databaseProblem: nil)
        #expect(slow.state == .running && slow.pauseReason == nil)
    }

    @Test func theScheduleSaysTheSlotAndTheFixedRate() throws {
        let table = try BandwidthTimetable.parse("08:00,2MiB/s 18:00,0")
        let evening = Date(timeIntervalSince1970: 1_800_000_000 + 11 * 3600)   // 19:00 UTC
        let c = BandwidthSchedule.current(timetable: table, fixedRate: nil, now: evening, timeZone: utc)
        #expect(c == .init(rate: .paused, until: Date(timeIntervalSince1970: 1_800_000_000 + 24 * 3600), scheduled: true))
        #expect(c.isPaused)
        #expect(BandwidthSchedule.current(timetable: nil, fixedRate: 5 << 20, now: evening, timeZone: utc) == .init(rate: .limit(5 << 20)))
        #expect(BandwidthSchedule.current(timetable: nil, fixedRate: nil, now: evening, timeZone: utc) == .init(rate: .unlimited))
    }

    @Test func theGateHoldsPhotosInAZeroSlotOnly() {
        let feed = BandwidthFeed(.init(rate: .paused, until: Date(), scheduled: true))
        #expect(feed.current.scheduled && feed.current.isPaused)
        feed.publish(.init(rate: .limit(100), until: Date(), scheduled: true))
        #expect(!feed.current.isPaused)
    }

    @Test func theFeedTellsSubscribersEachChangeOnce() async {
        let feed = BandwidthFeed()
        var updates = feed.updates().makeAsyncIterator()
        #expect(await updates.next() == .init(rate: .unlimited), "what is in force, at once")
        feed.publish(.init(rate: .paused, scheduled: true))
        feed.publish(.init(rate: .paused, scheduled: true))
        feed.publish(.init(rate: .limit(7), scheduled: true))
        #expect(await updates.next() == .init(rate: .limit(7), scheduled: true), "the newest only, for a slow reader")
    }

    @Test func theAssembledStatusCarriesTheAttentionList() async throws {
        let c = try await core()
        await c.markRunning()
        await c.add([DaemonPart("folders", Part { s in
            s.watch.missingFolders = ["/srv/photos"]
            s.state = .needsLogin
        })])
        #expect(await c.status().attention.map(\.reason) == [.folderMissing], "never signed in: no notSignedIn")
        await c.add([DaemonPart("account", Witness(signedInBefore: true))])
        let s = await c.status()
        #expect(s.attention.map(\.reason) == [.notSignedIn, .folderMissing])
    }

    @Test func s3PastTheThresholdOfTheCoresRules() async throws {
        let c = try await core()
        await c.markRunning()
        await c.add([DaemonPart("s3", Part { s in
            s.s3 = .init(state: .backoff, failures: 4, since: Timestamp.string(Date().addingTimeInterval(-6)), lastError: "HTTP 503")
        })])
        #expect(await c.status().attention.map(\.reason) == [.s3Failing])
    }
}
