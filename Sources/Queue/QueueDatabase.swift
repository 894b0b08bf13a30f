/// Queue: the persistent upload queue: one SQLite database (GRDB, WAL), its migrations and one transaction per state change.
import Foundation
import GRDB
import PhotolalaCore
import Synchronization

/// The queue database. One writer (GRDB serializes writes), readers in parallel (WAL);
/// every state change is one transaction, so a kill -9 at any instant leaves a
/// consistent file the next start resumes from.
package final class QueueDatabase: Sendable {
    package let path: String
    package let pool: DatabasePool
    /// Wakes the stage that takes rows from the state a change moved them into.
    package let signals = QueueSignals()
    private let writeProblem = Mutex<String?>(nil)
    /// When a transaction last changed a row (what `WALCheckpointer` waits out).
    private let changedAt = Mutex<Date?>(nil)
    /// Writes that changed a row since the open, counted on the writer's queue right after
    /// each commit: an answer read under one count is still the database's while it stands.
    private let changeCount = Atomic<Int>(0)
    /// `counts()` as read under a change count: status asked many times a second (a page,
    /// a script, a benchmark's poll) costs a full pass over the file index each time
    /// otherwise, 11 ms of CPU at 100,000 files (docs/benchmarks.md, "Each status and metrics
    /// answer").
    private let countsRead = Mutex<(changes: Int, counts: QueueCounts)?>(nil)
    private let problemHook = Mutex<(@Sendable (String?) -> Void)?>(nil)
    /// The migrations this open applied to an existing database and how long they took
    /// (nil: none was due, or the file is new): a start that rebuilds a big table says why
    /// it took a while.
    package let migrated: (names: [String], seconds: Double)?
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
            // Statement journals in memory: a statement that may abort halfway (foreign
            // keys, CHECKs) inside a long transaction journals the pages it changes, and
            // past 64 KiB SQLite spilled them to a file in /var/tmp — on a first start,
            // about 20,000 writes a second to a file nobody reads (docs/benchmarks.md).
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            if !db.configuration.readonly { try db.execute(sql: "PRAGMA cache_size = -8192") }
        }
        // Readers stay open once opened: one opened again reopens the WAL, which SQLite
        // running as root chowns, touching the inode and waking a disk that may spin down
        // (issue 25, "disks left asleep"). `releaseMemory` still frees their caches.
        config.persistentReadOnlyConnections = true
        pool = try DatabasePool(path: path, configuration: config)
        #if DEBUG
        if ProcessInfo.processInfo.environment["PHOTOLALAD_TRACE_WRITES"] != nil {
            pool.add(transactionObserver: WriteTrace(), extent: .databaseLifetime)
        }
        #endif
        // A damaged file (truncated, overwritten) can open fine and fail on a later read,
        // and then every state change would fail while the daemon looks healthy: check the
        // whole file now. quick_check reads each page once (about a second per 100 MB).
        let check = try pool.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") }
        guard check == ["ok"] else {
            throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: check.prefix(3).joined(separator: "; "))
        }
        let applied = try pool.read { db in try QueueSchema.migrator.appliedIdentifiers(db) }
        let names = QueueSchema.migrator.migrations.filter { !applied.contains($0) }
        let started = ContinuousClock.now
        try QueueSchema.migrator.migrate(pool)
        let took = ContinuousClock.now - started
        // A new database is not an upgrade.
        migrated = applied.isEmpty || names.isEmpty
            ? nil : (names, Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18)
        // SQLite opens a file it cannot write read-only without a word, and the first
        // state change would fail: find out now, while a clear error can still stop the start.
        try pool.write { db in
            let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
            try db.execute(sql: "PRAGMA user_version = \(version)")
        }
    }


    /// One transaction: every write goes through here, each stage's requests included. A
    /// full disk or an I/O error is remembered (and shown in status) until a write succeeds
    /// again. SQLite rolls the failed transaction back, so the file stays consistent.
    ///
    /// Run on GRDB's writer queue while the caller waits suspended, so the cooperative pool
    /// stays free. A write begun is not cancelled with its caller (GRDB's own `async`
    /// write would roll it back): a stop that cancels a stage still keeps what its step
    /// recorded (an upload given back, the hashes read, the audit's mark).
    @discardableResult
    package func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let pool = self.pool
        let outcome: Result<(T, Bool), any Error> = await Blocking.completion { done in
            pool.asyncWriteWithoutTransaction { db in
                done(Result {
                    let before = db.totalChangesCount
                    var result: T?
                    try db.inTransaction {
                        result = try updates(db)
                        return .commit
                    }
                    let changed = db.totalChangesCount != before
                    // Before any caller hears of the commit.
                    if changed { self.changeCount.add(1, ordering: .releasing) }
                    return (result!, changed)
                })
            }
        }
        do {
            let (result, changed) = try outcome.get()
            if changed {
                changedAt.withLock { $0 = Date() }
                signals.wrote.changed()
            }
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

    /// A read of a consistent snapshot (WAL: never waits for the writer), on one of GRDB's
    /// reader queues while the caller waits suspended; like `write`, not cancelled once begun.
    package func read<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let pool = self.pool
        let outcome: Result<T, any Error> = await Blocking.completion { done in
            pool.asyncRead { db in done(Result { try value(try db.get()) }) }
        }
        return try outcome.get()
    }

    /// A statement outside any transaction (a PRAGMA, a checkpoint) on the writer's queue.
    private func writeWithoutTransaction(_ work: @escaping @Sendable (Database) throws -> Void) async {
        let pool = self.pool
        await Blocking.completion { done in
            pool.asyncWriteWithoutTransaction { db in
                try? work(db)
                done(())
            }
        }
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

    /// For a first scan, which writes tens of megabytes: checkpointing every 4 MB (SQLite's
    /// default) took a third of its time, so it checkpoints every 40 MB while `on`, and
    /// once off copies what it can at once (PASSIVE: never waits for readers). Only then:
    /// a small state directory (the storage suite's 16 MiB) fills up sooner with a big WAL.
    package func bulkWrites(_ on: Bool) async {
        await writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(on ? 10000 : 1000)")
            if !on { try db.checkpoint(.passive) }
        }
    }

    /// When a transaction last changed a row; nil before the first since the start.
    package var lastChange: Date? { changedAt.withLock { $0 } }

    /// Copies what the WAL holds into the database file now (PASSIVE: never waits for
    /// readers), so the pages written are not left for a later checkpoint to write again.
    package func checkpoint() async {
        await writeWithoutTransaction { db in try db.checkpoint(.passive) }
    }

    /// Frees the connections' page caches (the readers stay open): for when the daemon has
    /// nothing to do for a while.
    package func releaseMemory() async {
        // PASSIVE never waits for readers; what it cannot copy now the next one does.
        await writeWithoutTransaction { db in try db.checkpoint(.passive) }
        // Not GRDB's `releaseMemory()`: it holds the reader list's lock while it waits for
        // each reader in turn, and a read begun with `asyncRead` (every `read` here) hands
        // its reader back on that reader's own queue under the same lock, so a read under
        // way hung the release, that read and every read after it for good (issue 30's
        // stalled stages; QueueDatabaseTests). Each connection frees its caches once its
        // current work ends; the writer's turn comes before the empty write awaited here,
        // and an idle reader's at once.
        pool.releaseMemoryEventually()
        await writeWithoutTransaction { _ in }
    }

    /// The last write failure that needs the user (disk full, read-only, I/O error), until a write succeeds.
    package var currentProblem: String? { writeProblem.withLock { $0 } }

    /// `PRAGMA integrity_check` — "ok" when the file is sound.
    package func integrityCheck() async throws -> String {
        try await read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check").joined(separator: "; ") }
    }

    package func counts() async throws -> QueueCounts {
        // Read before the snapshot: a write committed meanwhile makes the next call read again.
        let changes = changeCount.load(ordering: .acquiring)
        if let known = countsRead.withLock({ $0 }), known.changes == changes { return known.counts }
        let counts = try await readCounts()
        countsRead.withLock { known in
            if (known?.changes ?? -1) <= changes { known = (changes, counts) }
        }
        return counts
    }

    private func readCounts() async throws -> QueueCounts {
        try await read { db in
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
                SELECT min(t) FROM (SELECT min(updatedAt) AS t FROM file WHERE state = ?
                  UNION ALL SELECT min(updatedAt) FROM file WHERE state = ?
                  UNION ALL SELECT min(updatedAt) FROM file WHERE state = ?)
                """, arguments: [FileState.pending, FileState.queued, FileState.uploading]).map { Date(timeIntervalSince1970: $0) }
            c.lastUploadAt = try Double.fetchOne(db, sql: "SELECT max(updatedAt) FROM object WHERE state = ?", arguments: [ObjectState.uploaded])
                .map { Date(timeIntervalSince1970: $0) }
            return c
        }
    }

    // MARK: - Settings: small persistent values (what the catalog stage last saw of the
    // catalog, the user's pause)

    /// One setting; nil when unset.
    package func setting(_ key: String) async throws -> String? {
        try await read { db in try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = ?", arguments: [key]) }
    }

    /// Sets (nil: removes) one setting.
    package func setSetting(_ key: String, _ value: String?) async throws {
        try await setSettings([key: value])
    }

    /// Several settings at once, in one transaction (nil removes a key): what the catalog
    /// stage saw, recorded after its marks.
    package func setSettings(_ settings: [String: String?]) async throws {
        try await write { db in try Self.store(settings, in: db) }
    }

    /// Every setting whose key starts with `prefix`.
    package func settings(prefix: String) async throws -> [String: String] {
        try await read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT key, value FROM setting WHERE substr(key, 1, ?) = ?",
                                        arguments: [prefix.count, prefix])
            return Dictionary(rows.map { ($0["key"], $0["value"]) }, uniquingKeysWith: { a, _ in a })
        }
    }

    /// In `db`'s transaction; nil removes a key. A value stored already is not written
    /// again, so a chore that saves what it found changes no page when it found nothing new.
    package static func store(_ settings: [String: String?], in db: Database) throws {
        for (key, value) in settings.sorted(by: { $0.key < $1.key }) {
            if let value {
                try db.execute(sql: """
                    INSERT INTO setting(key, value) VALUES (?, ?)
                    ON CONFLICT(key) DO UPDATE SET value = excluded.value WHERE value IS NOT excluded.value
                    """, arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM setting WHERE key = ?", arguments: [key])
            }
        }
    }

    // MARK: - Where the upload meets the stages around it: objects become `uploaded` (sent by
    // the uploader, found in the bucket by the inventory), and the stages after the
    // upload ask whether originals still wait (thumbnails) or anything is on its way
    // (the manifest). The upload stage's own rows are `Upload.UploadRecords`.

    /// Whether an object is due for upload now: thumbnails wait while originals do.
    package func hasDueObjects(now: Date = Date()) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM object WHERE state = ? AND (nextAttemptAt IS NULL OR nextAttemptAt <= ?))"),
                              arguments: [ObjectState.pending, now.timeIntervalSince1970]) ?? false
        }
    }

    /// Whether any file still waits to be hashed or uploaded: the manifest gathers changes
    /// longer while uploads go on.
    package func hasUploadsInFlight() async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS(SELECT 1 FROM file WHERE state IN (?, ?, ?))"),
                              arguments: [FileState.pending, FileState.queued, FileState.uploading]) ?? false
        }
    }

    /// Found already in the bucket (listed, HEAD, or a 412 on `If-None-Match: *`): nothing
    /// was sent, so no ETag of ours is recorded. Returns how many files became `uploaded`
    /// with it (the metrics count them).
    @discardableResult
    package func markUploaded(md5: String, now: Date = Date()) async throws -> Int {
        let files = try await write { db in try Transitions(db, now: now).moveObject(md5, .uploaded(etag: nil, at: now)).files }
        signals.uploaded.changed()
        return files
    }

    // MARK: - Where the mirror meets ingest: which objects a watched file of this NAS holds
    // (`mirror.include = "others"` copies the rest down).

    /// Of `md5s`, those a file under the watched folders holds (seen, not gone), leaving out
    /// the files below `folder` (the mirror's own copies, when it is inside a watched folder),
    /// with the size of those files.
    package func heldByWatchedFiles(_ md5s: [String], outside folder: String?) async throws -> [String: Int64] {
        guard !md5s.isEmpty else { return [:] }
        let (low, high) = folder.map { Self.keyRange($0 + "/") } ?? ("", "")
        return try await read { db in
            var found: [String: Int64] = [:]
            for chunk in stride(from: 0, to: md5s.count, by: 500).map({ Array(md5s[$0..<min(md5s.count, $0 + 500)]) }) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                for row in try Row.fetchAll(db, sql: """
                    SELECT md5, max(size) AS size FROM file WHERE md5 IN (\(marks)) AND state != ? AND NOT (path >= ? AND path < ?)
                    GROUP BY md5
                    """, arguments: StatementArguments(chunk) + [FileState.gone, low, high]) {
                    found[row["md5"]] = row["size"]
                }
            }
            return found
        }
    }

    // MARK: - Where the inventory meets the other stages: they ask `inventoryPresence(key:)`
    // ("is thumbnails/U/M.jpg there?") and `inventoryListing(prefix:)` (is there a
    // complete listing to trust?), and say what they wrote (`recordStored`). The
    // listing passes themselves are `Inventory.InventoryRecords`.

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


    package func inventoryEntry(key: String) async throws -> InventoryEntry? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT key, size, etag, storageClass, seenAt FROM inventory WHERE key = ?"), arguments: [key])
                .map(Self.entry)
        }
    }

    package func inventoryListing(prefix: String) async throws -> InventoryListing? {
        try await read { db in try Self.listing(db, prefix: prefix) }
    }

    /// Whether `key` is in the bucket as far as the inventory knows: listed (or uploaded by
    /// this daemon), absent from a complete listing of its prefix, or unknown.
    package func inventoryPresence(key: String) async throws -> InventoryPresence {
        try await read { db in
            if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT key, size, etag, storageClass, seenAt FROM inventory WHERE key = ?"),
                                          arguments: [key]) {
                return .present(Self.entry(row))
            }
            let complete = try Self.listing(db, prefix: Self.listingPrefix(ofKey: key))?.isComplete ?? false
            return complete ? .absent : .unknown
        }
    }

    /// Another stage wrote `key` (a thumbnail, a catalog snapshot): the inventory knows it
    /// is there without waiting for the next listing (which would otherwise say `absent`).
    package func recordStored(key: String, size: Int64, etag: String, storageClass: String = "STANDARD", now: Date = Date()) async throws {
        try await write { db in try Self.recordStored(db, key: key, size: size, etag: etag, storageClass: storageClass, now: now) }
    }

    /// The same, in `db`'s transaction.
    package static func recordStored(_ db: Database, key: String, size: Int64, etag: String, storageClass: String, now: Date) throws {
        try db.cachedStatement(sql: """
            INSERT INTO inventory(key, size, etag, storageClass, seenAt) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(key) DO UPDATE SET size = excluded.size, etag = excluded.etag,
              storageClass = excluded.storageClass, seenAt = excluded.seenAt
            """).execute(arguments: [key, size, etag, storageClass, now.timeIntervalSince1970])
    }


    package static func entry(_ row: Row) -> InventoryEntry {
        InventoryEntry(key: row["key"], size: row["size"], etag: row["etag"], storageClass: row["storageClass"],
                       seenAt: Date(timeIntervalSince1970: row["seenAt"]))
    }

    package static func listing(_ db: Database, prefix: String) throws -> InventoryListing? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT state, startedAt, listedAt, objects, seen, failures, lastError, updatedAt FROM inventory_listing WHERE prefix = ?
            """), arguments: [prefix]) else { return nil }
        let date: (String) -> Date? = { name in (row[name] as Double?).map { Date(timeIntervalSince1970: $0) } }
        return InventoryListing(prefix: prefix, state: InventoryListing.State(rawValue: row["state"]) ?? .failed,
                                startedAt: date("startedAt"), listedAt: date("listedAt"), objects: row["objects"],
                                seen: row["seen"], failures: row["failures"], lastError: row["lastError"],
                                updatedAt: date("updatedAt") ?? .distantPast)
    }

    // MARK: - What the CLI lists (`photolalactl queue`) and retries

    /// Files not yet backed up (or only failed ones), newest first, with the total count.
    package func listing(failedOnly: Bool, limit: Int) async throws -> (items: [QueueItem], total: Int) {
        try await read { db in
            // Backed-up files whose photo could not be read for a preview are listed too,
            // with "no preview: why" (they are not failed: the backup is fine).
            let filter = failedOnly ? "f.state = :failed" : """
                (f.state IN (:pending, :queued, :uploading, :failed)
                 OR (f.state = :uploaded AND f.md5 IN (SELECT md5 FROM photo WHERE state = :photoFailed)))
                """
            let states: [String: (any DatabaseValueConvertible)?] = [
                "pending": FileState.pending, "queued": FileState.queued, "uploading": FileState.uploading,
                "failed": FileState.failed, "uploaded": FileState.uploaded, "photoFailed": PhotoState.failed,
            ]
            let total = try Int.fetchOne(db, sql: "SELECT count(*) FROM file f WHERE \(filter)",
                                         arguments: StatementArguments(states)) ?? 0
            let rows = try Row.fetchAll(db, sql: """
                SELECT f.path, f.state, f.size, f.md5, f.updatedAt,
                       max(f.attempts, coalesce(o.attempts, 0)) AS attempts,
                       coalesce(f.lastError, o.lastError,
                                (SELECT 'no preview: ' || p.lastError FROM photo p WHERE p.md5 = f.md5 AND p.state = :photoFailed)) AS lastError
                FROM file f LEFT JOIN object o ON o.md5 = f.md5
                WHERE \(filter) ORDER BY f.updatedAt DESC, f.id DESC LIMIT :limit
                """, arguments: StatementArguments(states.merging(["limit": limit]) { a, _ in a }))
            let items = rows.map { row in
                QueueItem(path: row["path"], state: FileState(rawValue: row["state"]) ?? .pending, size: row["size"],
                          md5: row["md5"], attempts: row["attempts"], lastError: row["lastError"],
                          updatedAt: Date(timeIntervalSince1970: row["updatedAt"]))
            }
            return (items, total)
        }
    }

    /// Puts every failed file back: unreadable ones are read again, rejected uploads are
    /// tried again, and photos without a preview are read again (their attempts start over:
    /// a decoder or library fixed since may read them now). Returns the paths to hash.
    package func retryFailed(now: Date = Date()) async throws -> (files: Int, photos: Int, needHash: [String]) {
        let result: (files: Int, photos: Int, needHash: [String]) = try await write { db in
            let moves = Transitions(db, now: now)
            try moves.moveEveryObject(.retry)
            let (files, needHash) = try moves.retryFailedFiles()
            try db.execute(sql: "UPDATE photo SET state = ?, attempts = 0, nextAttemptAt = NULL, lastError = NULL, updatedAt = ? WHERE state = ?",
                           arguments: [PhotoState.pending, now.timeIntervalSince1970, PhotoState.failed])
            return (files, db.changesCount, needHash)
        }
        if !result.needHash.isEmpty { signals.needsHash.changed() }
        signals.readyToUpload.changed()
        if result.photos > 0 { signals.photosRetried.changed() }
        return result
    }

    // MARK: - What the notifications read

    /// Files that became backed up since `date`, and their bytes: the day's summary
    /// notification. One range of the (state, updatedAt, size) index.
    package func uploadedFiles(since date: Date) async throws -> (files: Int, bytes: Int64) {
        try await read { db in
            let row = try Row.fetchOne(db, sql: """
                SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM file WHERE state = ? AND updatedAt >= ?
                """, arguments: [FileState.uploaded, date.timeIntervalSince1970])
            return (row?["n"] ?? 0, row?["bytes"] ?? 0)
        }
    }
}

