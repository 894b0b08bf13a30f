import Foundation
import GRDB
import PhotolalaCore
import Testing
import Queue

/// The object state machine, edge by edge: what each move does to an object in every
/// state and to its files in every state, on a real database; and the schema refusing a
/// state no enum has.
@Suite struct TransitionsTests {
    let dir: URL
    var path: String { dir.appendingPathComponent("queue.db").path }
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-moves-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    /// One edge as the architecture describes it, written out here rather than read from
    /// `ObjectMove`: the object goes from `from` to `to`; its files in `files` go to `filesTo`.
    struct Edge: Sendable {
        var move: ObjectMove
        var from: Set<ObjectState>
        var to: ObjectState
        var files: Set<FileState>
        var filesTo: FileState
    }

    static let at = Date(timeIntervalSince1970: 1_600_000_000)
    static let every = Set(ObjectState.allCases)
    static let table: [Edge] = [
        Edge(move: .recover, from: [.uploading], to: .pending, files: [.uploading], filesTo: .queued),
        Edge(move: .claim, from: [.pending], to: .uploading, files: [.queued], filesTo: .uploading),
        Edge(move: .uploaded(etag: "e", at: at), from: every, to: .uploaded, files: [.queued, .uploading, .failed], filesTo: .uploaded),
        Edge(move: .release(retryAt: at, error: "slow", countAttempt: true), from: [.uploading], to: .pending,
             files: [.uploading], filesTo: .queued),
        Edge(move: .giveBack, from: [.uploading], to: .pending, files: [.uploading], filesTo: .queued),
        Edge(move: .fail(reason: "rejected"), from: every, to: .failed, files: [.queued, .uploading], filesTo: .failed),
        Edge(move: .lost(reason: "missing", overwrite: true), from: [.uploaded], to: .pending, files: [.uploaded], filesTo: .queued),
        Edge(move: .retry, from: [.failed], to: .pending, files: [], filesTo: .queued),
    ]

    /// An object in `state` and one file in each file state holding its bytes.
    func seed(_ db: QueueDatabase, md5: String, state: ObjectState) async throws {
        try await db.write { db in
            try db.execute(sql: "INSERT INTO object(md5, size, state, updatedAt) VALUES (?, 10, ?, 0)", arguments: [md5, state])
            for fileState in FileState.allCases {
                let path = "/p/\(md5)/\(fileState.rawValue).jpg"
                try db.execute(sql: "INSERT INTO file(path, dir, md5, state, updatedAt) VALUES (?, ?, ?, ?, 0)",
                               arguments: [path, "/p/\(md5)", md5, fileState])
            }
        }
    }

    func states(_ db: QueueDatabase, md5: String) async throws -> (ObjectState?, [String: FileState]) {
        try await db.read { db in
            let object = try String.fetchOne(db, sql: "SELECT state FROM object WHERE md5 = ?", arguments: [md5]).flatMap(ObjectState.init)
            let files = try Row.fetchAll(db, sql: "SELECT path, state FROM file WHERE md5 = ?", arguments: [md5])
            return (object, Dictionary(uniqueKeysWithValues: files.map { row in
                ((row["path"] as String).split(separator: "/").last.map(String.init) ?? "", FileState(rawValue: row["state"])!)
            }))
        }
    }

