import Foundation
import GRDB
import PhotolalaCore

/// The inventory side of the queue: what listing the bucket found, one page per
/// transaction, so a kill -9 mid-listing leaves every page either recorded or not, and
/// the next pass starts over without undoing anything.
///
/// Other stages ask `inventoryPresence(key:)` ("is thumbnails/U/M.jpg there?") and
/// `inventoryListing(prefix:)` (is there a complete listing to trust?).
extension QueueDatabase {
    /// The upper bound of the keys under `prefix` in byte order: its last byte plus one
    /// (prefixes end in '/', so '0'), so the primary key answers "everything under it".
    static func keyRange(_ prefix: String) -> (String, String) {
        var bytes = Array(prefix.utf8)
        if let last = bytes.popLast() { bytes.append(last &+ 1) }
        return (prefix, String(decoding: bytes, as: UTF8.self))
    }

    /// The prefix a key is listed under: up to and including its last '/'.
    static func listingPrefix(ofKey key: String) -> String {
        guard let slash = key.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        return String(key[...slash])
    }

    // MARK: what other stages ask

    package func inventoryEntry(key: String) throws -> InventoryEntry? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT key, size, etag, storageClass, seenAt FROM inventory WHERE key = ?", arguments: [key])
                .map(Self.entry)
        }
    }

    package func inventoryListing(prefix: String) throws -> InventoryListing? {
        try pool.read { db in try Self.listing(db, prefix: prefix) }
    }

    /// Whether `key` is in the bucket as far as the inventory knows: listed (or uploaded by
    /// this daemon), absent from a complete listing of its prefix, or unknown.
    package func inventoryPresence(key: String) throws -> InventoryPresence {
        try pool.read { db in
            if let row = try Row.fetchOne(db, sql: "SELECT key, size, etag, storageClass, seenAt FROM inventory WHERE key = ?",
                                          arguments: [key]) {
                return .present(Self.entry(row))
            }
            let complete = try Self.listing(db, prefix: Self.listingPrefix(ofKey: key))?.isComplete ?? false
            return complete ? .absent : .unknown
        }
    }

    /// Another stage wrote `key` (a thumbnail, a catalog snapshot): the inventory knows it
    /// is there without waiting for the next listing (which would otherwise say `absent`).
    package func recordStored(key: String, size: Int64, etag: String, storageClass: String = "STANDARD", now: Date = Date()) throws {
        try write { db in try recordStored(db, key: key, size: size, etag: etag, storageClass: storageClass, now: now) }
    }

    func recordStored(_ db: Database, key: String, size: Int64, etag: String, storageClass: String, now: Date) throws {
        try db.execute(sql: """
            INSERT INTO inventory(key, size, etag, storageClass, seenAt) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(key) DO UPDATE SET size = excluded.size, etag = excluded.etag,
              storageClass = excluded.storageClass, seenAt = excluded.seenAt
            """, arguments: [key, size, etag, storageClass, now.timeIntervalSince1970])
    }

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
                try markUploaded(db, md5: md5, etag: nil, uploadedAt: k.lastModified.map { min($0, now) } ?? now, now: now)
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

    // MARK: rows

    static func entry(_ row: Row) -> InventoryEntry {
        InventoryEntry(key: row["key"], size: row["size"], etag: row["etag"], storageClass: row["storageClass"],
                       seenAt: Date(timeIntervalSince1970: row["seenAt"]))
    }

    static func listing(_ db: Database, prefix: String) throws -> InventoryListing? {
        guard let row = try Row.fetchOne(db, sql: """
            SELECT state, startedAt, listedAt, objects, seen, failures, lastError, updatedAt FROM inventory_listing WHERE prefix = ?
            """, arguments: [prefix]) else { return nil }
        let date: (String) -> Date? = { name in (row[name] as Double?).map { Date(timeIntervalSince1970: $0) } }
        return InventoryListing(prefix: prefix, state: InventoryListing.State(rawValue: row["state"]) ?? .failed,
                                startedAt: date("startedAt"), listedAt: date("listedAt"), objects: row["objects"],
                                seen: row["seen"], failures: row["failures"], lastError: row["lastError"],
                                updatedAt: date("updatedAt") ?? .distantPast)
    }
}
