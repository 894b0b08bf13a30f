import Foundation
import PhotolalaCore
import GRDB

/// The first pass over the snapshot read from the bucket: counts its rows, notes in the
/// scratch table `present` which of our photos (any `photo` row, whatever its state) it
/// already lists by `photo_md5`, and whether its rows are in date order, newest first.
/// One line in memory at a time.
enum SnapshotIndexer {
    struct Result: Sendable, Equatable {
        var rows = 0
        var sorted = true
    }

    static func index(path: String, into db: Database, stop: CancelFlag) throws -> Result {
        let reader = try LineReader(path: path)
        var result = Result()
        let mark = try db.makeStatement(sql: "INSERT OR IGNORE INTO present(md5) SELECT md5 FROM q.photo WHERE md5 = ?")
        var previous: Double?? = .none
        var first = true
        while let line = try reader.next() {
            defer { first = false }
            if first && CatalogLine.isHeader(line) { continue }
            if CatalogLine.isBlank(line) { continue }
            let parsed = CatalogLine.parse(line)
            result.rows += 1
            if result.rows & 0xFFF == 0 { try stop.check() }
            if let md5 = parsed.md5 { try mark.execute(arguments: [md5]) }
            if case .some(let before) = previous, !CatalogLine.isNewerOrSame(before, than: parsed.date) {
                result.sorted = false
            }
            previous = .some(parsed.date)
        }
        return result
    }

    /// The second pass, only for a snapshot out of date order (a writer that did not
    /// sort): its rows go into the scratch table `lines`, read back sorted by SQLite
    /// (which spills to disk rather than memory). Equal dates keep their order.
    static func loadForSorting(path: String, into db: Database, stop: CancelFlag) throws {
        let reader = try LineReader(path: path)
        let insert = try db.makeStatement(sql: "INSERT INTO lines(date, line) VALUES (?, ?)")
        var first = true
        var rows = 0
        while let line = try reader.next() {
            defer { first = false }
            if first && CatalogLine.isHeader(line) { continue }
            if CatalogLine.isBlank(line) { continue }
            rows += 1
            if rows & 0xFFF == 0 { try stop.check() }
            let date = CatalogLine.parse(line).date
            try insert.execute(arguments: [date, SnapshotBuilder.withoutCarriageReturn(line).blob])
        }
        try db.execute(sql: "CREATE INDEX lines_order ON lines(date IS NULL, date DESC, seq)")
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// The bytes as an SQLite blob (copied).
    var blob: Data { Data(self) }
}
