import Foundation
import GRDB
import PhotolalaCore
import Queue

/// One key of a listing page, as the inventory records it.
package typealias ListedKey = ListedObject

/// An object the daemon holds as backed up, beside what the inventory lists under its key:
/// what `verify` and the end of a listing compare.
package struct UploadedObject: Sendable, Equatable {
    package var md5: String
    package var size: Int64
    /// The ETag S3 must list for it if this daemon sent it; nil if it was found there.
    package var expectedETag: String?
    package var uploadedAt: Date?
    /// The inventory's row for its key, if any.
    package var listed: InventoryEntry?
    /// A file still holds these bytes, so the object can be sent again if it must.
    package var hasLiveFile: Bool

    package init(md5: String, size: Int64, expectedETag: String?, uploadedAt: Date?, listed: InventoryEntry?, hasLiveFile: Bool) {
        self.md5 = md5
        self.size = size
        self.expectedETag = expectedETag
        self.uploadedAt = uploadedAt
        self.listed = listed
        self.hasLiveFile = hasLiveFile
    }
}

/// What a listing page means for an object the queue holds. Pure, so it is tested with
/// plain values; the inventory applies it to each page in the page's transaction.
package enum ListingReconciliation {
    /// An object waiting to be sent (or given up on) whose key is listed with its size is
    /// already backed up: it is marked uploaded and nothing is sent. Not one `verify`
    /// found wrong in the bucket (`overwrite`): the listed object is the problem. Not one
    /// being sent right now: its worker records the outcome.
    package static func isBackedUp(state: ObjectState, size: Int64, overwrite: Bool, listedSize: Int64) -> Bool {
        (state == .pending || state == .failed) && !overwrite && size == listedSize
    }

    /// The MD5 a photo key names (`photos/U/{md5}.dat` under `prefix`), or nil for any
    /// other key (another tool's files under the same prefix are listed but match no object).
    package static func md5(ofKey key: String, prefix: String) -> String? {
        guard key.utf8.starts(with: prefix.utf8) else { return nil }
        let name = key.utf8.dropFirst(prefix.utf8.count)
        guard name.count == 36, name.suffix(4).elementsEqual(".dat".utf8) else { return nil }
        let hex = name.prefix(32)
        guard hex.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return nil }
        return String(decoding: hex, as: UTF8.self)
    }
}

/// The inventory stage's rows: what listing the bucket found (`inventory`,
/// `inventory_listing`), one page per transaction, so a kill -9 mid-listing leaves every
/// page either recorded or not and the next pass starts over without undoing anything;
/// and what `verify` needs: the uploaded objects beside their listed keys a chunk at a
/// time, putting wrong ones back in the queue, choosing what `--deep` reads back.
extension QueueDatabase {
    // MARK: listing passes

    /// A pass over `prefix` begins. Rows of prefixes not in `keep` are forgotten: another
    /// user's keys (a sign-in as someone else) say nothing about this user's bucket.
    package func beginListing(prefix: String, keep: [String], now: Date = Date()) throws {
        try write { db in
            let t = now.timeIntervalSince1970
            let known = try String.fetchAll(db, sql: "SELECT prefix FROM inventory_listing")
            for stale in known where !keep.contains(stale) {
                let (low, high) = Self.keyRange(stale)
                try db.execute(sql: "DELETE FROM inventory WHERE key >= ? AND key < ?", arguments: [low, high])
                try db.execute(sql: "DELETE FROM inventory_listing WHERE prefix = ?", arguments: [stale])
            }
            try db.execute(sql: """
                INSERT INTO inventory_listing(prefix, state, startedAt, seen, updatedAt) VALUES (?, 'listing', ?, 0, ?)
                ON CONFLICT(prefix) DO UPDATE SET state = 'listing', startedAt = excluded.startedAt, seen = 0,
                  updatedAt = excluded.updatedAt
                """, arguments: [prefix, t, t])
        }
        QueueSignals.notify(signals.inventoryChanged)
    }

