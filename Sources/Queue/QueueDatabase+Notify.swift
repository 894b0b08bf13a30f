import Foundation
import GRDB

extension QueueDatabase {
    /// Files that became backed up since `date`, and their bytes: the day's summary
    /// notification. One range of the (state, updatedAt, size) index.
    package func uploadedFiles(since date: Date) throws -> (files: Int, bytes: Int64) {
        try pool.read { db in
            let row = try Row.fetchOne(db, sql: """
                SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM file WHERE state = 'uploaded' AND updatedAt >= ?
                """, arguments: [date.timeIntervalSince1970])
            return (row?["n"] ?? 0, row?["bytes"] ?? 0)
        }
    }
}
