import Foundation
import GRDB
import PhotolalaCore

/// Where the inventory meets the other stages: they ask `inventoryPresence(key:)` ("is
/// thumbnails/U/M.jpg there?") and `inventoryListing(prefix:)` (is there a complete
/// listing to trust?), and say what they wrote (`recordStored`). The listing passes
/// themselves are `Inventory.InventoryRecords`.
extension QueueDatabase {
    /// The upper bound of the keys under `prefix` in byte order: its last byte plus one
    /// (prefixes end in '/', so '0'), so the primary key answers "everything under it".
    package static func keyRange(_ prefix: String) -> (String, String) {
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
        try write { db in try Self.recordStored(db, key: key, size: size, etag: etag, storageClass: storageClass, now: now) }
    }

    /// The same, in `db`'s transaction.
    package static func recordStored(_ db: Database, key: String, size: Int64, etag: String, storageClass: String, now: Date) throws {
        try db.execute(sql: """
            INSERT INTO inventory(key, size, etag, storageClass, seenAt) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(key) DO UPDATE SET size = excluded.size, etag = excluded.etag,
              storageClass = excluded.storageClass, seenAt = excluded.seenAt
            """, arguments: [key, size, etag, storageClass, now.timeIntervalSince1970])
    }

    // MARK: rows

    package static func entry(_ row: Row) -> InventoryEntry {
        InventoryEntry(key: row["key"], size: row["size"], etag: row["etag"], storageClass: row["storageClass"],
                       seenAt: Date(timeIntervalSince1970: row["seenAt"]))
    }

    package static func listing(_ db: Database, prefix: String) throws -> InventoryListing? {
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