    /// One page of a pass: its keys recorded as seen now, and, for the photos prefix
    /// (`matchObjects`), every object waiting to be sent whose key is listed with its size
    /// marked uploaded (nothing is sent for it; `ListingReconciliation`). Returns how many
    /// objects that marked.
    @discardableResult
    package func recordListingPage(prefix: String, keys: [ListedKey], matchObjects: Bool, now: Date = Date()) throws -> Int {
        let marked: Int = try write { db in
            let t = now.timeIntervalSince1970
            let upsert = try db.cachedStatement(sql: """
                INSERT INTO inventory(key, size, etag, storageClass, seenAt) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(key) DO UPDATE SET size = excluded.size, etag = excluded.etag,
                  storageClass = excluded.storageClass, seenAt = excluded.seenAt
                """)
            let object = try db.cachedStatement(sql: "SELECT state, size, overwrite FROM object WHERE md5 = ?")
            var marked = 0
            for k in keys {
                try upsert.execute(arguments: [k.key, k.size, k.etag, k.storageClass, t])
                guard matchObjects, let md5 = ListingReconciliation.md5(ofKey: k.key, prefix: prefix),
                      let row = try Row.fetchOne(object, arguments: [md5]),
                      let state = ObjectState(rawValue: row["state"]),
                      ListingReconciliation.isBackedUp(state: state, size: row["size"], overwrite: row["overwrite"], listedSize: k.size)
                else { continue }
                try Self.markUploaded(db, md5: md5, etag: nil, uploadedAt: k.lastModified.map { min($0, now) } ?? now, now: now)
                marked += 1
            }
            try db.execute(sql: "UPDATE inventory_listing SET seen = seen + ?, updatedAt = ? WHERE prefix = ?",
                           arguments: [keys.count, t, prefix])
            return marked
        }
        if marked > 0 { QueueSignals.notify(signals.uploaded) }
        return marked
    }

    /// The pass that began at `startedAt` saw every key: keys it did not see (and nothing
    /// wrote since it began) are gone from the bucket. Returns the keys now under the
    /// prefix and how many rows were removed.
    @discardableResult
    package func finishListing(prefix: String, startedAt: Date, now: Date = Date()) throws -> (objects: Int, removed: Int) {
        let result: (Int, Int) = try write { db in
            let (low, high) = Self.keyRange(prefix)
            try db.execute(sql: "DELETE FROM inventory WHERE key >= ? AND key < ? AND seenAt < ?",
                           arguments: [low, high, startedAt.timeIntervalSince1970])
            let removed = db.changesCount
            let objects = try Int.fetchOne(db, sql: "SELECT count(*) FROM inventory WHERE key >= ? AND key < ?", arguments: [low, high]) ?? 0
            try db.execute(sql: """
                UPDATE inventory_listing SET state = 'complete', listedAt = ?, objects = ?, failures = 0, lastError = NULL,
                  updatedAt = ? WHERE prefix = ?
                """, arguments: [now.timeIntervalSince1970, objects, now.timeIntervalSince1970, prefix])
            return (objects, removed)
        }
        QueueSignals.notify(signals.inventoryChanged)
        return result
    }

    /// A pass ended without seeing every key. `refused`: S3 said 403 (the policy does not
    /// allow listing). What earlier passes recorded stays; so does a complete listing.
    package func listingFailed(prefix: String, refused: Bool, error: String, now: Date = Date()) throws {
        try write { db in
            let t = now.timeIntervalSince1970
            try db.execute(sql: """
                INSERT INTO inventory_listing(prefix, state, failures, lastError, updatedAt) VALUES (?, ?, 1, ?, ?)
                ON CONFLICT(prefix) DO UPDATE SET state = excluded.state, failures = failures + 1,
                  lastError = excluded.lastError, updatedAt = excluded.updatedAt
                """, arguments: [prefix, refused ? "refused" : "failed", error, t])
        }
        QueueSignals.notify(signals.inventoryChanged)
    }

    // MARK: verify

    /// Objects marked uploaded, in MD5 order after `after`, at most `limit`, each with the
    /// inventory's row for `keyPrefix + md5 + ".dat"`.
    package func uploadedObjects(keyPrefix: String, after: String?, limit: Int) throws -> [UploadedObject] {
        try read { db in
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
        try read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM object WHERE state = 'uploaded'") ?? 0 }
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
        try read { db in
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