/// One row of `photolalactl queue`.
package struct QueueItem: Sendable, Equatable {
    package var path: String
    package var state: FileState
    package var size: Int64
    package var md5: String?
    package var attempts: Int
    package var lastError: String?
    package var updatedAt: Date
}

/// What the inventory knows of one key.
package enum InventoryPresence: Sendable, Equatable {
    /// Listed (or uploaded by this daemon) with this size and ETag.
    case present(InventoryEntry)
    /// A complete listing of its prefix did not have it, and nothing since put it there
    /// as far as this daemon knows.
    case absent
    /// No complete listing of its prefix: ask S3 (HEAD) if it matters.
    case unknown
}

/// The queue counts of `status`, read in one transaction.
package struct QueueCounts: Sendable, Equatable {
    package var pending = 0
    package var uploading = 0
    package var uploaded = 0
    package var failed = 0
    package var pendingBytes: Int64 = 0
    package var uploadingBytes: Int64 = 0
    package var uploadedBytes: Int64 = 0
    /// When the file waiting longest (pending, queued or uploading) last changed state; nil when none waits.
    package var oldestWaitingAt: Date? = nil
    /// When an object last reached S3 (sent, or found there); nil before the first.
    package var lastUploadAt: Date? = nil
    package init() {}
}

#if DEBUG
/// Debug builds, `PHOTOLALAD_TRACE_WRITES` set: each transaction that changed rows is
/// told on standard error (the tables and how many rows, never the values), so the idle
/// test can say which chore wrote when a disk should have stayed asleep. Called on the
/// writer connection only, one transaction at a time.
private final class WriteTrace: TransactionObserver {
    private var changes: [String: Int] = [:]

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { true }

    func databaseDidChange(with event: DatabaseEvent) {
        changes["\(event.kind) \(event.tableName)", default: 0] += 1
    }

    func databaseDidCommit(_ db: Database) {
        defer { changes = [:] }
        guard !changes.isEmpty else { return }
        let what = changes.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")
        FileHandle.standardError.write(Data("\(Date()) SQL write: \(what)\n".utf8))
    }

    func databaseDidRollback(_ db: Database) { changes = [:] }
}
#endif
