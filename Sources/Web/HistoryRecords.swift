import Foundation
import GRDB
import Queue

/// One month of `/api/history` (web.md): photos (distinct contents) whose date falls in it,
/// on this NAS (`here`), in the account's bucket (`cloud`), and in one of the two only.
package struct HistoryMonth: Codable, Sendable, Equatable {
    package var month: String
    package var here: Int
    package var cloud: Int
    package var onlyCloud: Int
    package var onlyHere: Int

    package init(month: String, here: Int, cloud: Int, onlyCloud: Int, onlyHere: Int) {
        self.month = month
        self.here = here
        self.cloud = cloud
        self.onlyCloud = onlyCloud
        self.onlyHere = onlyHere
    }
}

/// A watched folder's files on the page, and the failures by why.
package struct FolderTally: Codable, Sendable, Equatable {
    package var folder: String
    package var files: Int
    package var uploaded: Int
    package var failed: Int
    package var bytes: Int64
    package var uploadedBytes: Int64
}

package struct FailureRow: Codable, Sendable, Equatable {
    /// A failed file's path (only with a session); nil in the grouped list.
    package var path: String?
    package var why: String
    package var count: Int

    package init(path: String?, why: String, count: Int) {
        self.path = path
        self.why = why
        self.count = count
    }
}

extension QueueDatabase {
    /// The account month by month, from what the queue database knows, in one aggregated
    /// read: a photo is here when a live file has its bytes; in the cloud when the
    /// inventory listed `photos/{userId}/{md5}.dat` or this NAS uploaded it. Its month is
    /// the catalog date (`photo.takenAt`) when the thumbnail stage read one, else the
    /// earliest of its files' modification time and its object's time in the bucket (S3's
    /// LastModified; the upload's). Months in UTC; a photo with no date at all is left out.
    package func history(userId: String?) async throws -> [HistoryMonth] {
        let prefix = userId.map { "photos/\($0)/" }
        let (low, high) = (prefix ?? "\u{1}", prefix.map { $0.dropLast() + "0" } ?? "\u{1}")
        return try await read { db in
            try Row.fetchAll(db, sql: """
                WITH sighting(md5, here, cloud, at) AS (
                    SELECT md5, 1, 0, mtimeSec FROM file
                      WHERE md5 IS NOT NULL AND state <> :gone
                    UNION ALL
                    SELECT md5, 0, 1, uploadedAt FROM object WHERE state = :uploaded
                    UNION ALL
                    SELECT substr(key, length(:prefix) + 1, 32), 0, 1, lastModified FROM inventory
                      WHERE key >= :low AND key < :high AND length(key) = length(:prefix) + 36 AND key LIKE '%.dat'
                ), photo_place(md5, here, cloud, at) AS (
                    SELECT md5, max(here), max(cloud), min(at) FROM sighting GROUP BY md5
                )
                SELECT strftime('%Y-%m', coalesce(p.takenAt, pp.at), 'unixepoch') AS month,
                       sum(pp.here) AS here, sum(pp.cloud) AS cloud,
                       sum(pp.cloud AND NOT pp.here) AS onlyCloud, sum(pp.here AND NOT pp.cloud) AS onlyHere
                  FROM photo_place pp LEFT JOIN photo p ON p.md5 = pp.md5
                 WHERE coalesce(p.takenAt, pp.at) IS NOT NULL
                 GROUP BY month ORDER BY month
                """, arguments: ["prefix": prefix ?? "", "low": String(low), "high": String(high), "gone": FileState.gone,
                                 "uploaded": ObjectState.uploaded])
                .map { HistoryMonth(month: $0["month"], here: $0["here"], cloud: $0["cloud"], onlyCloud: $0["onlyCloud"], onlyHere: $0["onlyHere"]) }
        }
    }

    /// Each watched folder's files: one range read of the path index per folder.
    package func folderTallies(_ folders: [String]) async throws -> [FolderTally] {
        try await read { db in
            try folders.map { folder in
                let low = folder.hasSuffix("/") ? folder : folder + "/"
                let high = String(low.dropLast()) + "0"
                let row = try Row.fetchOne(db, sql: """
                    SELECT count(*) AS files, coalesce(sum(state = :uploaded), 0) AS uploaded,
                           coalesce(sum(state = :failed), 0) AS failed, coalesce(sum(size), 0) AS bytes,
                           coalesce(sum(CASE WHEN state = :uploaded THEN size END), 0) AS uploadedBytes
                      FROM file WHERE path >= :low AND path < :high AND state <> :gone
                    """, arguments: ["low": low, "high": high, "uploaded": FileState.uploaded, "failed": FileState.failed,
                                     "gone": FileState.gone])
                return FolderTally(folder: folder, files: row?["files"] ?? 0, uploaded: row?["uploaded"] ?? 0, failed: row?["failed"] ?? 0,
                                   bytes: row?["bytes"] ?? 0, uploadedBytes: row?["uploadedBytes"] ?? 0)
            }
        }
    }

    /// The failed files: newest first with their paths, or counted by why.
    package func failures(named: Bool, limit: Int = 20) async throws -> [FailureRow] {
        try await read { db in
            if named {
                return try Row.fetchAll(db, sql: """
                    SELECT path, coalesce(lastError, 'unknown') AS why FROM file WHERE state = ? ORDER BY updatedAt DESC LIMIT ?
                    """, arguments: [FileState.failed, limit]).map { FailureRow(path: $0["path"], why: $0["why"], count: 1) }
            }
            return try Row.fetchAll(db, sql: """
                SELECT coalesce(lastError, 'unknown') AS why, count(*) AS n FROM file WHERE state = ?
                 GROUP BY why ORDER BY n DESC LIMIT ?
                """, arguments: [FileState.failed, limit]).map { FailureRow(path: nil, why: $0["why"], count: $0["n"]) }
        }
    }
}
