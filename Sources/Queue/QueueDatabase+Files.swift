import Foundation
import GRDB
import PhotolalaCore

/// `photolalactl files`: "is this backed up?" for a file or everything under a folder,
/// a page at a time in path order.
extension QueueDatabase {
    /// The file at `path` itself (only on the first page, `after` nil: even one deleted
    /// since), then the files under it as a folder that are still there, in byte order
    /// after `after`, at most `limit` in all.
    package func files(at path: String, after: String?, limit: Int) throws -> [FileRecord] {
        try pool.read { db in
            let select = """
                SELECT f.path, f.state, f.size, f.md5, f.updatedAt, coalesce(f.lastError, o.lastError) AS lastError,
                       CASE WHEN f.state = 'uploaded' THEN o.uploadedAt END AS uploadedAt
                FROM file f LEFT JOIN object o ON o.md5 = f.md5
                """
            var records: [FileRecord] = []
            if after == nil, let row = try Row.fetchOne(db, sql: select + " WHERE f.path = ?", arguments: [path]) {
                records.append(Self.record(row))
            }
            let (low, high) = Self.subtreeRange(path)
            let rows = try Row.fetchAll(db, sql: select + """
                 WHERE f.path > ? AND f.path < ? AND f.state != 'gone' ORDER BY f.path LIMIT ?
                """, arguments: [max(low, after ?? ""), high, max(0, limit - records.count)])
            return records + rows.map(Self.record)
        }
    }

    static func record(_ row: Row) -> FileRecord {
        FileRecord(path: row["path"], state: FileState(rawValue: row["state"]) ?? .pending, size: row["size"], md5: row["md5"],
                   uploadedAt: (row["uploadedAt"] as Double?).map { Date(timeIntervalSince1970: $0) },
                   lastError: row["lastError"], updatedAt: Date(timeIntervalSince1970: row["updatedAt"]))
    }
}
