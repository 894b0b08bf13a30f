import Bucket
import BucketTesting
import Digests
import Foundation
import GRDB
import PhotolalaCore
import Queue
import Testing
import Catalog

/// The catalog actor in-process: our ready photos published into the user's catalog,
/// read back as the apps read it (app-catalog.md), another device's rows kept.
@Suite(.serialized) struct CatalogStageTests {
    func md5(_ text: String) -> String { Hex.string(MD5.digest(Array(text.utf8))) }

    /// A photo the thumbnail stage left ready.
    func ready(_ world: StageWorld, _ seed: String, date: Int64) async throws -> String {
        let line = "\(md5("head " + seed)),1000,\(md5(seed)),\(date),JPEG"
        try await world.database.write { db in
            try db.execute(sql: "INSERT INTO object(md5, size, state, updatedAt) VALUES (?, 1000, 'uploaded', 0)", arguments: [md5(seed)])
            try db.execute(sql: """
                INSERT INTO photo(md5, state, headMD5, size, format, takenAt, updatedAt) VALUES (?, 'ready', ?, 1000, 'JPEG', ?, 0)
                """, arguments: [md5(seed), md5("head " + seed), date])
        }
        return line
    }

    /// The catalog as an app reads it: the pointer, then the snapshot it names, whose
    /// bytes must have that MD5; the header, then the rows.
    func appRead(_ world: StageWorld) throws -> [String] {
        let pointer = try #require(world.bucket.object(CatalogFormat.pointerKey(userId: world.userId)))
        #expect(pointer.contentType == "text/plain")
        let named = String(decoding: pointer.bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let snapshot = try #require(world.bucket.object(CatalogFormat.snapshotKey(userId: world.userId, md5: named)))
        #expect(snapshot.contentType == "text/csv")
        #expect(Hex.string(MD5.digest(snapshot.bytes)) == named)
        let text = String(decoding: snapshot.bytes, as: UTF8.self)
        #expect(text.hasSuffix("\n"))
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == CatalogFormat.header)
        return Array(lines.dropFirst())
    }

    @Test func readyPhotosArePublishedBesideAnotherDevicesRows() async throws {
        let world = try StageWorld(skipsWaitsUpTo: 60)
        // A phone published first, as the apps do: snapshot, then pointer.
        let phone = ["\(md5("phone head")),2000,\(md5("phone")),1650000000,HEIF"]
        let body = Array(([CatalogFormat.header] + phone).map { $0 + "\n" }.joined().utf8)
        world.bucket.store(CatalogFormat.snapshotKey(userId: world.userId, md5: Hex.string(MD5.digest(body))), bytes: body,
                           contentType: "text/csv")
        world.bucket.store(CatalogFormat.pointerKey(userId: world.userId), bytes: Array(Hex.string(MD5.digest(body)).utf8),
                           contentType: "text/plain")
        let ours = await [try ready(world, "new", date: 1_700_000_000), try ready(world, "old", date: 1_600_000_000)]

        var settings = Settings()
        settings.daemon.stateDir = world.dir
        settings.catalog.publishInterval = .seconds(1)
        let audit = CollectedAudit()
        let service = CatalogService(context: world.context(audit: audit), bucket: world.session(), gate: OpenGate(),
                                     options: .init(settings))
        let running = Running { try await service.run() }
        var status = DaemonStatus()
        try await world.waitUntil("the catalog published") {
            await service.contribute(to: &status)
            return status.catalog.state == .published
        }
        await running.stop()
        #expect(status.catalog.rows == 2 && status.catalog.total == 3 && status.catalog.pending == 0)
        // Newest first; the phone's row exactly as it was.
        #expect(try appRead(world) == [ours[0], phone[0], ours[1]])
        #expect(try await world.database.catalogPending() == 0)
        // The phone's catalog was replaced (its row kept): the audit trail says so, once.
        #expect(audit.all == [
            AuditEvent(.catalogReplaced, by: .daemon, .ok, [
                "prefix": .string(CatalogFormat.prefix(userId: world.userId)), "replaced": .string(Hex.string(MD5.digest(body))),
                "rowsKept": 1, "added": 2, "putBack": 0, "conditional": true,
            ]),
        ])
    }

    @Test func aPublishOverOurOwnCatalogIsNotAReplacement() async throws {
        let world = try StageWorld(skipsWaitsUpTo: 60)
        _ = try await ready(world, "first", date: 1_700_000_000)
        var settings = Settings()
        settings.daemon.stateDir = world.dir
        settings.catalog.publishInterval = .seconds(1)
        let audit = CollectedAudit()
        let service = CatalogService(context: world.context(audit: audit), bucket: world.session(), gate: OpenGate(),
                                     options: .init(settings))
        let running = Running { try await service.run() }
        var status = DaemonStatus()
        try await world.waitUntil("the first publish") {
            await service.contribute(to: &status)
            return status.catalog.rows == 1
        }
        _ = try await ready(world, "second", date: 1_700_000_100)
        world.database.signals.photosReady.changed()
        try await world.waitUntil("the second publish") {
            await service.contribute(to: &status)
            return status.catalog.rows == 2
        }
        await running.stop()
        #expect(try appRead(world).count == 2)
        #expect(audit.all.isEmpty)
    }

    /// A kill between the recording's transactions (every row marked listed, the ledger
    /// not yet written) once left a stage that saw nothing to publish and nothing of ours
    /// to look after: status said idle with 0 rows for good.
    @Test func aRecordingCutShortIsReadAgainAtTheNextStart() async throws {
        let world = try StageWorld(skipsWaitsUpTo: 60)
        let ours = await [try ready(world, "one", date: 1_700_000_000), try ready(world, "two", date: 1_600_000_000)]
        var settings = Settings()
        settings.daemon.stateDir = world.dir
        settings.catalog.publishInterval = .seconds(1)
        let first = CatalogService(context: world.context(), bucket: world.session(), gate: OpenGate(),
                                   options: .init(settings))
        var running = Running { try await first.run() }
        var status = DaemonStatus()
        try await world.waitUntil("the first publish") {
            await first.contribute(to: &status)
            return status.catalog.rows == 2
        }
        await running.stop()
        // What a kill after the marks' transaction leaves: marks, the flag, no ledger.
        let kept = try await world.database.settings(prefix: CatalogLedger.prefix)
        var cut: [String: String?] = Dictionary(uniqueKeysWithValues: kept.keys.map { ($0, nil) })
        cut[CatalogLedger.prefix + "userId"] = kept[CatalogLedger.prefix + "userId"]
        cut[CatalogLedger.recordingKey] = "1"
        try await world.database.setSettings(cut)
        #expect(try await world.database.catalogPending() == 0)

        let second = CatalogService(context: world.context(), bucket: world.session(), gate: OpenGate(),
                                    options: .init(settings))
        running = Running { try await second.run() }
        try await world.waitUntil("the catalog read again") {
            await second.contribute(to: &status)
            return status.catalog.state == .published && status.catalog.rows == 2
        }
        await running.stop()
        #expect(status.catalog.total == 2 && status.catalog.pending == 0)
        #expect(try await world.database.settings(prefix: CatalogLedger.recordingKey).isEmpty, "settled again")
        #expect(Set(try appRead(world)) == Set(ours))
    }
}
