import Foundation
import GRDB
import PhotolalaCore
import Queue

/// A photo the thumbnail stage reads next: its content address and the live files that
/// hold those bytes (newest first), any of which will do.
package struct PhotoJob: Sendable, Equatable {
    package struct Source: Sendable, Equatable {
        package var path: String
        package var identity: FileIdentity

        package init(path: String, identity: FileIdentity) {
            self.path = path
            self.identity = identity
        }
    }
    package var md5: String
    package var attempts: Int
    package var sources: [Source]
}

/// What the apps need of a photo, as the thumbnail stage found it (app-catalog.md's columns).
package struct PhotoColumns: Sendable, Equatable {
    package var headMD5: String
    package var size: Int64
    /// The catalog's `format` value (`JPEG`, `RAW-CR2`, …), or for skipped files what they were.
    package var format: String
    package init(headMD5: String, size: Int64, format: String) {
        self.headMD5 = headMD5
        self.size = size
        self.format = format
    }
}

/// How many photos are in each state, and how many uploaded objects have no row yet.
package struct PhotoCounts: Sendable, Equatable {
    package var ready = 0
    package var pending = 0
    package var failed = 0
    package var skipped = 0
    package var unseen = 0
    package init() {}
}

/// The thumbnail stage's rows, the `photo` table (schema v3-photos): a `pending` row for
/// each uploaded object, moved to `ready`, `failed` or `skipped`, one transaction per step.
extension QueueDatabase {
    /// Makes a `pending` row for every uploaded object without one among the objects with
    /// rowid in (`after`, `after + window`]. Returns the last rowid covered and whether
    /// that was the end of the table.
    package func seedPhotos(after rowid: Int64, window: Int64 = 5000, now: Date = Date()) async throws -> (last: Int64, atEnd: Bool) {
        try await write { db in
            let end = rowid + window
            try db.execute(sql: """
                INSERT OR IGNORE INTO photo(md5, state, updatedAt)
                SELECT md5, ?, ? FROM object WHERE rowid > ? AND rowid <= ? AND state = ?
                """, arguments: [PhotoState.pending, now.timeIntervalSince1970, rowid, end, ObjectState.uploaded])
            let top = try Int64.fetchOne(db, sql: "SELECT max(rowid) FROM object") ?? 0
            return (end, end >= top)
        }
    }

    /// Rows due for reading, oldest first, with the live files of each.
    package func duePhotos(excluding busy: Set<String>, limit: Int, now: Date = Date()) async throws -> [PhotoJob] {
        try await read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT md5, attempts FROM photo WHERE state = ? AND (nextAttemptAt IS NULL OR nextAttemptAt <= ?)
                ORDER BY nextAttemptAt LIMIT ?
                """, arguments: [PhotoState.pending, now.timeIntervalSince1970, limit + busy.count])
            var jobs: [PhotoJob] = []
            for row in rows {
                let md5: String = row["md5"]
                if busy.contains(md5) { continue }
                let sources = try Row.fetchAll(db, sql: """
                    SELECT path, device, inode, size, mtimeSec, mtimeNsec FROM file
                    WHERE md5 = ? AND state = ? ORDER BY updatedAt DESC LIMIT 4
                    """, arguments: [md5, FileState.uploaded]).map { f in
                    PhotoJob.Source(path: f["path"], identity: FileIdentity(
                        device: UInt64(bitPattern: f["device"]), inode: UInt64(bitPattern: f["inode"]),
                        size: f["size"], mtimeSec: f["mtimeSec"], mtimeNsec: f["mtimeNsec"]))
                }
                jobs.append(PhotoJob(md5: md5, attempts: row["attempts"], sources: sources))
                if jobs.count == limit { break }
            }
            return jobs
        }
    }

    /// When the next postponed row becomes due (nil: none waits on a timer).
    package func nextPhotoDueTime(now: Date = Date()) async throws -> Date? {
        try await read { db in
            try Double.fetchOne(db.cachedStatement(sql: "SELECT min(nextAttemptAt) FROM photo WHERE state = ? AND nextAttemptAt > ?"),
                                arguments: [PhotoState.pending, now.timeIntervalSince1970]).map { Date(timeIntervalSince1970: $0) }
        }
    }

    /// The thumbnail is in the bucket and the columns are known: the catalog stage may publish it.
    package func markPhotoReady(md5: String, columns: PhotoColumns, takenAt: Int64, now: Date = Date()) async throws {
        try await finishPhoto(md5: md5, state: .ready, columns: columns, takenAt: takenAt, error: nil, now: now)
        signals.photosReady.changed()
    }

    /// A format the apps do not show: backed up, no thumbnail, no row.
    package func markPhotoSkipped(md5: String, columns: PhotoColumns, now: Date = Date()) async throws {
        try await finishPhoto(md5: md5, state: .skipped, columns: columns, takenAt: nil, error: nil, now: now)
    }

    /// Could not be read for a preview: backed up, no thumbnail, no row; `reason` says why.
    package func markPhotoFailed(md5: String, columns: PhotoColumns?, reason: String, now: Date = Date()) async throws {
        try await finishPhoto(md5: md5, state: .failed, columns: columns, takenAt: nil, error: reason, now: now)
    }

    /// Tried again at `until` (S3 unreachable, no credentials, the file in flux).
    package func postponePhoto(md5: String, until: Date, error: String?, countAttempt: Bool, now: Date = Date()) async throws {
        try await write { db in
            try db.execute(sql: """
                UPDATE photo SET nextAttemptAt = ?, lastError = coalesce(?, lastError), attempts = attempts + ?, updatedAt = ?
                WHERE md5 = ? AND state = ?
                """, arguments: [until.timeIntervalSince1970, error, countAttempt ? 1 : 0, now.timeIntervalSince1970, md5, PhotoState.pending])
        }
    }

    private func finishPhoto(md5: String, state: PhotoState, columns: PhotoColumns?, takenAt: Int64?, error: String?, now: Date) async throws {
        try await write { db in
            try db.execute(sql: """
                UPDATE photo SET state = ?, headMD5 = ?, size = ?, format = ?, takenAt = ?, lastError = ?,
                  attempts = attempts + ?, nextAttemptAt = NULL, updatedAt = ? WHERE md5 = ?
                """, arguments: [state, columns?.headMD5, columns?.size, columns?.format, takenAt, error,
                                 state == .failed ? 1 : 0, now.timeIntervalSince1970, md5])
        }
    }

    package func photoCounts() async throws -> PhotoCounts {
        try await read { db in
            var c = PhotoCounts()
            var rows = 0
            for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT state, count(*) AS n FROM photo GROUP BY state")) {
                let n: Int = row["n"]
                rows += n
                switch PhotoState(rawValue: row["state"]) {
                case .ready: c.ready = n
                case .pending: c.pending = n
                case .failed: c.failed = n
                case .skipped: c.skipped = n
                case nil: break
                }
            }
            let uploaded = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM object WHERE state = ?"), arguments: [ObjectState.uploaded]) ?? 0
            c.unseen = max(0, uploaded - rows)
            return c
        }
    }
}
