import Foundation
import GRDB
import PhotolalaCore

/// Where the upload meets the stages around it: objects become `uploaded` (sent by the
/// uploader, found in the bucket by the inventory), and the stages after the upload ask
/// whether originals still wait (thumbnails) or anything is on its way (the manifest). The upload stage's own rows are `Upload.UploadRecords`.
extension QueueDatabase {
    /// Whether an object is due for upload now: thumbnails wait while originals do.
    package func hasDueObjects(now: Date = Date()) throws -> Bool {
        try pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM object WHERE state = 'pending' AND (nextAttemptAt IS NULL OR nextAttemptAt <= ?))",
                              arguments: [now.timeIntervalSince1970]) ?? false
        }
    }

    /// Whether any file still waits to be hashed or uploaded: the manifest gathers changes
    /// longer while uploads go on.
    package func hasUploadsInFlight() throws -> Bool {
        try pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM file WHERE state IN ('pending', 'queued', 'uploading'))") ?? false
        }
    }

    /// Found already in the bucket (listed, HEAD, or a 412 on `If-None-Match: *`): nothing
    /// was sent, so no ETag of ours is recorded. Returns how many files became `uploaded`
    /// with it (the metrics count them).
    @discardableResult
    package func markUploaded(md5: String, now: Date = Date()) throws -> Int {
        let files = try write { db in try Self.markUploaded(db, md5: md5, etag: nil, uploadedAt: now, now: now) }
        QueueSignals.notify(signals.uploaded)
        return files
    }

    /// In `db`'s transaction. `uploadedAt`: when it went up (now, or when S3 says it was
    /// written). Returns how many files became `uploaded` with it.
    @discardableResult
    package static func markUploaded(_ db: Database, md5: String, etag: String?, uploadedAt: Date, now: Date) throws -> Int {
        let t = now.timeIntervalSince1970
        try db.execute(sql: """
            UPDATE object SET state = 'uploaded', uploadId = NULL, lastError = NULL, nextAttemptAt = NULL, etag = ?,
              uploadedAt = ?, overwrite = 0, updatedAt = ? WHERE md5 = ?
            """, arguments: [etag, uploadedAt.timeIntervalSince1970, t, md5])
        try db.execute(sql: "DELETE FROM part WHERE md5 = ?", arguments: [md5])
        try db.execute(sql: "UPDATE file SET state = 'uploaded', lastError = NULL, updatedAt = ? WHERE md5 = ? AND state IN ('queued', 'uploading', 'failed')", arguments: [t, md5])
        return db.changesCount
    }
}
