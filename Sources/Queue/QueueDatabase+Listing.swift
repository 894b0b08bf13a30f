import Foundation
import GRDB
import PhotolalaCore

/// One row of `photolalactl queue`.
package struct QueueItem: Sendable, Equatable {
    package var path: String
    package var state: FileState
    package var size: Int64
    package var md5: String?
    package var attempts: Int
    package var lastError: String?
    package var updatedAt: Date
}

/// What the CLI lists and retries.
extension QueueDatabase {
    /// Files not yet backed up (or only failed ones), newest first, with the total count.
    package func listing(failedOnly: Bool, limit: Int) throws -> (items: [QueueItem], total: Int) {
        try pool.read { db in
            // Backed-up files whose photo could not be read for a preview are listed too,
            // with "no preview: why" (they are not failed: the backup is fine).
            let filter = failedOnly ? "f.state = 'failed'" : """
                (f.state IN ('pending', 'queued', 'uploading', 'failed')
                 OR (f.state = 'uploaded' AND f.md5 IN (SELECT md5 FROM photo WHERE state = 'failed')))
                """
            let total = try Int.fetchOne(db, sql: "SELECT count(*) FROM file f WHERE \(filter)") ?? 0
            let rows = try Row.fetchAll(db, sql: """
                SELECT f.path, f.state, f.size, f.md5, f.updatedAt,
                       max(f.attempts, coalesce(o.attempts, 0)) AS attempts,
                       coalesce(f.lastError, o.lastError,
                                (SELECT 'no preview: ' || p.lastError FROM photo p WHERE p.md5 = f.md5 AND p.state = 'failed')) AS lastError
                FROM file f LEFT JOIN object o ON o.md5 = f.md5
                WHERE \(filter) ORDER BY f.updatedAt DESC, f.id DESC LIMIT ?
                """, arguments: [limit])
            let items = rows.map { row in
                QueueItem(path: row["path"], state: FileState(rawValue: row["state"]) ?? .pending, size: row["size"],
                          md5: row["md5"], attempts: row["attempts"], lastError: row["lastError"],
                          updatedAt: Date(timeIntervalSince1970: row["updatedAt"]))
            }
            return (items, total)
        }
    }

    /// Puts every failed file back: unreadable ones are read again, rejected uploads are
    /// tried again, and photos without a preview are read again (their attempts start over:
    /// a decoder or library fixed since may read them now). Returns the paths to hash.
    package func retryFailed(now: Date = Date()) throws -> (files: Int, photos: Int, needHash: [String]) {
        let result: (files: Int, photos: Int, needHash: [String]) = try write { db in
            let t = now.timeIntervalSince1970
            try db.execute(sql: "UPDATE object SET state = 'pending', attempts = 0, nextAttemptAt = NULL, lastError = NULL, updatedAt = ? WHERE state = 'failed'", arguments: [t])
            let needHash = try String.fetchAll(db, sql: "SELECT path FROM file WHERE state = 'failed' AND md5 IS NULL")
            try db.execute(sql: "UPDATE file SET state = 'pending', attempts = 0, lastError = NULL, updatedAt = ? WHERE state = 'failed' AND md5 IS NULL", arguments: [t])
            let unhashed = db.changesCount
            try db.execute(sql: "UPDATE file SET state = 'queued', attempts = 0, lastError = NULL, updatedAt = ? WHERE state = 'failed' AND md5 IS NOT NULL", arguments: [t])
            let files = unhashed + db.changesCount
            try db.execute(sql: "UPDATE photo SET state = 'pending', attempts = 0, nextAttemptAt = NULL, lastError = NULL, updatedAt = ? WHERE state = 'failed'", arguments: [t])
            return (files, db.changesCount, needHash)
        }
        if !result.needHash.isEmpty { QueueSignals.notify(signals.needsHash) }
        QueueSignals.notify(signals.readyToUpload)
        if result.photos > 0 { QueueSignals.notify(signals.photosRetried) }
        return result
    }
}
