import Foundation
import Logging
import PhotolalaCore
import Queue
import Testing
import Daemon

@Suite struct StatusAssemblyTests {
    struct Part: StatusContributor {
        let edit: @Sendable (inout DaemonStatus) -> Void
        func contribute(to status: inout DaemonStatus) async { edit(&status) }
    }

    func core(_ edit: (inout Settings) -> Void = { _ in }) async throws -> DaemonCore {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("daemon-core-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var s = Settings()
        s.watch.folders = ["/srv/photos", "/home/a/Pictures"]
        edit(&s)
        return try await DaemonCore(settings: s, database: try QueueDatabase.open(path: dir.path + "/queue.db"), logger: Logger(label: "test"))
    }

    @Test func filesBeingReadAreCountedOutOfPending() {
        var s = DaemonStatus(state: .running)
        s.queue.pending = 10
        s.queue.hashing = 3
        DaemonCore.finish(&s, userPaused: false, databaseProblem: nil)
        #expect(s.queue.pending == 7 && s.queue.hashing == 3)
    }

    @Test func pendingNeverGoesNegative() {
        var s = DaemonStatus(state: .running)
        s.queue.pending = 1
        s.queue.hashing = 2
        DaemonCore.finish(&s, userPaused: false, databaseProblem: nil)
        #expect(s.queue.pending == 0)
    }

    @Test func theUsersPauseShowsOnlyWhenNothingNeedsThemMore() {
        var running = DaemonStatus(state: .running)
        DaemonCore.finish(&running, userPaused: true, databaseProblem: nil)
        #expect(running.state == .paused && running.pauseReason == .user)

        var login = DaemonStatus(state: .needsLogin)
        DaemonCore.finish(&login, userPaused: true, databaseProblem: nil)
        #expect(login.state == .needsLogin && login.pauseReason == nil)

        var quota = DaemonStatus(state: .paused)
        quota.pauseReason = .quotaExceeded
        DaemonCore.finish(&quota, userPaused: true, databaseProblem: nil)
        #expect(quota.pauseReason == .quotaExceeded)
    }

    @Test func aDatabaseProblemIsShown() {
        var s = DaemonStatus(state: .running)
        DaemonCore.finish(&s, userPaused: false, databaseProblem: "The disk is full.")
        #expect(s.problems == ["The disk is full."])
    }

    @Test func queueCountsIncludeBytesOnTheWireAsPending() {
        var q = DaemonStatus.Queue()
        var c = QueueCounts()
        c.pending = 2
        c.uploading = 1
        c.uploaded = 5
        c.failed = 1
        c.pendingBytes = 100
        c.uploadingBytes = 50
        c.uploadedBytes = 1000
        q.apply(c)
        #expect(q.pending == 2 && q.uploading == 1 && q.uploaded == 5 && q.failed == 1)
        #expect(q.pendingBytes == 150 && q.uploadedBytes == 1000)
    }

    @Test func theOrderPartsContributeInDoesNotMatter() async throws {
        let ingest = Part { $0.queue.hashing = 2; $0.watch.directories = 40 }
        let upload = Part { $0.queue.uploadRate = 1000; $0.s3 = .init(state: .ok) }
        let account = Part { $0.account = .init(signedIn: true, userId: "U") }
        let a = try await core()
        let b = try await core()
        for p in [ingest, upload, account] { await a.add([DaemonPart("part", p)]) }
        for p in [account, upload, ingest] { await b.add([DaemonPart("part", p)]) }
        var sa = await a.status()
        var sb = await b.status()
        sa.startedAt = nil
        sb.startedAt = nil
        #expect(sa == sb)
        #expect(sa.queue.hashing == 2 && sa.queue.uploadRate == 1000 && sa.account.signedIn && sa.watch.directories == 40)
    }

    @Test func theCoreFillsTheWatchedFoldersAndState() async throws {
        let c = try await core()
        let s = await c.status()
        #expect(s.state == .starting)
        #expect(s.watch.folders == 2 && s.watch.paths == ["/srv/photos", "/home/a/Pictures"])
        await c.markRunning()
        #expect(await c.status().state == .running)
    }

    @Test func theUsersPauseSurvivesARestart() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("daemon-pause-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = try QueueDatabase.open(path: dir.path + "/queue.db")
        let first = try await DaemonCore(settings: Settings(), database: db, logger: Logger(label: "test"))
        try await first.setUserPaused(true)
        let second = try await DaemonCore(settings: Settings(), database: db, logger: Logger(label: "test"))
        #expect(await second.isUserPaused)
        await second.markRunning()
        #expect(await second.status().pauseReason == .user)
    }

    @Test func everyChangeIsCounted() async throws {
        let c = try await core()
        let before = c.changeGeneration
        await c.markRunning()
        c.changed()
        #expect(c.changeGeneration == before + 2)
    }
}
