import Foundation
import GRDB
import PhotolalaCore
import Queue

/// One key of a listing page, as the inventory records it.
package typealias ListedKey = ListedObject

/// One listing pass over a prefix, from `beginListing` to `finishListing`: where it is
/// (the last key recorded) and what it changed. `quiet`: a complete pass was recorded
/// before, so this one writes only what differs (its progress is not in the database).
package struct ListingPass: Sendable, Equatable {
    package let prefix: String
    package let startedAt: Date
    package let quiet: Bool
    package fileprivate(set) var after: String?
    package fileprivate(set) var seen = 0
    /// Rows inserted, changed or removed so far.
    package fileprivate(set) var changed = 0
    package fileprivate(set) var removed = 0

    package init(prefix: String, startedAt: Date, quiet: Bool) {
        self.prefix = prefix
        self.startedAt = startedAt
        self.quiet = quiet
    }
}

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
    /// After a complete pass the prefix's row is left as it is: the pass under way lives in
    /// the returned value (a disk that may spin down is written only when the bucket changed).
    package func beginListing(prefix: String, keep: [String], now: Date) async throws -> ListingPass {
        let quiet: Bool = try await write { db in
            let t = now.timeIntervalSince1970
            let known = try String.fetchAll(db, sql: "SELECT prefix FROM inventory_listing")
            for stale in known where !keep.contains(stale) {
                let (low, high) = Self.keyRange(stale)
                try db.execute(sql: "DELETE FROM inventory WHERE key >= ? AND key < ?", arguments: [low, high])
                try db.execute(sql: "DELETE FROM inventory_listing WHERE prefix = ?", arguments: [stale])
            }
            if try Self.listing(db, prefix: prefix)?.state == .complete { return true }
            try db.execute(sql: """
                INSERT INTO inventory_listing(prefix, state, startedAt, seen, updatedAt) VALUES (?, ?, ?, 0, ?)
                ON CONFLICT(prefix) DO UPDATE SET state = excluded.state, startedAt = excluded.startedAt, seen = 0,
                  updatedAt = excluded.updatedAt
                """, arguments: [prefix, InventoryListing.State.listing.rawValue, t, t])
            return false
        }
        if !quiet { signals.inventoryChanged.changed() }
        return ListingPass(prefix: prefix, startedAt: now, quiet: quiet)
    }

    /// One page of `pass`, S3's next keys in order: each key new or changed is recorded as
    /// seen now, and keys the inventory holds between the previous page's last key and this
    /// page's that the page lacks are gone (unless written since the pass began: an upload
    /// meanwhile). For the photos prefix (`matchObjects`), every object waiting to be sent
    /// whose key is listed with its size is marked uploaded (nothing is sent for it;
    /// `ListingReconciliation`). Returns how many objects that marked.
    @discardableResult
    package func recordListingPage(_ pass: inout ListingPass, keys: [ListedKey], matchObjects: Bool, now: Date) async throws -> Int {
        let (prefix, startedAt, quiet, after) = (pass.prefix, pass.startedAt.timeIntervalSince1970, pass.quiet, pass.after)
        let (marked, changed, removed): (Int, Int, Int) = try await write { db in
            let t = now.timeIntervalSince1970
            var held: [String: Row] = [:]
            if let last = keys.last?.key {
                let (low, _) = Self.keyRange(prefix)
                let rows = try Row.fetchAll(db, sql: """
                    SELECT key, size, etag, storageClass, seenAt, lastModified FROM inventory WHERE key > ? AND key <= ?
                    """, arguments: [after ?? low, last])
                held = Dictionary(rows.map { ($0["key"] as String, $0) }, uniquingKeysWith: { a, _ in a })
            }
            let upsert = try db.cachedStatement(sql: """
                INSERT INTO inventory(key, size, etag, storageClass, seenAt, lastModified) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(key) DO UPDATE SET size = excluded.size, etag = excluded.etag,
                  storageClass = excluded.storageClass, seenAt = excluded.seenAt,
                  lastModified = coalesce(excluded.lastModified, inventory.lastModified)
                """)
            let object = try db.cachedStatement(sql: "SELECT state, size, overwrite FROM object WHERE md5 = ?")
            let moves = Transitions(db, now: now)
            var marked = 0, changed = 0
            for k in keys {
                if let row = held.removeValue(forKey: k.key), (row["size"] as Int64) == k.size, (row["etag"] as String) == k.etag,
                   (row["storageClass"] as String) == k.storageClass, k.lastModified == nil || (row["lastModified"] as Double?) != nil {
                    // As the inventory holds it: nothing to write.
                } else {
                    try upsert.execute(arguments: [k.key, k.size, k.etag, k.storageClass, t, k.lastModified?.timeIntervalSince1970])
                    changed += 1
                }
                guard matchObjects, let md5 = ListingReconciliation.md5(ofKey: k.key, prefix: prefix),
                      let row = try Row.fetchOne(object, arguments: [md5]),
                      let state = ObjectState(rawValue: row["state"]),
                      ListingReconciliation.isBackedUp(state: state, size: row["size"], overwrite: row["overwrite"], listedSize: k.size)
                else { continue }
                try moves.moveObject(md5, .uploaded(etag: nil, at: k.lastModified.map { min($0, now) } ?? now))
                marked += 1
            }
            var removed = 0
            for (key, row) in held where (row["seenAt"] as Double) < startedAt {
                try db.execute(sql: "DELETE FROM inventory WHERE key = ?", arguments: [key])
                removed += 1
            }
            if !quiet {
                try db.execute(sql: "UPDATE inventory_listing SET seen = seen + ?, updatedAt = ? WHERE prefix = ?",
                               arguments: [keys.count, t, prefix])
            }
            return (marked, changed, removed)
        }
        pass.after = keys.last?.key ?? pass.after
        pass.seen += keys.count
        pass.changed += changed + removed
        pass.removed += removed
        if marked > 0 { signals.uploaded.changed() }
        return marked
    }

    /// `pass` saw every key: keys after its last one that it did not see (and nothing
    /// wrote since it began) are gone from the bucket. The prefix's row records the
    /// complete pass unless the pass was quiet and changed nothing (then `wrote` is false
    /// and the caller keeps the time in memory). Returns the keys now under the prefix and
    /// how many rows the pass removed.
    @discardableResult
    package func finishListing(_ pass: ListingPass, now: Date) async throws -> (objects: Int, removed: Int, wrote: Bool) {
        let result: (Int, Int, Bool) = try await write { db in
            let (low, high) = Self.keyRange(pass.prefix)
            try db.execute(sql: "DELETE FROM inventory WHERE key > ? AND key < ? AND seenAt < ?",
                           arguments: [pass.after ?? low, high, pass.startedAt.timeIntervalSince1970])
            let tail = db.changesCount
            let removed = pass.removed + tail
            let objects = try Int.fetchOne(db, sql: "SELECT count(*) FROM inventory WHERE key >= ? AND key < ?", arguments: [low, high]) ?? 0
            if pass.quiet, pass.changed + tail == 0, try Self.listing(db, prefix: pass.prefix)?.objects == objects {
                return (objects, removed, false)
            }
            try db.execute(sql: """
                UPDATE inventory_listing SET state = ?, listedAt = ?, objects = ?, failures = 0, lastError = NULL,
                  updatedAt = ? WHERE prefix = ?
                """, arguments: [InventoryListing.State.complete.rawValue, now.timeIntervalSince1970, objects, now.timeIntervalSince1970,
                                 pass.prefix])
            return (objects, removed, true)
        }
        if result.2 { signals.inventoryChanged.changed() }
        return result
    }

    /// A pass ended without seeing every key. `refused`: S3 said 403 (the policy does not
    /// allow listing). What earlier passes recorded stays; so does a complete listing.
    package func listingFailed(prefix: String, refused: Bool, error: String, now: Date) async throws {
        try await write { db in
            let t = now.timeIntervalSince1970
            try db.execute(sql: """
                INSERT INTO inventory_listing(prefix, state, failures, lastError, updatedAt) VALUES (?, ?, 1, ?, ?)
                ON CONFLICT(prefix) DO UPDATE SET state = excluded.state, failures = failures + 1,
                  lastError = excluded.lastError, updatedAt = excluded.updatedAt
                """, arguments: [prefix, (refused ? InventoryListing.State.refused : .failed).rawValue, error, t])
        }
        signals.inventoryChanged.changed()
    }

    // MARK: verify

    /// Objects marked uploaded, in MD5 order after `after`, at most `limit`, each with the
    /// inventory's row for `keyPrefix + md5 + ".dat"`.
    package func uploadedObjects(keyPrefix: String, after: String?, limit: Int) async throws -> [UploadedObject] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT o.md5, o.size, o.etag AS expected, o.uploadedAt,
                       i.key, i.size AS listedSize, i.etag, i.storageClass, i.seenAt,
                       EXISTS (SELECT 1 FROM file f WHERE f.md5 = o.md5 AND f.state = ?) AS live
                FROM object o LEFT JOIN inventory i ON i.key = ? || o.md5 || '.dat'
                WHERE o.state = ? AND o.md5 > ? ORDER BY o.md5 LIMIT ?
                """, arguments: [FileState.uploaded, keyPrefix, ObjectState.uploaded, after ?? "", limit]).map { row in
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

    package func uploadedObjectCount() async throws -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM object WHERE state = ?", arguments: [ObjectState.uploaded]) ?? 0 }
    }

    /// Objects the bucket lacks or holds wrong go back to be sent, with every file that
    /// still holds their bytes (`uploaded` → `queued`). `overwrite`: what the bucket holds
    /// under the key is wrong, so it is replaced without asking. Returns how many objects
    /// went back; one no file holds any more stays as it is (nothing to send it from).
    @discardableResult
    package func requeue(_ md5s: [String], overwrite: Bool, reason: String, now: Date) async throws -> Int {
        guard !md5s.isEmpty else { return 0 }
        let count: Int = try await write { db in
            let moves = Transitions(db, now: now)
            return try md5s.reduce(0) { count, md5 in count + (try moves.moveObject(md5, .lost(reason: reason, overwrite: overwrite)).objects) }
        }
        if count > 0 { signals.readyToUpload.changed() }
        return count
    }

    /// The `count` uploaded objects `verify --deep` reads back: those never read back
    /// first, then those read longest ago, in random order among equals, so repeated
    /// small shares cover the whole bucket. Objects listed in an archive class (GLACIER,
    /// DEEP_ARCHIVE) cannot be read without a restore and are left out.
    /// Objects sent again after `uploadedBefore` (the verify's start: what its own listing
    /// found wrong, re-sent at once) are left to the next verify, so a verify reads back
    /// what it found, whatever the uploader's pace.
    package func objectsToReadBack(count: Int, keyPrefix: String, uploadedBefore: Date = .distantFuture) async throws -> [(md5: String, size: Int64)] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT o.md5, o.size FROM object o LEFT JOIN inventory i ON i.key = ? || o.md5 || '.dat'
                WHERE o.state = ? AND coalesce(o.uploadedAt, 0) < ? AND coalesce(i.storageClass, 'STANDARD') NOT IN ('GLACIER', 'DEEP_ARCHIVE')
                ORDER BY o.deepCheckedAt IS NOT NULL, o.deepCheckedAt, random() LIMIT ?
                """, arguments: [keyPrefix, ObjectState.uploaded, uploadedBefore.timeIntervalSince1970, max(0, count)]).map { ($0["md5"], $0["size"]) }
        }
    }

    package func markReadBack(md5: String, now: Date) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE object SET deepCheckedAt = ? WHERE md5 = ?", arguments: [now.timeIntervalSince1970, md5])
        }
    }
}
