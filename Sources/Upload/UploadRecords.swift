import Bucket
import Foundation
import GRDB
import PhotolalaCore
import Queue

/// One object to upload: its content address and a live file that holds those bytes.
package struct UploadJob: Sendable, Equatable {
    package var md5: String
    package var size: Int64
    package var path: String
    package var identity: FileIdentity
    package var attempts: Int
    /// A multipart upload begun earlier (resumed, not restarted).
    package var uploadId: String?
    package var partSize: Int64?
    /// The object in the bucket is known to be wrong (`verify`): send it again without
    /// asking whether it is there and without `If-None-Match`.
    package var overwrite = false
}

/// The upload stage's rows: `object` from `pending` to `uploading` and on, its files with
/// it, and the `part` table of multipart uploads. Claiming is one select-and-update
/// transaction, so two workers never take the same object.
extension QueueDatabase {
    /// At start: uploads a crash interrupted go back to the queue (their multipart state stays).
    package func resetInterruptedUploads(now: Date) throws {
        try write { db in
            try db.execute(sql: "UPDATE object SET state = 'pending', updatedAt = ? WHERE state = 'uploading'", arguments: [now.timeIntervalSince1970])
            try db.execute(sql: "UPDATE file SET state = 'queued', updatedAt = ? WHERE state = 'uploading'", arguments: [now.timeIntervalSince1970])
            // A crash mid-hash leaves nothing to undo: files being read are stored as pending, and re-hashed.
        }
    }

    package func claimObject(now: Date) throws -> UploadJob? {
        try write { db in
            let t = now.timeIntervalSince1970
            let candidates = try Row.fetchAll(db, sql: """
                SELECT md5, size, attempts, uploadId, partSize, overwrite FROM object
                WHERE state = 'pending' AND (nextAttemptAt IS NULL OR nextAttemptAt <= ?)
                ORDER BY nextAttemptAt IS NOT NULL, updatedAt LIMIT 16
                """, arguments: [t])
            for o in candidates {
                let md5: String = o["md5"]
                // Any live file with these bytes will do; the one seen most recently first.
                guard let f = try Row.fetchOne(db, sql: """
                    SELECT path, device, inode, size, mtimeSec, mtimeNsec FROM file
                    WHERE md5 = ? AND state IN ('queued', 'uploading', 'failed') ORDER BY updatedAt DESC LIMIT 1
                    """, arguments: [md5]) else {
                    // No file holds these bytes any more: nothing to upload from.
                    try db.execute(sql: "UPDATE object SET nextAttemptAt = ?, updatedAt = ? WHERE md5 = ?", arguments: [t + 3600, t, md5])
                    continue
                }
                try db.execute(sql: "UPDATE object SET state = 'uploading', updatedAt = ? WHERE md5 = ?", arguments: [t, md5])
                try db.execute(sql: "UPDATE file SET state = 'uploading', updatedAt = ? WHERE md5 = ? AND state = 'queued'", arguments: [t, md5])
                return UploadJob(md5: md5, size: o["size"], path: f["path"],
                                 identity: FileIdentity(device: UInt64(bitPattern: f["device"]), inode: UInt64(bitPattern: f["inode"]),
                                                        size: f["size"], mtimeSec: f["mtimeSec"], mtimeNsec: f["mtimeNsec"]),
                                 attempts: o["attempts"], uploadId: o["uploadId"], partSize: o["partSize"],
                                 overwrite: o["overwrite"])
            }
            return nil
        }
    }

    /// The earliest moment a waiting object becomes due (nil: none waits on a timer).
    package func nextDueTime(now: Date) throws -> Date? {
        try read { db in
            try Double.fetchOne(db, sql: "SELECT min(nextAttemptAt) FROM object WHERE state = 'pending' AND nextAttemptAt > ?",
                                arguments: [now.timeIntervalSince1970]).map { Date(timeIntervalSince1970: $0) }
        }
    }

    /// Sent: the object is `uploaded` with the ETag S3 lists for what was sent, and the
    /// inventory learns the key at once (so `files`, the thumbnail stage and the next
    /// upload of the same bytes need not wait for a listing), in one transaction.
    /// Returns how many files became `uploaded` with it.
    @discardableResult
    package func recordUpload(md5: String, key: String, size: Int64, etag: String, storageClass: String, now: Date) throws -> Int {
        let files = try write { db in
            let files = try Self.markUploaded(db, md5: md5, etag: etag, uploadedAt: now, now: now)
            try Self.recordStored(db, key: key, size: size, etag: etag, storageClass: storageClass, now: now)
            return files
        }
        QueueSignals.notify(signals.uploaded)
        return files
    }

