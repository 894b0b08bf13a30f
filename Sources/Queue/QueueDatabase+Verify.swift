import Foundation
import GRDB
import PhotolalaCore

/// What `verify` and the end of a listing need: the uploaded objects beside their listed
/// keys a chunk at a time (nothing held beyond a chunk), putting wrong ones back in the
/// queue, and choosing what `--deep` reads back.
extension QueueDatabase {
    /// Objects marked uploaded, in MD5 order after `after`, at most `limit`, each with the
    /// inventory's row for `keyPrefix + md5 + ".dat"`.
    package func uploadedObjects(keyPrefix: String, after: String?, limit: Int) throws -> [UploadedObject] {
        try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT o.md5, o.size, o.etag AS expected, o.uploadedAt,
                       i.key, i.size AS listedSize, i.etag, i.storageClass, i.seenAt,
                       EXISTS (SELECT 1 FROM file f WHERE f.md5 = o.md5 AND f.state = 'uploaded') AS live
                FROM object o LEFT JOIN inventory i ON i.key = ? || o.md5 || '.dat'
                WHERE o.state = 'uploaded' AND o.md5 > ? ORDER BY o.md5 LIMIT ?
                """, arguments: [keyPrefix, after ?? "", limit]).map { row in
                let listed: InventoryEntry? = (row["key"] as String?).map { key in
                    InventoryEntry(key: key, size: row["listedSize"], etag: row["etag"], storageClass: row["storageClass"],
                                   seenAt: Date(timeIntervalSince1970: row["seenAt"]))
                }
                return UploadedObject(md5: row["md5"], size: row["size"], expectedETag: row["expected"],
                                      uploadedAt: (row["uploadedAt"] as Double?).map { Date(timeIntervalSince1970: $0) },
                                      listed: listed, hasLiveFile: row["live"])
            }
        }
    }

    package func uploadedObjectCount() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM object WHERE state = 'uploaded'") ?? 0 }
    }

    /// Objects the bucket lacks or holds wrong go back to be sent, with every file that
    /// still holds their bytes (`uploaded` → `queued`). `overwrite`: what the bucket holds
    /// under the key is wrong, so it is replaced without asking. Returns how many objects
    /// went back; one no file holds any more stays as it is (nothing to send it from).
    @discardableResult
    package func requeue(_ md5s: [String], overwrite: Bool, reason: String, now: Date = Date()) throws -> Int {
        guard !md5s.isEmpty else { return 0 }
        let count: Int = try write { db in
            let t = now.timeIntervalSince1970
            var count = 0
            for md5 in md5s {
                try db.execute(sql: "UPDATE file SET state = 'queued', lastError = ?, updatedAt = ? WHERE md5 = ? AND state = 'uploaded'",
                               arguments: [reason, t, md5])
                guard db.changesCount > 0 else { continue }
                try db.execute(sql: """
                    UPDATE object SET state = 'pending', attempts = 0, nextAttemptAt = NULL, lastError = ?, etag = NULL,
                      overwrite = ?, updatedAt = ? WHERE md5 = ? AND state = 'uploaded'
                    """, arguments: [reason, overwrite, t, md5])
                count += db.changesCount
            }
            return count
        }
        if count > 0 { QueueSignals.notify(signals.readyToUpload) }
        return count
    }

    /// The `count` uploaded objects `verify --deep` reads back: those never read back
    /// first, then those read longest ago, in random order among equals, so repeated
    /// small shares cover the whole bucket. Objects listed in an archive class (GLACIER,
    /// DEEP_ARCHIVE) cannot be read without a restore and are left out.
    /// Objects sent again after `uploadedBefore` (the verify's start: what its own listing
    /// found wrong, re-sent at once) are left to the next verify, so a verify reads back
    /// what it found, whatever the uploader's pace.
    package func objectsToReadBack(count: Int, keyPrefix: String, uploadedBefore: Date = .distantFuture) throws -> [(md5: String, size: Int64)] {
        try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT o.md5, o.size FROM object o LEFT JOIN inventory i ON i.key = ? || o.md5 || '.dat'
                WHERE o.state = 'uploaded' AND coalesce(o.uploadedAt, 0) < ? AND coalesce(i.storageClass, 'STANDARD') NOT IN ('GLACIER', 'DEEP_ARCHIVE')
                ORDER BY o.deepCheckedAt IS NOT NULL, o.deepCheckedAt, random() LIMIT ?
                """, arguments: [keyPrefix, uploadedBefore.timeIntervalSince1970, max(0, count)]).map { ($0["md5"], $0["size"]) }
        }
    }

    package func markReadBack(md5: String, now: Date = Date()) throws {
        try write { db in
            try db.execute(sql: "UPDATE object SET deepCheckedAt = ? WHERE md5 = ?", arguments: [now.timeIntervalSince1970, md5])
        }
    }
}
