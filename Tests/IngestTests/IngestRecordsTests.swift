import Foundation
import GRDB
import PhotolalaCore
import Testing
import Ingest
import Queue

@Suite struct IngestRecordsTests {
    let dir: URL
    let db: QueueDatabase

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        db = try QueueDatabase.open(path: dir.appendingPathComponent("queue.db").path)
    }

    func id(_ inode: UInt64, size: Int64 = 100, mtime: Int64 = 1) -> FileIdentity {
        FileIdentity(device: 1, inode: inode, size: size, mtimeSec: mtime, mtimeNsec: 5)
    }

    @Test func newFilesNeedHashOnceAndUnchangedCostNothing() async throws {
        let files = [ObservedFile(path: "/p/a.jpg", identity: id(1)), ObservedFile(path: "/p/b.jpg", identity: id(2))]
        #expect(try await db.observe(files) == ["/p/a.jpg", "/p/b.jpg"])
        #expect(try await db.recordHash(path: "/p/a.jpg", identity: id(1), md5: "aa") == .recorded(.queued))
        // Seen again unchanged: a.jpg is done, b.jpg still waits for its hash.
        #expect(try await db.observe(files) == ["/p/b.jpg"])
        let c = try await db.counts()
        #expect(c.pending == 2 && c.pendingBytes == 200)
    }

    @Test func theBacklogIsReadInIdOrderAChunkAtATime() async throws {
        #expect(try await db.unhashedStart() == nil)
        let files = (0..<7).map { ObservedFile(path: "/p/f\($0).jpg", identity: id(UInt64($0 + 1))) }
        _ = try await db.reconcileDirectories([DirectoryListing(dir: "/p", files: files)], firstScan: true)
        // Hashed or gone files are not waiting any more.
        _ = try await db.recordHash(path: "/p/f0.jpg", identity: id(1), md5: "aa")
        try await db.markGone(path: "/p/f3.jpg")
        let start = try #require(try await db.unhashedStart())
        var cursor = start
        var seen: [String] = []
        while true {
            let chunk = try await db.unhashedFiles(after: cursor, limit: 2)
            guard let last = chunk.last else { break }
            #expect(chunk.count <= 2)
            seen += chunk.map(\.path)
            cursor = last.id
        }
        #expect(seen == ["/p/f1.jpg", "/p/f2.jpg", "/p/f4.jpg", "/p/f5.jpg", "/p/f6.jpg"])
        // The mtime comes along: it says whether a file may still be being written.
        let first = try #require(try await db.unhashedFiles(after: start, limit: 1).first)
        #expect(first.mtimeSec == 1 && first.mtimeNsec == 5)
        // A file changed behind the cursor waits again: the start moves back to it.
        _ = try await db.recordHash(path: "/p/f1.jpg", identity: id(2), md5: "bb")
        #expect(try await db.unhashedStart().map { $0 + 1 } == first.id + 1)
        try await db.observe([ObservedFile(path: "/p/f0.jpg", identity: id(1, size: 300, mtime: 9))])
        let again = try #require(try await db.unhashedStart())
        #expect(try await db.unhashedFiles(after: again, limit: 1).map(\.path) == ["/p/f0.jpg"])
    }

    @Test func parentFolderIsStoredByTheBytes() async throws {
        // A name that starts with a combining mark: as Characters, "/" and U+0301 are one
        // grapheme, and the folder came out as "/" instead of "/p".
        let path = "/p/\u{301}x.jpg"
        try await db.observe([ObservedFile(path: path, identity: id(1))])
        let dir = try await db.pool.read { try String.fetchOne($0, sql: "SELECT dir FROM file") }
        #expect(dir.map { Array($0.utf8) } == Array("/p".utf8))
        // And the folder's listing finds it unchanged.
        #expect(try await db.reconcileDirectory("/p", files: [ObservedFile(path: path, identity: id(1))]) == [path])
        #expect(try await db.reconcileDirectory("/", files: []) == [])
        #expect(try await db.counts().pending == 1)
    }

    @Test func sameBytesInTwoPathsShareOneObject() async throws {
        try await db.observe([ObservedFile(path: "/p/a.jpg", identity: id(1)), ObservedFile(path: "/p/copy.jpg", identity: id(2))])
        _ = try await db.recordHash(path: "/p/a.jpg", identity: id(1), md5: "same")
        _ = try await db.recordHash(path: "/p/copy.jpg", identity: id(2), md5: "same")
        let objects = try await db.pool.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM object") }
        #expect(objects == 1)
    }

    @Test func changedFileDropsItsHash() async throws {
        try await db.observe([ObservedFile(path: "/p/a.jpg", identity: id(1))])
        _ = try await db.recordHash(path: "/p/a.jpg", identity: id(1), md5: "old")
        #expect(try await db.observe([ObservedFile(path: "/p/a.jpg", identity: id(1, size: 200, mtime: 2))]) == ["/p/a.jpg"])
        // A hash of the old content arriving late is refused.
        #expect(try await db.recordHash(path: "/p/a.jpg", identity: id(1), md5: "old") == .stale)
        #expect(try await db.recordHash(path: "/p/a.jpg", identity: id(1, size: 200, mtime: 2), md5: "new") == .recorded(.queued))
    }

    @Test func renamedDirectoryKeepsHashes() async throws {
        try await db.observe([ObservedFile(path: "/p/trip/a.jpg", identity: id(1)), ObservedFile(path: "/p/trip/sub/b.jpg", identity: id(2)),
                        ObservedFile(path: "/p/trip2/c.jpg", identity: id(3))])
        _ = try await db.recordHash(path: "/p/trip/a.jpg", identity: id(1), md5: "a")
        _ = try await db.recordHash(path: "/p/trip/sub/b.jpg", identity: id(2), md5: "b")
        try await db.renameDirectory(from: "/p/trip", to: "/p/Trip 2026")
        let rows = try db.pool.read { try Row.fetchAll($0, sql: "SELECT path, dir, md5 FROM file ORDER BY path") }
        #expect(rows.map { $0["path"] as String } == ["/p/Trip 2026/a.jpg", "/p/Trip 2026/sub/b.jpg", "/p/trip2/c.jpg"])
        #expect(rows.map { $0["dir"] as String } == ["/p/Trip 2026", "/p/Trip 2026/sub", "/p/trip2"])
        #expect(rows.map { $0["md5"] as String? } == ["a", "b", nil])
        // Seen at the new paths by a scan: nothing to re-hash.
        #expect(try await db.observe([ObservedFile(path: "/p/Trip 2026/a.jpg", identity: id(1))]) == [])
    }

    @Test func movedFileIsRecognisedByItsInode() async throws {
        try await db.observe([ObservedFile(path: "/p/a.jpg", identity: id(7))])
        _ = try await db.recordHash(path: "/p/a.jpg", identity: id(7), md5: "seven")
        try await db.markGone(path: "/p/a.jpg")
        #expect(try await db.observe([ObservedFile(path: "/p/elsewhere/a.jpg", identity: id(7))]) == [])
        let md5 = try await db.pool.read { try String.fetchOne($0, sql: "SELECT md5 FROM file WHERE path = '/p/elsewhere/a.jpg'") }
        #expect(md5 == "seven")
    }

    @Test func goneFilesLeaveTheCounts() async throws {
        try await db.observe([ObservedFile(path: "/p/d/a.jpg", identity: id(1)), ObservedFile(path: "/p/d/e/b.jpg", identity: id(2)),
                        ObservedFile(path: "/p/d2.jpg", identity: id(3))])
        try await db.markGone(path: "/p/d")
        let c = try await db.counts()
        #expect(c.pending == 1)
        #expect(try await db.recordHash(path: "/p/d/a.jpg", identity: id(1), md5: "x") == .unknown)
    }

    @Test func reconcileMarksVanishedAndFindsNew() async throws {
        try await db.observe([ObservedFile(path: "/p/a.jpg", identity: id(1)), ObservedFile(path: "/p/b.jpg", identity: id(2))])
        _ = try await db.recordHash(path: "/p/a.jpg", identity: id(1), md5: "a")
        _ = try await db.recordHash(path: "/p/b.jpg", identity: id(2), md5: "b")
        let need = try await db.reconcileDirectory("/p", files: [ObservedFile(path: "/p/a.jpg", identity: id(1)), ObservedFile(path: "/p/c.jpg", identity: id(3))])
        #expect(need == ["/p/c.jpg"])
        let states = try db.pool.read { try Row.fetchAll($0, sql: "SELECT path, state FROM file ORDER BY path") }.map { "\($0["path"] as String)=\($0["state"] as String)" }
        #expect(states == ["/p/a.jpg=queued", "/p/b.jpg=gone", "/p/c.jpg=pending"])
    }

    @Test func reconcileOfABatchRecordsEachDirectoryAndAdoptsMovedHashes() async throws {
        try await db.observe([ObservedFile(path: "/p/a/old.jpg", identity: id(1)), ObservedFile(path: "/p/b/moved.jpg", identity: id(2))])
        _ = try await db.recordHash(path: "/p/b/moved.jpg", identity: id(2), md5: "two")
        // /p/a lost old.jpg and gained new.jpg; moved.jpg went from /p/b to /p/c while
        // nobody watched: its new path takes the hash instead of being read again.
        let need = try await db.reconcileDirectories([
            DirectoryListing(dir: "/p/a", files: [ObservedFile(path: "/p/a/new.jpg", identity: id(3))]),
            DirectoryListing(dir: "/p/b", files: []),
            DirectoryListing(dir: "/p/c", files: [ObservedFile(path: "/p/c/moved.jpg", identity: id(2))]),
        ]).map(\.path)
        #expect(need == ["/p/a/new.jpg"])
        let states = try db.pool.read { try Row.fetchAll($0, sql: "SELECT path, state, md5 FROM file ORDER BY path") }
            .map { "\($0["path"] as String)=\($0["state"] as String)/\(($0["md5"] as String?) ?? "-")" }
        #expect(states == ["/p/a/new.jpg=pending/-", "/p/a/old.jpg=gone/-", "/p/b/moved.jpg=gone/two", "/p/c/moved.jpg=queued/two"])
        // Listed again unchanged: nothing to hash but what still waits, and no row touched.
        let stamps = "SELECT group_concat(path || '@' || updatedAt) FROM (SELECT * FROM file ORDER BY path)"
        let before = try await db.pool.read { try String.fetchOne($0, sql: stamps) }
        #expect(try await db.reconcileDirectories([DirectoryListing(dir: "/p/a", files: [ObservedFile(path: "/p/a/new.jpg", identity: id(3))])]).map(\.path) == ["/p/a/new.jpg"])
        #expect(try await db.pool.read { try String.fetchOne($0, sql: stamps) } == before)
    }

    @Test func recordHashesAnswersEachFileInOrder() async throws {
        try await db.observe([ObservedFile(path: "/p/a.jpg", identity: id(1)), ObservedFile(path: "/p/b.jpg", identity: id(2))])
        let outcomes = try await db.recordHashes([
            HashedFile(path: "/p/a.jpg", identity: id(1), md5: "same"),
            HashedFile(path: "/p/b.jpg", identity: id(2, size: 999), md5: "old read"),
            HashedFile(path: "/p/nowhere.jpg", identity: id(3), md5: "x"),
            HashedFile(path: "/p/b.jpg", identity: id(2), md5: "same"),
        ])
        #expect(outcomes == [.recorded(.queued), .stale, .unknown, .recorded(.queued)])
        #expect(try await db.pool.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM object") } == 1)
        #expect(try await db.recordHashes([]) == [])
    }

    @Test func onlyHashedRowsAreIndexedByMd5AndInodeAndTheLookupsUseThem() async throws {
        try await db.observe((0..<50).map { ObservedFile(path: "/p/\($0).jpg", identity: id(UInt64($0))) })
        _ = try await db.recordHash(path: "/p/7.jpg", identity: id(7), md5: "seven")
        try await db.pool.read { db in
            for index in ["file_md5", "file_inode"] {
                let sql = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = ?", arguments: [index]) ?? ""
                #expect(sql.hasSuffix("WHERE md5 IS NOT NULL"), "\(sql)")
            }
            func plan(_ sql: String) throws -> String {
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String }.joined(separator: "; ")
            }
            #expect(try plan("SELECT path FROM file WHERE md5 = 'seven' AND state IN ('queued', 'uploading', 'failed') ORDER BY updatedAt DESC LIMIT 1").contains("file_md5"))
            #expect(try plan("UPDATE file SET state = 'uploaded' WHERE md5 = 'seven' AND state = 'queued'").contains("file_md5"))
            #expect(try plan("""
                SELECT md5 FROM file WHERE inode = 7 AND device = 1 AND size = 100 AND mtimeSec = 1 AND mtimeNsec = 5
                  AND md5 IS NOT NULL AND id != 0 LIMIT 1
                """).contains("file_inode"))
        }
    }

    @Test func knowsFilesUnderAFolderUntilTheyAreGone() async throws {
        #expect(try await !db.knowsFiles(under: "/p"))
        try await db.observe([ObservedFile(path: "/p/d/a.jpg", identity: id(1))])
        let (p, pd) = (try await db.knowsFiles(under: "/p"), try await db.knowsFiles(under: "/p/d"))
        #expect(p && pd)
        let (pde, pp) = (try await db.knowsFiles(under: "/p/d/e"), try await db.knowsFiles(under: "/pp"))
        #expect(!pde && !pp)
        try await db.markGone(path: "/p/d")
        #expect(try await !db.knowsFiles(under: "/p"))
    }

    @Test func sweepRemovesDirectoriesNotVisited() async throws {
        try await db.observe([ObservedFile(path: "/p/keep/a.jpg", identity: id(1)), ObservedFile(path: "/p/lost/b.jpg", identity: id(2))])
        #expect(try await db.sweepDirectories(under: "/p", visited: ["/p", "/p/keep"]) == 1)
        #expect(try await db.counts().pending == 1)
    }

    @Test func unreadableFilesFailWithReasonAndRetryPutsThemBack() async throws {
        try await db.observe([ObservedFile(path: "/p/secret.jpg", identity: id(1))])
        try await db.recordUnreadable(path: "/p/secret.jpg", reason: "permission denied")
        var listing = try await db.listing(failedOnly: true, limit: 10)
        #expect(listing.total == 1 && listing.items.first?.lastError == "permission denied" && listing.items.first?.state == .failed)
        let retried = try await db.retryFailed()
        #expect(retried.files == 1 && retried.needHash == ["/p/secret.jpg"])
        listing = try await db.listing(failedOnly: true, limit: 10)
        #expect(listing.total == 0)
    }

    @Test func countsComeFromAnIndexWithAMillionRows() async throws {
        // A million rows in one statement (observe() row by row would take minutes in a debug build).
        try await db.pool.write { db in
            try db.execute(sql: """
                WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999999)
                INSERT INTO file(path, dir, inode, size, state, updatedAt)
                SELECT '/p/d' || (i % 1000) || '/f' || i || '.jpg', '/p/d' || (i % 1000), i, 1000,
                       CASE WHEN i % 10 = 0 THEN 'queued' ELSE 'uploaded' END, 0 FROM n
                """)
        }
        let c = try await db.counts()
        #expect(c.pending == 100_000 && c.uploaded == 900_000)
        #expect(c.uploadedBytes == 900_000_000)
        // Fast by construction, not by a stopwatch (docs/benchmarks.md has the timings): the
        // counts are read from an index holding state and size, never from the table's rows.
        let plan = try await db.pool.read { d in
            try Row.fetchAll(d, sql: "EXPLAIN QUERY PLAN SELECT state, count(*), sum(size) FROM file GROUP BY state")
                .map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("USING COVERING INDEX") }, "\(plan)")
    }

    @Test func integrityAndQuarantineOfADamagedFile() async throws {
        #expect(try await db.integrityCheck() == "ok")
        let bad = dir.appendingPathComponent("bad.db")
        try Data(repeating: 0x42, count: 8192).write(to: bad)
        var moved: String?
        let fresh = try QueueDatabase.open(path: bad.path) { aside, _ in moved = aside }
        #expect(moved != nil)
        #expect(FileManager.default.fileExists(atPath: moved ?? ""))
        #expect(try await fresh.integrityCheck() == "ok")
    }
}