    /// Back to the queue after a transient failure (or a stop): due again at `retryAt`.
    package func releaseObject(md5: String, retryAt: Date?, error: String?, countAttempt: Bool, now: Date) throws {
        try write { db in
            let t = now.timeIntervalSince1970
            try db.execute(sql: """
                UPDATE object SET state = 'pending', nextAttemptAt = ?, lastError = coalesce(?, lastError),
                  attempts = attempts + ?, updatedAt = ? WHERE md5 = ? AND state = 'uploading'
                """, arguments: [retryAt?.timeIntervalSince1970, error, countAttempt ? 1 : 0, t, md5])
            try db.execute(sql: "UPDATE file SET state = 'queued', updatedAt = ? WHERE md5 = ? AND state = 'uploading'", arguments: [t, md5])
        }
    }

    /// Gave up (rejected by S3): every file with these bytes is `failed` with the reason, until `retry`.
    package func failObject(md5: String, reason: String, now: Date) throws {
        try write { db in
            let t = now.timeIntervalSince1970
            try db.execute(sql: "UPDATE object SET state = 'failed', lastError = ?, attempts = attempts + 1, uploadId = NULL, updatedAt = ? WHERE md5 = ?", arguments: [reason, t, md5])
            try db.execute(sql: "DELETE FROM part WHERE md5 = ?", arguments: [md5])
            try db.execute(sql: "UPDATE file SET state = 'failed', lastError = ?, updatedAt = ? WHERE md5 = ? AND state IN ('queued', 'uploading')", arguments: [reason, t, md5])
        }
    }

    /// The file no longer holds the queued bytes (changed or gone): it goes back to be hashed
    /// (or is marked gone), and its object is released to any other file with those bytes.
    package func sourceChanged(job: UploadJob, gone: Bool, now: Date) throws {
        try write { db in
            let t = now.timeIntervalSince1970
            if gone {
                try db.execute(sql: "UPDATE file SET state = 'gone', updatedAt = ? WHERE path = ?", arguments: [t, job.path])
            } else {
                // Only if the row still says these bytes: events may have had the new
                // content hashed already while this upload ran, and wiping that hash left its
                // object with no file for a moment, long enough to be put off for an hour.
                try db.execute(sql: "UPDATE file SET state = 'pending', md5 = NULL, updatedAt = ? WHERE path = ? AND md5 = ?",
                               arguments: [t, job.path, job.md5])
            }
            try db.execute(sql: "UPDATE object SET state = 'pending', updatedAt = ? WHERE md5 = ? AND state = 'uploading'", arguments: [t, job.md5])
            try db.execute(sql: "UPDATE file SET state = 'queued', updatedAt = ? WHERE md5 = ? AND state = 'uploading'", arguments: [t, job.md5])
        }
        // A changed file is read again (after it settles) by ingest; its old object may
        // still be wanted by another file with those bytes.
        if !gone { QueueSignals.notify(signals.needsHash) }
        QueueSignals.notify(signals.readyToUpload)
    }

    // MARK: multipart bookkeeping

    package func recordMultipart(md5: String, uploadId: String?, partSize: Int64?) throws {
        try write { db in
            try db.execute(sql: "UPDATE object SET uploadId = ?, partSize = ? WHERE md5 = ?", arguments: [uploadId, partSize, md5])
            if uploadId == nil { try db.execute(sql: "DELETE FROM part WHERE md5 = ?", arguments: [md5]) }
        }
    }

    /// A part S3 already has, recorded so a restart resumes instead of resending.
    package func recordPart(md5: String, part: S3Client.Part) throws {
        try write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO part(md5, partNumber, etag, size) VALUES (?, ?, ?, ?)",
                           arguments: [md5, part.partNumber, part.etag, part.size])
        }
    }

    package func parts(md5: String) throws -> [S3Client.Part] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT partNumber, etag, size FROM part WHERE md5 = ? ORDER BY partNumber", arguments: [md5]).map {
                S3Client.Part(partNumber: $0["partNumber"], etag: $0["etag"], size: $0["size"])
            }
        }
    }
}
