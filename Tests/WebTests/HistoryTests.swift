import Foundation
import GRDB
import Testing
import Queue
import Web

/// `/api/history` (web.md): per month, photos here, in the cloud, only in the cloud, only
/// here — from the files, the objects, the inventory and the catalog dates.
@Suite struct HistoryTests {
    let db: QueueDatabase
    let dir: String

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("web-history-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        db = try QueueDatabase.open(path: dir + "/queue.db")
    }

    static func md5(_ n: Int) -> String { String(format: "%032x", n) }
    /// 2026-01-15, 2026-02-15, 2026-03-15 (UTC).
    static let jan = 1_768_435_200, feb = 1_771_113_600, mar = 1_773_532_800

    func file(_ n: Int, path: String, mtime: Int, state: String = "uploaded") async throws {
        try await db.write { db in
            try db.execute(sql: "INSERT INTO file(path, dir, size, mtimeSec, md5, state, updatedAt) VALUES (?, '/p', 10, ?, ?, ?, 0)",
                           arguments: [path, mtime, Self.md5(n), state])
        }
    }

    func object(_ n: Int, state: String, uploadedAt: Int?) async throws {
        try await db.write { db in
            try db.execute(sql: "INSERT INTO object(md5, size, state, updatedAt, uploadedAt) VALUES (?, 10, ?, 0, ?)",
                           arguments: [Self.md5(n), state, uploadedAt])
        }
    }

    func listed(_ n: Int, user: String = "u1", modified: Int?) async throws {
        try await db.write { db in
            try db.execute(sql: "INSERT INTO inventory(key, size, etag, seenAt, lastModified) VALUES (?, 10, 'e', 0, ?)",
                           arguments: ["photos/\(user)/\(Self.md5(n)).dat", modified])
        }
    }

    func taken(_ n: Int, at: Int) async throws {
        try await db.write { db in
            try db.execute(sql: "INSERT INTO photo(md5, state, takenAt, updatedAt) VALUES (?, 'ready', ?, 0)", arguments: [Self.md5(n), at])
        }
    }

    @Test func monthsCountEachPhotoOnceByWhereItIs() async throws {
        // 1: here and uploaded (two files with its bytes), its catalog date in January.
        try await object(1, state: "uploaded", uploadedAt: Self.mar)
        try await file(1, path: "/p/a.jpg", mtime: Self.feb)
        try await file(1, path: "/p/copy-of-a.jpg", mtime: Self.feb)
        try await taken(1, at: Self.jan)
        // 2: here only (waiting), dated by its file in February.
        try await object(2, state: "pending", uploadedAt: nil)
        try await file(2, path: "/p/b.jpg", mtime: Self.feb, state: "queued")
        // 3: only in the cloud (a phone's), dated by S3's LastModified in March.
        try await listed(3, modified: Self.mar)
        // 4: listed and here: the listing and the file agree it is in both.
        try await listed(4, modified: Self.mar)
        try await file(4, path: "/p/d.jpg", mtime: Self.jan, state: "uploaded")
        // 5: another account's key, and 6: a deleted file — neither counts.
        try await listed(5, user: "someone-else", modified: Self.jan)
        try await file(6, path: "/p/gone.jpg", mtime: Self.jan, state: "gone")
        // 7: cloud only, no date at all: left out.
        try await listed(7, modified: nil)

        let months = try await db.history(userId: "u1")
        #expect(months == [
            HistoryMonth(month: "2026-01", here: 2, cloud: 2, onlyCloud: 0, onlyHere: 0),
            HistoryMonth(month: "2026-02", here: 1, cloud: 0, onlyCloud: 0, onlyHere: 1),
            HistoryMonth(month: "2026-03", here: 0, cloud: 1, onlyCloud: 1, onlyHere: 0),
        ])
    }

    @Test func withoutAnAccountOnlyWhatIsHereCounts() async throws {
        try await listed(3, modified: Self.mar)
        try await file(2, path: "/p/b.jpg", mtime: Self.feb, state: "queued")
        #expect(try await db.history(userId: nil) == [HistoryMonth(month: "2026-02", here: 1, cloud: 0, onlyCloud: 0, onlyHere: 1)])
    }

    @Test func foldersAndFailuresAreTallied() async throws {
        try await file(1, path: "/srv/a/1.jpg", mtime: Self.jan)
        try await file(2, path: "/srv/a/sub/2.jpg", mtime: Self.jan, state: "failed")
        try await file(3, path: "/srv/ab/3.jpg", mtime: Self.jan)
        try await db.write { try $0.execute(sql: "UPDATE file SET lastError = 'cannot read /srv/a/sub/2.jpg' WHERE md5 = ?", arguments: [Self.md5(2)]) }
        let tallies = try await db.folderTallies(["/srv/a", "/srv/ab"])
        #expect(tallies.map(\.files) == [2, 1])
        #expect(tallies[0].uploaded == 1 && tallies[0].failed == 1 && tallies[0].uploadedBytes == 10)
        #expect(try await db.failures(named: true).first?.path == "/srv/a/sub/2.jpg")
        #expect(try await db.failures(named: false) == [FailureRow(path: nil, why: "cannot read /srv/a/sub/2.jpg", count: 1)])
    }
}
