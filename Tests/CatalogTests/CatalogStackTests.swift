import Foundation
import Logging
import PhotolalaCore
import Queue
import Bucket
import Synchronization
import Testing
import Catalog

/// The catalog stage as the daemon runs it (the real `CatalogService`, the real queue
/// database, signed in through the fake backend, S3 in moto with auth enforced), and the
/// catalog read back exactly as the apps read it. Photo rows are put in the queue the way
/// the thumbnail stage leaves them.
@Suite("Catalog stage against moto and the fake backend", .serialized,
       .enabled(if: CatalogStack.available, "moto_server is not on PATH: run scripts/setup"))
struct CatalogStackTests {
    struct Running {
        let queue: TestQueue
        let access: TestAccess
        let app: S3App
        let service: CatalogService
        let task: Task<Void, Never>

        func status() async -> DaemonStatus.Catalog {
            var s = DaemonStatus()
            await service.contribute(to: &s)
            return s.catalog
        }

        func waitFor(_ what: String, timeout: Double = 60, _ done: (DaemonStatus.Catalog) async throws -> Bool) async throws -> DaemonStatus.Catalog {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                let s = await status()
                if try await done(s) { return s }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("timed out waiting for \(what); catalog status: \(await status())")
            throw StackError("timed out waiting for \(what)")
        }

        /// Ready photos, announced as the thumbnail stage announces them.
        func ready(_ rows: [CatalogRow]) throws {
            try queue.add(rows)
            queue.database.signals.photosReady.changed()
        }

        func stop() async {
            task.cancel()
            await task.value
        }
    }

    func start(configure: (inout Settings) -> Void = { _ in }, before: (TestQueue, S3App) async throws -> Void = { _, _ in }) async throws -> Running {
        let queue = try TestQueue()
        let access = try await CatalogStack.shared.signIn(stateDir: queue.dir.path)
        let (client, credentials) = try access.appClient()
        let app = S3App(client: client, credentials: credentials, userId: access.userId)
        try await before(queue, app)
        var settings = Settings()
        settings.daemon.stateDir = queue.dir.path
        settings.catalog.publishInterval = .seconds(1)
        configure(&settings)
        let logger = Logger(label: "catalog-tests")
        let service = CatalogService(context: StageContext(database: queue.database, logger: logger), bucket: access.session(logger: logger),
                                     gate: access, options: .init(settings))
        let task = Task { _ = try? await service.run() }
        return Running(queue: queue, access: access, app: app, service: service, task: task)
    }

