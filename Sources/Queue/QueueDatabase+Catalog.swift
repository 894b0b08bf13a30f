import Foundation
import GRDB

/// What the catalog stage keeps in the queue: whether each photo's row is in the user's
/// catalog (`photo.catalog`, migration "v5-catalog") and, in the `setting` table, what it
/// last saw of the catalog. The merge reads the photo table from its own scratch database
/// (`ATTACH`), so a million rows never pass through memory; what it found comes back here,
/// a few thousand rows a transaction.
extension QueueDatabase {
    /// Photos ready for the apps whose rows are not in the catalog yet.
    public func catalogPending() throws -> Int {
        try pool.read { db in
            // The partial index holds only these rows; the planner would rather walk every
            // ready photo through the catalog-order index (a million at every wake).
            try Int.fetchOne(db, sql: "SELECT count(*) FROM photo INDEXED BY photo_unlisted WHERE state = 'ready' AND catalog IS NULL") ?? 0
        }
    }

    /// Nothing left to read, upload or preview: the moment to publish without waiting for
    /// `catalog.publish_interval`.
    public func catalogQueueDrained() throws -> Bool {
        try pool.read { db in
            try Bool.fetchOne(db, sql: """
                SELECT NOT EXISTS (SELECT 1 FROM file WHERE state IN ('pending', 'queued', 'uploading'))
                   AND NOT EXISTS (SELECT 1 FROM photo WHERE state = 'pending')
                """) ?? false
        }
    }

    /// After the catalog was published or read: the photos in the scratch database's
    /// `present(md5)` and `added(md5)` are in it, those in `withdrawn(md5)` were removed by
    /// an app together with the photo itself (an unstar: not ours to put back), those in
    /// `rejected(md5)` cannot be; then `settings` (nil removes a key) say what was seen.
    ///
    /// In transactions of 2,048 rows, not one: the first publish after a big backup marks
    /// half a million rows, and one transaction would hold the queue's only writer for
    /// seconds, with every stage (and the status that asks them) waiting behind it. Each
    /// mark is a fact about the published catalog, so a crash half way only leaves the
    /// settings unrecorded: the next sync reads the catalog again and marks the rest.
    /// `checkpoint` runs between transactions; what it throws stops the record there.
    public func recordCatalog(scratch path: String, settings: [String: String?],
                              checkpoint: () throws -> Void = {}) throws {
        for (table, value) in [("present", "listed"), ("added", "listed"), ("withdrawn", "withdrawn"), ("rejected", "rejected")] {
            var after = ""
            while let last = try markChunk(table: table, value: value, after: after, scratch: path) {
                after = last
                try checkpoint()
            }
        }
        try write { db in try Self.store(settings, in: db) }
    }

    /// Marks the next 2,048 photos of a scratch table (in MD5 order: the queue's md5 index
    /// is walked in order) and returns the last MD5, or nil when none were left.
    private func markChunk(table: String, value: String, after: String, scratch path: String) throws -> String? {
        try pool.writeWithoutTransaction { db in
            // ATTACH cannot run inside a transaction, hence the explicit one below.
            try db.execute(sql: "ATTACH DATABASE ? AS work", arguments: [path])
            defer { try? db.execute(sql: "DETACH DATABASE work") }
            var last: String?
            try db.inTransaction {
                let md5s = try String.fetchAll(db, sql: "SELECT md5 FROM work.\(table) WHERE md5 > ? ORDER BY md5 LIMIT 2048",
                                               arguments: [after])
                let update = try db.makeStatement(sql: "UPDATE photo SET catalog = ? WHERE md5 = ? AND catalog IS NOT ?")
                for md5 in md5s { try update.execute(arguments: [value, md5, value]) }
                last = md5s.last
                return .commit
            }
            return last
        }
    }

    /// Signed in as another user: nothing of ours is in their catalog yet.
    public func forgetCatalog(settings: [String: String?]) throws {
        try write { db in
            try db.execute(sql: "UPDATE photo SET catalog = NULL WHERE catalog IS NOT NULL")
            try Self.store(settings, in: db)
        }
    }

    /// Every setting whose key starts with `prefix`.
    public func settings(prefix: String) throws -> [String: String] {
        try pool.read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT key, value FROM setting WHERE substr(key, 1, ?) = ?",
                                        arguments: [prefix.count, prefix])
            return Dictionary(rows.map { ($0["key"], $0["value"]) }, uniquingKeysWith: { a, _ in a })
        }
    }

    private static func store(_ settings: [String: String?], in db: Database) throws {
        for (key, value) in settings.sorted(by: { $0.key < $1.key }) {
            if let value {
                try db.execute(sql: "INSERT INTO setting(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                               arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM setting WHERE key = ?", arguments: [key])
            }
        }
    }
}
