import Foundation
import GRDB
import Queue

/// The catalog stage's rows: whether each photo's row is in the user's catalog
/// (`photo.catalog`, migration "v5-catalog") and, in the `setting` table, what it last saw
/// of the catalog. The merge reads the photo table from its own scratch database
/// (`ATTACH`), so a million rows never pass through memory; what it found comes back here,
/// a few thousand rows a transaction.
extension QueueDatabase {
    /// Photos ready for the apps whose rows are not in the catalog yet.
    package func catalogPending() async throws -> Int {
        try await read { db in
            // The partial index holds only these rows; the planner would rather walk every
            // ready photo through the catalog-order index (a million at every wake). It
            // answers only when it sees the index's own constant, so the state is not bound.
            try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM photo INDEXED BY photo_unlisted WHERE state = \(PhotoState.ready.sqlLiteral) AND catalog IS NULL")) ?? 0
        }
    }

    /// Nothing left to read, upload or preview: the moment to publish without waiting for
    /// `catalog.publish_interval`.
    package func catalogQueueDrained() async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db.cachedStatement(sql: """
                SELECT NOT EXISTS (SELECT 1 FROM file WHERE state IN (?, ?, ?))
                   AND NOT EXISTS (SELECT 1 FROM photo WHERE state = ?)
                """), arguments: [FileState.pending, FileState.queued, FileState.uploading, PhotoState.pending]) ?? false
        }
    }

    /// After the catalog was published or read, the catalog stage marks what it learnt a
    /// few thousand photos at a time: `listed` (their rows are in it), `withdrawn` (an app
    /// removed the row together with the photo: an unstar, not ours to put back) or
    /// `rejected` (columns the apps cannot read). Small transactions: the first publish
    /// after a big backup marks half a million rows, and one transaction would hold the
    /// queue's only writer for seconds, with every stage (and the status that asks them)
    /// waiting behind it. Each mark is a fact about the published catalog, so a crash
    /// between two only leaves the rest for the next sync.
    package func markCatalog(_ md5s: [String], as value: String) async throws {
        try await write { db in
            let update = try db.makeStatement(sql: "UPDATE photo SET catalog = ? WHERE md5 = ? AND catalog IS NOT ?")
            for md5 in md5s { try update.execute(arguments: [value, md5, value]) }
        }
    }

    /// Signed in as another user: nothing of ours is in their catalog yet.
    package func forgetCatalog(settings: [String: String?]) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE photo SET catalog = NULL WHERE catalog IS NOT NULL")
            try Self.store(settings, in: db)
        }
    }
}
