/// Queue: the persistent upload queue: one SQLite database (GRDB, WAL), its migrations and one transaction per state change.
import Foundation
import GRDB
import Synchronization

/// The queue database. One writer (GRDB serializes writes), readers in parallel (WAL);
/// every state change is one transaction, so a kill -9 at any instant leaves a
/// consistent file the next start resumes from.
package final class QueueDatabase: Sendable {
    package let path: String
    let pool: DatabasePool
    /// Wakes the stage that takes rows from the state a change moved them into.
    package let signals = QueueSignals()
    private let writeProblem = Mutex<String?>(nil)
    private let problemHook = Mutex<(@Sendable (String?) -> Void)?>(nil)
    /// The free space below which a "disk full" stays reported even when a small write
    /// gets through (a commit can reuse WAL space that a bigger one cannot).
    static let freeSpaceToClearDiskFull: UInt64 = 1 << 20

    package enum OpenError: Error, CustomStringConvertible {
        case unusable(path: String, underlying: String, quarantinedTo: String?)
        case readOnly(path: String, underlying: String)
        package var description: String {
            switch self {
            case let .unusable(path, underlying, q):
                if let q {
                    return "the queue database \(path) was damaged (\(underlying)); it was moved aside to \(q) and a new one was created — the next scan re-queues every file"
                }
                return "cannot open the queue database \(path): \(underlying)"
            case let .readOnly(path, underlying):
                return "the queue database \(path) cannot be written (\(underlying)); check that the file and \(URL(fileURLWithPath: path).deletingLastPathComponent().path) are writable by the daemon's user"
            }
        }
    }

    /// Opens (creating if needed) and migrates. A damaged file is moved aside and replaced,
    /// never silently reused: the watched folders are the truth and a scan rebuilds the queue.
    /// `onQuarantine` is told where the damaged file went.
    package static func open(path: String, onQuarantine: (String, String) -> Void = { _, _ in }) throws -> QueueDatabase {
        do {
            return try QueueDatabase(path: path)
        } catch let error as DatabaseError where [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode) {
            let stamp = Int(Date().timeIntervalSince1970)
            let aside = "\(path).damaged-\(stamp)"
            let fm = FileManager.default
            try? fm.moveItem(atPath: path, toPath: aside)
            for suffix in ["-wal", "-shm"] { try? fm.removeItem(atPath: path + suffix) }
            onQuarantine(aside, "\(error.resultCode)")
            return try QueueDatabase(path: path)
        } catch let error as DatabaseError where [.SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM].contains(error.resultCode) {
            throw OpenError.readOnly(path: path, underlying: error.message ?? "\(error.resultCode)")
        }
    }

    init(path: String) throws {
        self.path = path
        var config = Configuration()
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            // WAL + NORMAL: durable across a process crash; a power cut may lose the last
            // commits, which the next scan re-discovers. FULL would fsync every transaction.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // A WAL grown by a first scan (see `bulkWrites`) shrinks back to 4 MB once reset.
            try db.execute(sql: "PRAGMA journal_size_limit = 4194304")
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            #if DEBUG
            if ProcessInfo.processInfo.environment["PHOTOLALAD_TRACE_WRITES"] != nil { Self.traceWrites(db) }
            #endif
        }
        pool = try DatabasePool(path: path, configuration: config)
        // A damaged file (truncated, overwritten) can open fine and fail on a later read,
        // and then every state change would fail while the daemon looks healthy: check the
        // whole file now. quick_check reads each page once (about a second per 100 MB).
        let check = try pool.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") }
        guard check == ["ok"] else {
            throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: check.prefix(3).joined(separator: "; "))
        }
        try QueueSchema.migrator.migrate(pool)
        // SQLite opens a file it cannot write read-only without a word, and the first
        // state change would fail: find out now, while a clear error can still stop the start.
        try pool.write { db in
            let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
            try db.execute(sql: "PRAGMA user_version = \(version)")
        }
    }

    #if DEBUG
    /// Debug builds, `PHOTOLALAD_TRACE_WRITES` set: every statement that may write is
    /// printed on standard error (without its arguments), so the idle test can say which
    /// chore wrote when a disk should have stayed asleep.
    private static func traceWrites(_ db: Database) {
        db.trace(options: .statement) { event in
            guard case .statement(let statement) = event else { return }
            let sql = statement.sql
            let head = sql.prefix(16).uppercased()
            let reads = ["SELECT", "BEGIN DEFERRED", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"]
            guard !reads.contains(where: head.hasPrefix), !(head.hasPrefix("PRAGMA") && !sql.contains("=")) else { return }
            FileHandle.standardError.write(Data("SQL write: \(sql.prefix(200))\n".utf8))
        }
    }
    #endif

    /// One transaction: every write goes through here, each stage's requests included. A
    /// full disk or an I/O error is remembered (and shown in status) until a write succeeds
    /// again. SQLite rolls the failed transaction back, so the file stays consistent.
    package func write<T>(_ updates: (Database) throws -> T) throws -> T {
        do {
            let result = try pool.write(updates)
            if writeProblem.withLock({ $0 }) != nil, !diskStillFull() { report(nil) }
            return result
        } catch let error as DatabaseError {
            let message: String?
            switch error.resultCode {
            case .SQLITE_FULL: message = "disk full: the queue database (\(path)) cannot grow; free space on that disk — the daemon retries by itself"
            case .SQLITE_IOERR: message = "I/O error writing the queue database (\(path)): \(error.message ?? "")"
            case .SQLITE_READONLY: message = "the queue database (\(path)) is read-only: check its permissions"
            case .SQLITE_CORRUPT, .SQLITE_NOTADB:
                message = "the queue database (\(path)) is damaged: restart photolalad (systemctl restart photolalad) — it sets the file aside and rebuilds the queue from a scan"
            default: message = nil
            }
            if let message { report(message) }
            throw error
        }
    }

    /// A read of a consistent snapshot (WAL: never waits for the writer).
    package func read<T>(_ value: (Database) throws -> T) throws -> T {
        try pool.read(value)
    }

    /// Told (once per change) when a write problem starts or ends: the daemon logs it.
    package func onProblem(_ hook: @escaping @Sendable (String?) -> Void) {
        problemHook.withLock { $0 = hook }
    }

    private func report(_ problem: String?) {
        let changed = writeProblem.withLock { current in
            defer { current = problem }
            return current != problem
        }
        if changed, let hook = problemHook.withLock({ $0 }) { hook(problem) }
    }

    /// While "disk full" is reported: whether the disk still has next to no room.
    private func diskStillFull() -> Bool {
        guard writeProblem.withLock({ $0?.hasPrefix("disk full") }) == true else { return false }
        var fs = statvfs()
        let dir = (path as NSString).deletingLastPathComponent
        guard statvfs(dir, &fs) == 0 else { return false }
        return UInt64(fs.f_bavail) * UInt64(fs.f_frsize) < Self.freeSpaceToClearDiskFull
    }

    /// Frees the connections' page caches and closes idle readers (they reopen on use):
    /// for when the daemon has nothing to do for a while.
    /// For a first scan, which writes tens of megabytes: checkpointing every 4 MB (SQLite's
    /// default) took a third of its time, so it checkpoints every 40 MB while `on`, and
    /// once off copies what it can at once (PASSIVE: never waits for readers). Only then:
    /// a small state directory (the storage suite's 16 MiB) fills up sooner with a big WAL.
    package func bulkWrites(_ on: Bool) {
        _ = try? pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(on ? 10000 : 1000)")
            if !on { try db.checkpoint(.passive) }
        }
    }

    package func releaseMemory() {
        // PASSIVE never waits for readers; what it cannot copy now the next one does.
        _ = try? pool.writeWithoutTransaction { db in try db.checkpoint(.passive) }
        pool.releaseMemory()
    }

    /// The last write failure that needs the user (disk full, read-only, I/O error), until a write succeeds.
    package var currentProblem: String? { writeProblem.withLock { $0 } }

    /// `PRAGMA integrity_check` — "ok" when the file is sound.
    package func integrityCheck() throws -> String {
        try pool.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check").joined(separator: "; ") }
    }

    package func counts() throws -> QueueCounts {
        try pool.read { db in
            var c = QueueCounts()
            let rows = try Row.fetchAll(db, sql: "SELECT state, count(*) AS n, coalesce(sum(size), 0) AS bytes FROM file GROUP BY state")
            for row in rows {
                let n: Int = row["n"]
                let bytes: Int64 = row["bytes"]
                switch FileState(rawValue: row["state"]) {
                case .pending, .queued: c.pending += n; c.pendingBytes += bytes
                case .uploading: c.uploading += n; c.uploadingBytes += bytes
                case .uploaded: c.uploaded += n; c.uploadedBytes += bytes
                case .failed: c.failed += n
                case .gone, .none: break
                }
            }
            // One seek per state on (state, updatedAt): a UNION of three min()s, because
            // SQLite answers min() from an index only under an equality on `state`.
            c.oldestWaitingAt = try Double.fetchOne(db, sql: """
                SELECT min(t) FROM (SELECT min(updatedAt) AS t FROM file WHERE state = 'pending'
                  UNION ALL SELECT min(updatedAt) FROM file WHERE state = 'queued'
                  UNION ALL SELECT min(updatedAt) FROM file WHERE state = 'uploading')
                """).map { Date(timeIntervalSince1970: $0) }
            c.lastUploadAt = try Double.fetchOne(db, sql: "SELECT max(updatedAt) FROM object WHERE state = 'uploaded'")
                .map { Date(timeIntervalSince1970: $0) }
            return c
        }
    }
}
