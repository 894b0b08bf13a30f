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

    package init(md5: String, size: Int64, path: String, identity: FileIdentity, attempts: Int,
                 uploadId: String? = nil, partSize: Int64? = nil, overwrite: Bool = false) {
        self.md5 = md5
        self.size = size
        self.path = path
        self.identity = identity
        self.attempts = attempts
        self.uploadId = uploadId
        self.partSize = partSize
        self.overwrite = overwrite
    }
}

/// The upload stage's rows: `object` from `pending` to `uploading` and on, its files with
/// it, and the `part` table of multipart uploads. Claiming is one select-and-update
/// transaction, so two workers never take the same object.
extension QueueDatabase {
    /// At start: uploads a crash interrupted go back to the queue (their multipart state stays).
    package func resetInterruptedUploads(now: Date) async throws {
        // A crash mid-hash leaves nothing to undo: files being read are stored as pending, and re-hashed.
        try await write { db in try Transitions(db, now: now).moveEveryObject(.recover) }
    }

    package func claimObject(now: Date) async throws -> UploadJob? {
        try await write { db in
            let t = now.timeIntervalSince1970
            let candidates = try Row.fetchAll(db.cachedStatement(sql: """
                SELECT md5, size, attempts, uploadId, partSize, overwrite FROM object
                WHERE state = ? AND (nextAttemptAt IS NULL OR nextAttemptAt <= ?)
                ORDER BY nextAttemptAt IS NOT NULL, updatedAt LIMIT 16
                """), arguments: [ObjectState.pending, t])
            for o in candidates {
                let md5: String = o["md5"]
                // Any live file with these bytes will do; the one seen most recently first.
                guard let f = try Row.fetchOne(db.cachedStatement(sql: """
                    SELECT path, device, inode, size, mtimeSec, mtimeNsec FROM file
                    WHERE md5 = ? AND state IN (?, ?, ?) ORDER BY updatedAt DESC LIMIT 1
                    """), arguments: [md5, FileState.queued, FileState.uploading, FileState.failed]) else {
                    // No file holds these bytes any more: nothing to upload from.
                    try db.cachedStatement(sql: "UPDATE object SET nextAttemptAt = ?, updatedAt = ? WHERE md5 = ?").execute(arguments: [t + 3600, t, md5])
                    continue
                }
                try Transitions(db, now: now).moveObject(md5, .claim)
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
    package func nextDueTime(now: Date) async throws -> Date? {
        try await read { db in
            try Double.fetchOne(db.cachedStatement(sql: "SELECT min(nextAttemptAt) FROM object WHERE state = ? AND nextAttemptAt > ?"),
                                arguments: [ObjectState.pending, now.timeIntervalSince1970]).map { Date(timeIntervalSince1970: $0) }
        }
    }

    /// Sent: the object is `uploaded` with the ETag S3 lists for what was sent, and the
    /// inventory learns the key at once (so `files`, the thumbnail stage and the next
    /// upload of the same bytes need not wait for a listing), in one transaction.
    /// Returns how many files became `uploaded` with it.
    @discardableResult
    package func recordUpload(md5: String, key: String, size: Int64, etag: String, storageClass: String, now: Date) async throws -> Int {
        let files = try await write { db in
            let files = try Transitions(db, now: now).moveObject(md5, .uploaded(etag: etag, at: now)).files
            try Self.recordStored(db, key: key, size: size, etag: etag, storageClass: storageClass, now: now)
            return files
        }
        signals.uploaded.changed()
        return files
    }

    /// Back to the queue after a transient failure (or a stop): due again at `retryAt`.
    package func releaseObject(md5: String, retryAt: Date?, error: String?, countAttempt: Bool, now: Date) async throws {
        try await write { db in
            try Transitions(db, now: now).moveObject(md5, .release(retryAt: retryAt, error: error, countAttempt: countAttempt))
        }
    }

    /// Gave up (rejected by S3): every file with these bytes is `failed` with the reason, until `retry`.
    package func failObject(md5: String, reason: String, now: Date) async throws {
        try await write { db in try Transitions(db, now: now).moveObject(md5, .fail(reason: reason)) }
    }

    /// The file no longer holds the queued bytes (changed or gone): it goes back to be hashed
    /// (or is marked gone), and its object is released to any other file with those bytes.
    package func sourceChanged(job: UploadJob, gone: Bool, now: Date) async throws {
        try await write { db in
            let moves = Transitions(db, now: now)
            if gone {
                try moves.fileGone(path: job.path)
            } else {
                try moves.fileChangedUnderUpload(path: job.path, md5: job.md5)
            }
            try moves.moveObject(job.md5, .giveBack)
        }
        // A changed file is read again (after it settles) by ingest; its old object may
        // still be wanted by another file with those bytes.
        if !gone { signals.needsHash.changed() }
        signals.readyToUpload.changed()
    }

    // MARK: multipart bookkeeping

    package func recordMultipart(md5: String, uploadId: String?, partSize: Int64?) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE object SET uploadId = ?, partSize = ? WHERE md5 = ?", arguments: [uploadId, partSize, md5])
            if uploadId == nil { try db.execute(sql: "DELETE FROM part WHERE md5 = ?", arguments: [md5]) }
        }
    }

    /// A part S3 already has, recorded so a restart resumes instead of resending.
    package func recordPart(md5: String, part: S3Client.Part) async throws {
        try await write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO part(md5, partNumber, etag, size) VALUES (?, ?, ?, ?)",
                           arguments: [md5, part.partNumber, part.etag, part.size])
        }
    }

    package func parts(md5: String) async throws -> [S3Client.Part] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT partNumber, etag, size FROM part WHERE md5 = ? ORDER BY partNumber", arguments: [md5]).map {
                S3Client.Part(partNumber: $0["partNumber"], etag: $0["etag"], size: $0["size"])
            }
        }
    }
}