    @Test func everyMoveFollowsTheTableFromEveryState() async throws {
        let db = try QueueDatabase.open(path: path)
        for (e, edge) in Self.table.enumerated() {
            #expect(edge.move.from == edge.from, "\(edge.move)")
            #expect(edge.move.to == edge.to, "\(edge.move)")
            #expect(edge.move.filesFrom == edge.files, "\(edge.move)")
            if !edge.files.isEmpty { #expect(edge.move.filesTo == edge.filesTo, "\(edge.move)") }
            for objectState in ObjectState.allCases {
                let md5 = "\(e)-\(objectState.rawValue)"
                try await seed(db, md5: md5, state: objectState)
                let moved = try await db.write { db in try Transitions(db, now: now).moveObject(md5, edge.move) }
                let (object, files) = try await states(db, md5: md5)
                let objectMoves = edge.from.contains(objectState)
                #expect(object == (objectMoves ? edge.to : objectState), "\(edge.move) from \(objectState)")
                #expect(moved.objects == (objectMoves ? 1 : 0), "\(edge.move) from \(objectState)")
                for fileState in FileState.allCases {
                    let expected = edge.files.contains(fileState) ? edge.filesTo : fileState
                    #expect(files["\(fileState.rawValue).jpg"] == expected, "\(edge.move) from \(objectState): a file \(fileState)")
                }
                #expect(moved.files == edge.files.count, "\(edge.move) from \(objectState)")
            }
        }
    }

    /// A commit tells the state's signal itself, before the write returns: no task is
    /// started per commit, and a stage woken by it finds the rows there.
    @Test func aCommitTellsItsSignalBeforeTheWriteReturns() async throws {
        let db = try QueueDatabase.open(path: path)
        try await seed(db, md5: "m", state: .uploading)
        let (uploaded, wrote) = (db.signals.uploaded.generation, db.signals.wrote.generation)
        try await db.markUploaded(md5: "m", now: now)
        #expect(db.signals.uploaded.generation == uploaded + 1)
        #expect(db.signals.wrote.generation == wrote + 1)
    }

    @Test func aLostObjectNoFileHoldsStaysWhereItIs() async throws {
        let db = try QueueDatabase.open(path: path)
        try await db.write { db in
            try db.execute(sql: "INSERT INTO object(md5, size, state, updatedAt) VALUES ('a', 1, ?, 0)", arguments: [ObjectState.uploaded])
            try db.execute(sql: "INSERT INTO file(path, dir, md5, state, updatedAt) VALUES ('/x', '/', 'a', ?, 0)", arguments: [FileState.gone])
        }
        let moved = try await db.write { db in try Transitions(db, now: now).moveObject("a", .lost(reason: "missing", overwrite: false)) }
        #expect(moved == Transitions.Moved(objects: 0, files: 0))
        #expect(try await states(db, md5: "a").0 == .uploaded)
    }

    @Test func aFileFollowsTheObjectItJoins() async throws {
        let db = try QueueDatabase.open(path: path)
        for (n, objectState) in ObjectState.allCases.enumerated() {
            let md5 = "m\(n)"
            try await db.write { db in
                try db.execute(sql: "INSERT INTO object(md5, size, state, nextAttemptAt, updatedAt) VALUES (?, 1, ?, 99, 0)",
                               arguments: [md5, objectState])
            }
            let state = try await db.write { db in
                let moves = Transitions(db, now: now)
                let id = try #require(try moves.insertFile(path: "/f\(n)", identity: FileIdentity(device: 1, inode: UInt64(n), size: 1,
                                                                                                    mtimeSec: 0, mtimeNsec: 0)))
                return try moves.fileHashed(id: id, md5: md5, size: 1, sha256: nil, owner: nil)
            }
            #expect(state == FileState(following: objectState))
            // A waiting object a file joins is due at once.
            let due = try await db.read { db in try Double.fetchOne(db, sql: "SELECT nextAttemptAt FROM object WHERE md5 = ?", arguments: [md5]) }
            #expect((due == nil) == (objectState == .pending))
        }
        // New bytes: a new waiting object.
        let state = try await db.write { db in
            let moves = Transitions(db, now: now)
            let id = try #require(try moves.insertFile(path: "/new", identity: FileIdentity(device: 1, inode: 99, size: 7, mtimeSec: 0, mtimeNsec: 0)))
            return try moves.fileHashed(id: id, md5: "fresh", size: 7, sha256: nil, owner: nil)
        }
        #expect(state == .queued)
        #expect(try await states(db, md5: "fresh").0 == .pending)
    }

    @Test func theSchemaRefusesAStateNoEnumHas() async throws {
        let db = try QueueDatabase.open(path: path)
        try await db.write { db in
            try db.execute(sql: "INSERT INTO object(md5, size, state, updatedAt) VALUES ('a', 1, 'pending', 0)")
            try db.execute(sql: "INSERT INTO file(path, dir, md5, state, updatedAt) VALUES ('/x', '/', 'a', 'queued', 0)")
        }
        for sql in ["UPDATE file SET state = 'queud'", "UPDATE object SET state = 'upload'",
                    "INSERT INTO file(path, dir, state, updatedAt) VALUES ('/y', '/', 'done', 0)",
                    "INSERT INTO object(md5, size, state, updatedAt) VALUES ('b', 1, 'sent', 0)"] {
            let error = await #expect(throws: DatabaseError.self, "\(sql)") { try await db.write { db in try db.execute(sql: sql) } }
            #expect(error?.resultCode == .SQLITE_CONSTRAINT, "\(sql)")
            #expect(error?.extendedResultCode == .SQLITE_CONSTRAINT_CHECK, "\(sql)")
        }
        #expect(try await states(db, md5: "a").0 == .pending)
    }

    /// Every row's values, in order (rows themselves stay on the reader's queue).
    static func values(_ db: Database, _ sql: String) throws -> [[DatabaseValue]] {
        try Row.fetchAll(db, sql: sql).map { Array($0.databaseValues) }
    }

    /// The migration that adds the checks rebuilds `file` and `object`: every row (the
    /// object's rowid too), index, trigger and foreign key stays.
    @Test func theStateChecksKeepEveryRowIndexTriggerAndForeignKey() async throws {
        let pool = try DatabasePool(path: path)
        try QueueSchema.migrator.migrate(pool, upTo: "v8-inventory-modified")
        try await pool.write { db in
            for n in 0..<40 {
                let state = ObjectState.allCases[n % 4]
                try db.execute(sql: "INSERT INTO object(rowid, md5, size, state, attempts, uploadId, updatedAt, etag, overwrite) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               arguments: [1000 + n * 3, "md5-\(n)", n, state, n % 3, "up-\(n)", Double(n), "etag-\(n)", n % 2])
                try db.execute(sql: "INSERT INTO part(md5, partNumber, etag, size) VALUES (?, 1, 'p', 5)", arguments: ["md5-\(n)"])
                try db.execute(sql: "INSERT INTO photo(md5, state, updatedAt) VALUES (?, 'pending', 0)", arguments: ["md5-\(n)"])
                try db.execute(sql: """
                    INSERT INTO file(id, path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, state, attempts, lastError, updatedAt, sha256, uid, gid, mode)
                    VALUES (?, ?, '/d', 1, ?, ?, 5, 6, ?, ?, 1, 'e', ?, X'0102', 7, 8, 420)
                    """, arguments: [500 + n * 7, "/d/\(n).jpg", n, n, "md5-\(n)", FileState.allCases[n % 6], Double(n)])
            }
        }
        let schema = "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE type IN ('index', 'trigger') AND tbl_name IN ('file', 'object') ORDER BY name"
        let (indexesBefore, objectsBefore, filesBefore, changesBefore) = try await pool.read { db in
            (try Self.values(db, schema),
             try Self.values(db, "SELECT rowid, * FROM object ORDER BY rowid"),
             try Self.values(db, "SELECT * FROM file ORDER BY id"),
             try Int.fetchOne(db, sql: "SELECT count(*) FROM manifest_change"))
        }
        #expect(indexesBefore.count == 12)
        try pool.close()

        let db = try QueueDatabase.open(path: path)
        let (indexesAfter, objectsAfter, filesAfter, changesAfter, violations) = try await db.read { db in
            (try Self.values(db, schema),
             try Self.values(db, "SELECT rowid, * FROM object ORDER BY rowid"),
             try Self.values(db, "SELECT * FROM file ORDER BY id"),
             try Int.fetchOne(db, sql: "SELECT count(*) FROM manifest_change"),
             try Self.values(db, "PRAGMA foreign_key_check"))
        }
        #expect(indexesAfter == indexesBefore)
        #expect(objectsAfter == objectsBefore)
        #expect(filesAfter == filesBefore)
        #expect(changesAfter == changesBefore)
        #expect(violations.isEmpty)
        // The triggers fire on the new table, and deleting an object still takes its rows with it.
        try await db.write { db in
            try db.execute(sql: "UPDATE file SET state = ? WHERE id = 500", arguments: [FileState.uploaded])
            try db.execute(sql: "DELETE FROM object WHERE md5 = 'md5-1'")
        }
        let (changes, parts, photos) = try await db.read { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM manifest_change"),
             try Int.fetchOne(db, sql: "SELECT count(*) FROM part WHERE md5 = 'md5-1'"),
             try Int.fetchOne(db, sql: "SELECT count(*) FROM photo WHERE md5 = 'md5-1'"))
        }
        #expect(changes == (changesBefore ?? 0) + 1)
        #expect(parts == 0)
        #expect(photos == 0)
    }
}
