import Foundation
import PhotolalaCore
import GRDB
import Queue

/// The merge proper (app-catalog.md step 3): every row already in the catalog, byte for
/// byte, and each of our ready photos it lacks by `photo_md5`, both newest first, written
/// as the next snapshot. Their rows come from the downloaded file (or from the scratch
/// table when they were out of order), ours from the queue through the scratch
/// connection, in the index's order: nothing is sorted or collected in memory.
package enum SnapshotBuilder {
    struct Result: Sendable, Equatable {
        var md5: String
        var size: Int64
        /// Rows in the new snapshot.
        var rows: Int
        var added: Int
        var rejected: Int
        /// Why the first rejected photo could not be published.
        var firstRejection: String?
    }

    /// Our ready photos the catalog lacks, newest first; not those an app withdrew. The
    /// state is written in (not bound): the planner picks the catalog-order index by it.
    package static let oursToAdd = """
        FROM q.photo p
        WHERE p.state = \(PhotoState.ready.sqlLiteral) AND (p.catalog IS NULL OR p.catalog = 'listed')
          AND NOT EXISTS (SELECT 1 FROM present WHERE present.md5 = p.md5)
          AND NOT EXISTS (SELECT 1 FROM withdrawn WHERE withdrawn.md5 = p.md5)
        """

    static func countToAdd(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) " + oursToAdd) ?? 0
    }

    /// - Parameters:
    ///   - existing: the downloaded snapshot, nil when there was no catalog.
    ///   - sorted: false when its rows were loaded into `lines` to be sorted.
    static func build(existing: String?, sorted: Bool, output: String, db: Database, stop: CancelFlag) throws -> Result {
        let writer = try SnapshotWriter(path: output)
        try writer.line(CatalogFormat.header)
        var rows = 0
        var added = 0
        var rejected = 0
        var firstRejection: String?
        let ours = try Row.fetchCursor(db, sql: "SELECT p.md5, p.headMD5, p.size, p.takenAt, p.format, p.rowid " + oursToAdd
                                           + " ORDER BY p.takenAt DESC, p.md5 DESC")
        let noteAdded = try db.makeStatement(sql: "INSERT INTO added(photo) VALUES (?)")
        let noteRejected = try db.makeStatement(sql: "INSERT OR IGNORE INTO rejected(md5) VALUES (?)")
        // Each with its queue rowid, which the bookkeeping finds it by.
        let nextOurs = { () throws -> (date: Double, value: (row: CatalogRow, photo: Int64))? in
            while let row = try ours.next() {
                let md5: String = row[0]
                let head: String? = row[1], size: Int64? = row[2], date: Int64? = row[3], format: String? = row[4]
                let problem: String
                if let head, let size, let date, let format {
                    let candidate = CatalogRow(headMD5: head, size: size, md5: md5, date: date, format: format)
                    guard let why = candidate.problem else { return (Double(date), (candidate, row[5])) }
                    problem = why
                } else {
                    problem = "its catalog columns are not all filled"
                }
                rejected += 1
                if firstRejection == nil { firstRejection = "photo \(md5): \(problem)" }
                try noteRejected.execute(arguments: [md5])
            }
            return nil
        }
        var written = 0
        let checkStop = {
            written += 1
            if written & 0xFFF == 0 { try stop.check() }
        }
        let writeOurs = { (row: CatalogRow, photo: Int64) throws in
            try checkStop()
            try writer.line(row.line)
            try noteAdded.execute(arguments: [photo])
            added += 1
            rows += 1
        }

        if let existing, sorted {
            let reader = try LineReader(path: existing)
            var first = true
            try CatalogMerge.merge(existing: { () throws -> (date: Double?, value: UnsafeBufferPointer<UInt8>)? in
                while let line = try reader.next() {
                    defer { first = false }
                    if first && CatalogLine.isHeader(line) { continue }
                    if CatalogLine.isBlank(line) { continue }
                    // Valid until the next read: the merge writes it before reading again.
                    return (CatalogLine.parse(line).date, line)
                }
                return nil
            }, ours: nextOurs) { item in
                switch item {
                case .existing(let line): try checkStop(); try writer.line(withoutCarriageReturn(line)); rows += 1
                case .ours(let ours): try writeOurs(ours.row, ours.photo)
                }
            }
        } else {
            let theirs = try Row.fetchCursor(db, sql: "SELECT date, line FROM lines ORDER BY date IS NULL, date DESC, seq")
            try CatalogMerge.merge(existing: { () throws -> (date: Double?, value: Data)? in
                guard let row = try theirs.next() else { return nil }
                return (row[0], row[1])
            }, ours: nextOurs) { item in
                switch item {
                case .existing(let line):
                    try checkStop()
                    try line.withUnsafeBytes { try writer.line($0.bindMemory(to: UInt8.self)) }
                    rows += 1
                case .ours(let ours): try writeOurs(ours.row, ours.photo)
                }
            }
        }
        let md5 = try writer.finish()
        // One sort at the end (SQLite's, spilling to disk) instead of a B-tree kept in order.
        try db.execute(sql: "CREATE INDEX added_photo ON added(photo)")
        return Result(md5: md5, size: writer.size, rows: rows, added: added, rejected: rejected, firstRejection: firstRejection)
    }

    /// A row written with `\r\n` keeps its bytes but not the `\r`: the snapshot's lines
    /// end with `\n` (the apps split at either).
    static func withoutCarriageReturn(_ line: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        guard let last = line.last, last == 0x0D else { return line }
        return UnsafeBufferPointer(rebasing: line.dropLast())
    }
}
