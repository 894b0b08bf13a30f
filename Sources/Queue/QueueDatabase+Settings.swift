import Foundation
import GRDB

/// Small persistent settings, several at a time (what the catalog stage last saw of the
/// catalog, the user's pause).
extension QueueDatabase {
    /// One setting; nil when unset.
    package func setting(_ key: String) throws -> String? {
        try read { db in try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = ?", arguments: [key]) }
    }

    /// Sets (nil: removes) one setting.
    package func setSetting(_ key: String, _ value: String?) throws {
        try write { db in
            if let value {
                try db.execute(sql: "INSERT INTO setting(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM setting WHERE key = ?", arguments: [key])
            }
        }
    }

    /// Several settings at once, in one transaction (nil removes a key): what the catalog
    /// stage saw, recorded after its marks.
    package func setSettings(_ settings: [String: String?]) throws {
        try write { db in try Self.store(settings, in: db) }
    }

    /// Every setting whose key starts with `prefix`.
    package func settings(prefix: String) throws -> [String: String] {
        try read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT key, value FROM setting WHERE substr(key, 1, ?) = ?",
                                        arguments: [prefix.count, prefix])
            return Dictionary(rows.map { ($0["key"], $0["value"]) }, uniquingKeysWith: { a, _ in a })
        }
    }

    /// In `db`'s transaction; nil removes a key.
    package static func store(_ settings: [String: String?], in db: Database) throws {
        for (key, value) in settings.sorted(by: { $0.key < $1.key }) {
            if let value {
                try db.execute(sql: "INSERT INTO setting(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                               arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM setting WHERE key = ?", arguments: [key])
            }
        }
    }
}
