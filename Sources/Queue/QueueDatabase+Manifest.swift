import Foundation
import GRDB
import PhotolalaCore

/// The manifest stage's side of the queue: the changed paths the triggers of `v6-manifest`
/// collect, the entries already in the bucket, and the ledger. Each segment is recorded
/// in one transaction after the bucket took it, so a kill -9 loses no change: the worst
/// is a segment written but not recorded, which the next start finds in the bucket.
extension QueueDatabase {
    static let manifestLedgerKey = "manifest"

    package func manifestLedger() throws -> ManifestLedger? {
        try pool.read { db in try Self.ledger(db) }
    }

    static func ledger(_ db: Database) throws -> ManifestLedger? {
        guard let text = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = ?", arguments: [manifestLedgerKey]) else { return nil }
        return try? JSONDecoder().decode(ManifestLedger.self, from: Data(text.utf8))
    }

    static func save(_ ledger: ManifestLedger, _ db: Database) throws {
        let text = String(decoding: try JSONEncoder().encode(ledger), as: UTF8.self)
        try db.execute(sql: "INSERT INTO setting(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                       arguments: [manifestLedgerKey, text])
    }

    /// The oldest changed paths (at most `limit` change rows), each with its file row and
    /// the manifest's last entry for it; `through` is the last change row they cover.
    /// nil when nothing changed.
    package func manifestCandidates(limit: Int) throws -> (through: Int64, candidates: [ManifestCandidate])? {
        try pool.read { db in
            let rows = try Row.fetchCursor(db, sql: "SELECT seq, path FROM manifest_change ORDER BY seq LIMIT ?", arguments: [limit])
            var last: Int64?
            var seen = Set<ExactPath>()
            var candidates: [ManifestCandidate] = []
            // Compiled once a connection: GRDB's authorizer makes each compile cost more
            // than the lookup, and a segment looks up 5,000 paths twice.
            let fileRow = try db.cachedStatement(sql: "SELECT state, size, md5, mtimeSec, mtimeNsec, updatedAt FROM file WHERE path = ?")
            while let row = try rows.next() {
                last = row["seq"]
                let path: String = row["path"]
                guard seen.insert(ExactPath(path)).inserted else { continue }
                let file = try Row.fetchOne(fileRow, arguments: [path]).map { f in
                    ManifestCandidate.FileRow(state: FileState(rawValue: f["state"]) ?? .pending, size: f["size"], md5: f["md5"],
                                              mtimeSec: f["mtimeSec"], mtimeNsec: f["mtimeNsec"], updatedAt: f["updatedAt"])
                }
                candidates.append(ManifestCandidate(path: path, file: file, current: try Self.lastRecord(db, path: path)))
            }
            return last.map { ($0, candidates) }
        }
    }

    static func lastRecord(_ db: Database, path: String) throws -> ManifestRecord? {
        try Row.fetchOne(db.cachedStatement(sql: """
            SELECT e.kind, e.time, e.size, e.md5, e.mtimeSec, e.mtimeNsec, f.path AS folder FROM manifest_entry e
            JOIN manifest_folder f ON f.id = e.folder WHERE e.path = ? ORDER BY e.seq DESC, e.ord DESC LIMIT 1
            """), arguments: [path]).map { r in
            ManifestRecord(kind: r["kind"], path: path, folder: r["folder"], time: r["time"], size: r["size"], md5: r["md5"],
                           mtimeSec: r["mtimeSec"], mtimeNsec: r["mtimeNsec"])
        }
    }

    /// Changed paths that turned out to change nothing in the manifest (a file being read
    /// again, a gone file the manifest never had): consumed without a segment.
    package func dropManifestChanges(through: Int64) throws {
        try write { db in try db.execute(sql: "DELETE FROM manifest_change WHERE seq <= ?", arguments: [through]) }
    }

    /// Records segment `seq` (its PUT succeeded): its entries, the changes it consumed
    /// (`through`; nil for a segment another database wrote) and the ledger, with the
    /// totals moved by the entries and `update` applied, all in one transaction. Returns
    /// the ledger saved. `ordBase` numbers the entries after those of an earlier call with
    /// the same `seq` (a snapshot read back part by part).
    package func recordManifestSegment(seq: Int64, records: [ManifestRecord], through: Int64?, ordBase: Int64 = 0,
                                      update: (inout ManifestLedger) -> Void) throws -> ManifestLedger {
        try write { db in
            guard var ledger = try Self.ledger(db) else { throw DatabaseError(message: "the manifest ledger is missing") }
            var folders = ExactKeyed<Int64>()
            let insert = try db.cachedStatement(sql: """
                INSERT OR REPLACE INTO manifest_entry(path, seq, ord, folder, kind, time, size, md5, mtimeSec, mtimeNsec)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for (i, r) in records.enumerated() {
                if let before = try Self.lastRecord(db, path: r.path), !before.isGone {
                    ledger.files -= 1
                    ledger.bytes -= before.size ?? 0
                }
                if !r.isGone {
                    ledger.files += 1
                    ledger.bytes += r.size ?? 0
                }
                let folder: Int64
                if let known = folders[r.folder] {
                    folder = known
                } else {
                    try db.execute(sql: "INSERT INTO manifest_folder(path) VALUES (?) ON CONFLICT(path) DO NOTHING", arguments: [r.folder])
                    folder = try Int64.fetchOne(db, sql: "SELECT id FROM manifest_folder WHERE path = ?", arguments: [r.folder]) ?? 0
                    folders[r.folder] = folder
                }
                try insert.execute(arguments: [r.path, seq, ordBase + Int64(i), folder, r.kind, r.time, r.size, r.md5, r.mtimeSec, r.mtimeNsec])
            }
            if let through { try db.execute(sql: "DELETE FROM manifest_change WHERE seq <= ?", arguments: [through]) }
            update(&ledger)
            try Self.save(ledger, db)
            return ledger
        }
    }

    /// Saves the ledger alone (a snapshot written, the device record's totals).
    package func saveManifestLedger(_ ledger: ManifestLedger) throws {
        try write { db in try Self.save(ledger, db) }
    }

    /// Starts the mirror over for another account or device (or a bucket rebuilt from
    /// here): no entries, every backed-up file a change to write.
    package func resetManifest(_ ledger: ManifestLedger) throws {
        try write { db in
            try db.execute(sql: """
                DELETE FROM manifest_entry;
                DELETE FROM manifest_folder;
                DELETE FROM manifest_change;
                INSERT INTO manifest_change(path) SELECT path FROM file WHERE state = 'uploaded';
                """)
            try Self.save(ledger, db)
        }
    }

    /// Hands over up to `limit` mirrored entries after `after`, in (path, seq, ord) order,
    /// one at a time from a cursor: a snapshot is written from these pages, each file's
    /// history together and in order, without a page ever held as a list. Returns how many.
    @discardableResult
    package func manifestRecords(after: (path: String, seq: Int64, ord: Int64)?, limit: Int,
                                _ each: (StoredManifestRecord) throws -> Void) throws -> Int {
        try pool.read { db in
            let columns = "e.path, e.seq, e.ord, e.kind, e.time, e.size, e.md5, e.mtimeSec, e.mtimeNsec, f.path AS folder"
            let from = "FROM manifest_entry e JOIN manifest_folder f ON f.id = e.folder"
            let cursor = try after.map { a in
                try Row.fetchCursor(db, sql: "SELECT \(columns) \(from) WHERE (e.path, e.seq, e.ord) > (?, ?, ?) ORDER BY e.path, e.seq, e.ord LIMIT ?",
                                    arguments: [a.path, a.seq, a.ord, limit])
            } ?? Row.fetchCursor(db, sql: "SELECT \(columns) \(from) ORDER BY e.path, e.seq, e.ord LIMIT ?", arguments: [limit])
            var n = 0
            while let r = try cursor.next() {
                try each(StoredManifestRecord(seq: r["seq"], ord: r["ord"], record: ManifestRecord(
                    kind: r["kind"], path: r["path"], folder: r["folder"], time: r["time"], size: r["size"], md5: r["md5"],
                    mtimeSec: r["mtimeSec"], mtimeNsec: r["mtimeNsec"])))
                n += 1
            }
            return n
        }
    }

    /// The same, collected (for tests and small pages).
    package func manifestRecords(after: (path: String, seq: Int64, ord: Int64)?, limit: Int) throws -> [StoredManifestRecord] {
        var out: [StoredManifestRecord] = []
        try manifestRecords(after: after, limit: limit) { out.append($0) }
        return out
    }

    /// Whether any file still waits to be hashed or uploaded: the manifest gathers changes
    /// longer while uploads go on.
    package func hasUploadsInFlight() throws -> Bool {
        try pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM file WHERE state IN ('pending', 'queued', 'uploading'))") ?? false
        }
    }

    /// Changed-path rows waiting, counted up to `limit`: more than the records they can
    /// make (a path changed twice is one record), for a decision that needs only a bound.
    package func manifestChangeCount(upTo limit: Int) throws -> Int {
        try pool.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM (SELECT 1 FROM manifest_change LIMIT ?)", arguments: [limit]) ?? 0
        }
    }

    /// Whether any change waits for the manifest stage.
    package func hasManifestChanges() throws -> Bool {
        try pool.read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM manifest_change)") ?? false }
    }
}
