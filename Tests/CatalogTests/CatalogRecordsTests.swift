import Catalog
import Foundation
import GRDB
import Queue
import Testing

/// The catalog stage's bookkeeping in the queue: what waits for a publish, when the queue
/// has drained, and what a sync records.
@Suite struct CatalogRecordsTests {
    let dir: URL
    let db: QueueDatabase

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-catalog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        db = try QueueDatabase.open(path: dir.appendingPathComponent("queue.db").path)
    }

    func photo(_ md5: String, _ state: String, catalog: String? = nil) throws {
        try db.pool.write { d in
            try d.execute(sql: "INSERT INTO object(md5, size, state, updatedAt) VALUES (?, 10, 'uploaded', 1)", arguments: [md5])
            try d.execute(sql: "INSERT INTO photo(md5, state, catalog, updatedAt) VALUES (?, ?, ?, 1)", arguments: [md5, state, catalog])
        }
    }

    func catalog(_ md5: String) throws -> String? {
        try db.pool.read { try String.fetchOne($0, sql: "SELECT catalog FROM photo WHERE md5 = ?", arguments: [md5]) }
    }

    @Test func onlyReadyPhotosWithoutARowWait() async throws {
        try photo("a", "ready")
        try photo("b", "ready", catalog: "listed")
        try photo("c", "ready", catalog: "withdrawn")
        try photo("d", "pending")
        try photo("e", "skipped")
        try photo("f", "failed")
        #expect(try await db.catalogPending() == 1)
    }

    @Test func drainedMeansNothingToReadUploadOrPreview() async throws {
        #expect(try await db.catalogQueueDrained())
        try photo("a", "pending")
        #expect(try await !db.catalogQueueDrained(), "a thumbnail to make")
        try await db.pool.write { try $0.execute(sql: "UPDATE photo SET state = 'ready'") }
        #expect(try await db.catalogQueueDrained())
        try await db.pool.write { d in
            try d.execute(sql: "INSERT INTO file(path, dir, size, state, updatedAt) VALUES ('/p/x.jpg', '/p', 5, 'queued', 1)")
        }
        #expect(try await !db.catalogQueueDrained(), "a file to upload")
    }

    @Test func marksAndSettingsRecordWhatASyncLearnt() async throws {
        for md5 in ["p", "a", "w", "r", "other"] { try photo(md5, "ready") }
        try photo("l", "ready", catalog: "listed")
        try await db.markCatalog(["p", "a", "l"], as: "listed")
        try await db.markCatalog(["w"], as: "withdrawn")
        try await db.markCatalog(["r"], as: "rejected")
        try await db.setSettings(["catalog.pointerETag": "e1", "catalog.openUpload": nil])
        #expect(try catalog("p") == "listed" && catalog("a") == "listed" && catalog("l") == "listed")
        #expect(try catalog("w") == "withdrawn" && catalog("r") == "rejected" && catalog("other") == nil)
        #expect(try await db.settings(prefix: "catalog.") == ["catalog.pointerETag": "e1"])
        #expect(try await db.catalogPending() == 1)

        try await db.forgetCatalog(settings: ["catalog.pointerETag": nil, "catalog.userId": "NEW"])
        #expect(try await db.catalogPending() == 6, "another user's catalog holds none of them")
        #expect(try await db.settings(prefix: "catalog.") == ["catalog.userId": "NEW"])
    }
}