    @Test("the apps read back every ready photo, newest first, under the user id as the backend spells it")
    func publishedCatalogReadsBackAsTheAppsReadIt() async throws {
        let ours = [photo("jpeg", date: 1_700_000_300), photo("heic", date: 1_700_000_100, format: "HEIF"),
                    photo("png", date: 1_700_000_200, format: "PNG"), photo("dng", date: 1_600_000_000, format: "RAW-DNG")]
        let run = try await start(before: { queue, _ in
            try queue.add(ours)
            try queue.add([photo("video", date: 1_800_000_000, format: "MOV")], state: "skipped")
            try queue.add([photo("broken", date: 1_800_000_001)], state: "failed")
            try queue.add([photo("no thumbnail yet", date: 1_800_000_002)], state: "pending")
        })
        defer { Task { await run.stop() } }
        let status = try await run.waitFor("the first publish") { $0.state == .published && $0.rows == 4 }
        #expect(status.total == 4 && status.pending == 0 && status.publishedAt != nil && status.conditionalWrites)

        // The fake backend spells user ids as the apps do: a lowercasing anywhere would show.
        #expect(run.access.userId == run.access.userId.uppercased() && run.access.userId.contains(where: \.isLetter))
        let view = try #require(try await run.app.view())
        #expect(view.lines == [ours[0], ours[2], ours[1], ours[3]].map(\.line))
        let keys = try await run.app.keys(under: CatalogFormat.prefix(userId: run.access.userId))
        #expect(keys == [CatalogFormat.pointerKey(userId: run.access.userId),
                         CatalogFormat.snapshotKey(userId: run.access.userId, md5: view.md5)].sorted())
        #expect(try await run.app.contentType(CatalogFormat.pointerKey(userId: run.access.userId)) == "text/plain")
        #expect(try await run.app.contentType(CatalogFormat.snapshotKey(userId: run.access.userId, md5: view.md5)) == "text/csv")

        // More photos become ready: the next publish adds them, the old snapshot stays.
        let more = [photo("later", date: 1_750_000_000), photo("older", date: 1_000)]
        try run.ready(more)
        _ = try await run.waitFor("the second publish") { $0.rows == 6 && $0.state == .published }
        let second = try #require(try await run.app.view())
        #expect(second.lines == [more[0], ours[0], ours[2], ours[1], ours[3], more[1]].map(\.line))
        #expect(try await run.app.get(CatalogFormat.snapshotKey(userId: run.access.userId, md5: view.md5)) != nil)
    }

    @Test("another device's catalog from before sign-in keeps every row; a big snapshot goes up in parts")
    func anotherDevicesCatalogKeepsAllItsRows() async throws {
        let phone = (0..<70_000).map { theirs("phone \($0)", date: 1_500_000_000 + Int64($0 * 7 % 50_000)) }
        let ours = (0..<300).map { photo("nas \($0)", date: 1_500_000_000 + Int64($0 * 131 % 60_000)) }
        let run = try await start(configure: { s in
            s.upload.multipartThreshold = 5 << 20
            s.upload.partSize = 5 << 20
        }, before: { queue, app in
            try await app.publish(lines: phone)
            try queue.add(ours)
        })
        defer { Task { await run.stop() } }
        _ = try await run.waitFor("the publish", timeout: 120) { $0.state == .published && $0.rows == 300 }
        let view = try #require(try await run.app.view())
        #expect(view.lines.count == 70_300)
        #expect(Set(view.lines) == Set(phone).union(ours.map(\.line)), "every row of the phone's, byte for byte, and ours")
        #expect(view.isNewestFirst)
        let etag = try #require(try await run.app.etag(CatalogFormat.snapshotKey(userId: run.access.userId, md5: view.md5)))
        #expect(etag.hasSuffix("-2"), "a 6 MB snapshot above a 5 MiB threshold: two parts (\(etag))")
        #expect(await run.status().total == 70_300)
    }

    @Test("an app rewriting the catalog without our rows: they come back at the next check, its rows stay; an unstarred photo stays out")
    func rowsAnAppDroppedComeBack() async throws {
        let ours = (0..<10).map { photo("ours \($0)", date: 1_700_000_000 + Int64($0)) }
        let run = try await start(configure: { s in s.catalog.checkInterval = .seconds(1) }, before: { queue, app in
            try queue.add(ours)
            for row in ours { try await app.putPhoto(md5: row.md5) }
        })
        defer { Task { await run.stop() } }
        _ = try await run.waitFor("the publish") { $0.rows == 10 }
        let mine = [theirs("mine 1", date: 1_700_000_005), theirs("mine 2", date: 1)]
        try await run.app.publish(lines: mine)
        // The pointer goes up before the daemon records it: wait for both.
        _ = try await run.waitFor("our rows to come back") { status in
            try await Set(run.app.view()?.lines ?? []) == Set(mine + ours.map(\.line)) && status.rows == 10 && status.total == 12
        }

        // Unstarring one of ours: the app deletes the photo, then rewrites without its row.
        try await run.app.deletePhoto(md5: ours[3].md5)
        try await run.app.publish(lines: mine + ours.filter { $0 != ours[3] }.map(\.line))
        _ = try await run.waitFor("the unstar to be read") { $0.rows == 9 }
        try await Task.sleep(for: .seconds(2.5))
        let view = try #require(try await run.app.view())
        #expect(!view.md5s.contains(ours[3].md5), "not put back after two more checks")
        #expect(try run.queue.catalogColumn(ours[3].md5) == "withdrawn")
    }

    @Test("racing a writer that publishes in a loop like the app: no row lost, never a pointer to a missing snapshot")
    func racingPublishers() async throws {
        let run = try await start(configure: { s in s.catalog.checkInterval = .seconds(1) })
        defer { Task { await run.stop() } }
        let ours = (0..<60).map { photo("race \($0)", date: 1_700_000_000 + Int64($0 * 37 % 100)) }
        let appRows = Mutex<[String]>([])
        let stop = Mutex(false)
        let reads = Mutex(0)
        // Every pointer anyone reads names a snapshot that is there, with that MD5.
        let reader = Task {
            while !stop.withLock({ $0 }) {
                _ = try await run.app.view()
                reads.withLock { $0 += 1 }
            }
        }
        // The app: read, add a row of its own, write the snapshot, then the pointer, no condition.
        let writer = Task {
            for i in 0..<40 {
                let current = try await run.app.view()?.lines ?? []
                // The app's copy ages while it works: a publish of ours in between is lost
                // by its unconditional write, and must come back by our next check.
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...150)))
                let row = theirs("app \(i)", date: 1_700_000_000 + Int64(i * 3))
                appRows.withLock { $0.append(row) }
                try await run.app.publish(lines: current + [row])
                try await Task.sleep(for: .milliseconds(Int.random(in: 20...120)))
            }
        }
        for batch in 0..<6 {
            let rows = Array(ours[(batch * 10)..<(batch * 10 + 10)])
            // Uploaded before they are ready, as the stages do: a dropped row whose photo
            // is gone would be an unstar, not a race.
            for row in rows { try await run.app.putPhoto(md5: row.md5) }
            try run.ready(rows)
            try await Task.sleep(for: .milliseconds(400))
        }
        try await writer.value
        let expected = Set(appRows.withLock { $0 } + ours.map(\.line))
        _ = try await run.waitFor("every row in the catalog") { _ in
            Set(try await run.app.view()?.lines ?? []).isSuperset(of: expected)
        }
        stop.withLock { $0 = true }
        try await reader.value
        let view = try #require(try await run.app.view())
        #expect(view.lines.count == expected.count && view.isNewestFirst)
        #expect(reads.withLock { $0 } > 10)
    }

    @Test("catalog.enabled = false: state off, nothing published")
    func disabledPublishesNothing() async throws {
        let run = try await start(configure: { s in s.catalog.enabled = false }, before: { queue, _ in try queue.add([photo("a", date: 1)]) })
        defer { Task { await run.stop() } }
        try await Task.sleep(for: .seconds(2))
        #expect(await run.status().state == .off)
        #expect(try await run.app.view() == nil)
        // Turned on by a reload: published.
        var settings = Settings()
        settings.daemon.stateDir = run.queue.dir.path
        settings.catalog.publishInterval = .seconds(1)
        await run.service.apply(.init(settings))
        _ = try await run.waitFor("the publish after the reload") { $0.state == .published && $0.rows == 1 }
    }
}
