import Foundation
import GRDB
import PhotolalaCore
import Queue
import Testing
import Thumbnails

/// The photo rows the thumbnail stage writes and the catalog stage reads.
@Suite struct PhotoRecordsTests {
    let db: QueueDatabase

    init() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-photos-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        db = try QueueDatabase.open(path: dir.appendingPathComponent("queue.db").path)
    }

    /// An object in `state` with one file of it.
    func object(_ md5: String, state: String, path: String) throws {
        try db.pool.write { d in
            try d.execute(sql: "INSERT INTO object(md5, size, state, updatedAt) VALUES (?, 10, ?, 1)", arguments: [md5, state])
            try d.execute(sql: """
                INSERT INTO file(path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, state, updatedAt)
                VALUES (?, '/p', 1, ?, 10, 5, 6, ?, ?, 1)
                """, arguments: [path, Int.random(in: 1...1_000_000), md5, state == "uploaded" ? "uploaded" : "queued"])
        }
    }

    func seedAll() async throws {
        var rowid: Int64 = 0
        while true {
            let step = try await db.seedPhotos(after: rowid, window: 2)
            if step.atEnd { return }
            rowid = step.last
        }
    }

    @Test func onlyUploadedObjectsGetPendingRowsOnce() async throws {
        try object("a", state: "uploaded", path: "/p/a.jpg")
        try object("b", state: "pending", path: "/p/b.jpg")
        for i in 0..<5 { try object("u\(i)", state: "uploaded", path: "/p/u\(i).jpg") }
        try await seedAll()
        try await seedAll()
        let jobs = try await db.duePhotos(excluding: [], limit: 100)
        #expect(Set(jobs.map(\.md5)) == ["a", "u0", "u1", "u2", "u3", "u4"])
        #expect(jobs.first { $0.md5 == "a" }?.sources.map(\.path) == ["/p/a.jpg"])
        #expect(try await db.duePhotos(excluding: ["a"], limit: 100).count == 5)
        let counts = try await db.photoCounts()
        #expect(counts.pending == 6 && counts.unseen == 0)
    }

    @Test func readyRowsCarryTheCatalogColumnsAndWakeTheCatalog() async throws {
        try object("a", state: "uploaded", path: "/p/a.jpg")
        try await seedAll()
        let since = db.signals.photosReady.generation
        try await db.markPhotoReady(md5: "a", columns: PhotoColumns(headMD5: "h", size: 10, format: "JPEG"), takenAt: 1_600_000_000)
        await db.signals.photosReady.wait(since: since, until: Date().addingTimeInterval(5))
        #expect(db.signals.photosReady.generation > since)
        let row = try db.pool.read { try Row.fetchOne($0, sql: "SELECT * FROM photo WHERE md5 = 'a'") }
        let state: String? = row?["state"], head: String? = row?["headMD5"], format: String? = row?["format"]
        let takenAt: Int64? = row?["takenAt"]
        #expect(state == "ready" && head == "h" && format == "JPEG")
        #expect(takenAt == 1_600_000_000)
        #expect(try await db.duePhotos(excluding: [], limit: 10).isEmpty)
    }

    @Test func postponedRowsWaitAndFailedOnesSayWhyInTheListing() async throws {
        try object("a", state: "uploaded", path: "/p/a.jpg")
        try object("b", state: "uploaded", path: "/p/b.jpg")
        try await seedAll()
        let later = Date().addingTimeInterval(600)
        try await db.postponePhoto(md5: "a", until: later, error: "S3: SlowDown", countAttempt: false)
        #expect(try await db.duePhotos(excluding: [], limit: 10).map(\.md5) == ["b"])
        #expect(await abs((try db.nextPhotoDueTime()?.timeIntervalSince1970 ?? 0) - later.timeIntervalSince1970) < 1)
        try await db.markPhotoFailed(md5: "b", columns: nil, reason: "the decoder crashed (SIGSEGV)")
        let listing = try await db.listing(failedOnly: false, limit: 10)
        #expect(listing.items.map(\.path) == ["/p/b.jpg"])
        #expect(listing.items.first?.lastError == "no preview: the decoder crashed (SIGSEGV)")
        #expect(try await db.listing(failedOnly: true, limit: 10).total == 0, "a backed-up photo is not a failed file")
        let counts = try await db.photoCounts()
        #expect(counts.failed == 1 && counts.pending == 1)
    }

    @Test func retryReadsPhotosWithoutAPreviewAgainWithTheirAttemptsReset() async throws {
        try object("a", state: "uploaded", path: "/p/a.jpg")
        try object("b", state: "uploaded", path: "/p/b.jpg")
        try await seedAll()
        try await db.postponePhoto(md5: "a", until: Date().addingTimeInterval(5), error: "the decoder crashed (SIGSEGV)", countAttempt: true)
        try await db.markPhotoFailed(md5: "a", columns: nil, reason: "the decoder crashed (SIGSEGV)")
        try await db.markPhotoReady(md5: "b", columns: PhotoColumns(headMD5: "h", size: 10, format: "JPEG"), takenAt: 1)
        let since = db.signals.photosRetried.generation
        let retried = try await db.retryFailed()
        #expect(retried.files == 0 && retried.photos == 1)
        await db.signals.photosRetried.wait(since: since, until: Date().addingTimeInterval(5))
        #expect(db.signals.photosRetried.generation > since, "the thumbnail stage is woken")
        let jobs = try await db.duePhotos(excluding: [], limit: 10)
        #expect(jobs.map(\.md5) == ["a"] && jobs.first?.attempts == 0)
        let row = try db.pool.read { try Row.fetchOne($0, sql: "SELECT state, lastError FROM photo WHERE md5 = 'a'") }
        let state: String? = row?["state"], lastError: String? = row?["lastError"]
        #expect(state == "pending" && lastError == nil)
        let counts = try await db.photoCounts()
        #expect(counts.failed == 0 && counts.ready == 1, "a ready photo stays ready")
        #expect(try await db.retryFailed().photos == 0)
    }

    @Test func uploadedObjectsWithoutARowAreCountedUnseen() async throws {
        try object("a", state: "uploaded", path: "/p/a.jpg")
        try object("b", state: "uploaded", path: "/p/b.jpg")
        #expect(try await db.photoCounts().unseen == 2)
    }
}
