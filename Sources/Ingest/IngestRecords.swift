import Foundation
import GRDB
import PhotolalaCore
import Queue
import Watcher

/// A file as the watcher or the scanner saw it.
package struct ObservedFile: Sendable, Equatable {
    package var path: String
    package var identity: FileIdentity
    package init(path: String, identity: FileIdentity) {
        self.path = path
        self.identity = identity
    }
}

/// One directory's complete listing (accepted files only), for `reconcileDirectories`.
package struct DirectoryListing: Sendable, Equatable {
    package var dir: String
    package var files: [ObservedFile]
    package init(dir: String, files: [ObservedFile]) {
        self.dir = dir
        self.files = files
    }

    /// A directory as the scanner listed it.
    init(_ scanned: ScannedDirectory) {
        self.init(dir: scanned.path, files: scanned.files.map {
            ObservedFile(path: $0.path, identity: FileIdentity(device: $0.device, inode: $0.inode, size: $0.size,
                                                                mtimeSec: $0.mtimeSeconds, mtimeNsec: $0.mtimeNanoseconds))
        })
    }
}

/// A file the queue holds as waiting for its hash, with the mtime that says whether it
/// may still be being written.
package struct UnhashedFile: Sendable, Equatable {
    package var id: Int64
    package var path: String
    package var mtimeSec: Int64
    package var mtimeNsec: Int64
    package init(id: Int64, path: String, mtimeSec: Int64, mtimeNsec: Int64) {
        self.id = id
        self.path = path
        self.mtimeSec = mtimeSec
        self.mtimeNsec = mtimeNsec
    }
}

/// A file the hasher read: the identity it had while being read, its MD5, and (from the
/// same read and the same open) its SHA-256 and its owner and mode, which the manifest
/// records.
package struct HashedFile: Sendable, Equatable {
    package var path: String
    package var identity: FileIdentity
    package var md5: String
    /// The 32 bytes of its SHA-256.
    package var sha256: [UInt8]?
    package var owner: FileOwner?
    package init(path: String, identity: FileIdentity, md5: String, sha256: [UInt8]? = nil, owner: FileOwner? = nil) {
        self.path = path
        self.identity = identity
        self.md5 = md5
        self.sha256 = sha256
        self.owner = owner
    }
}

/// The ingest stage's rows (the `file` table, and the `object` a hashed file joins): files
/// seen, hashed, moved and gone. Each call is one transaction, so a crash leaves every
/// file either before or after the change; the states move through the queue's
/// `Transitions`, and the reads that decide which stay here.
extension QueueDatabase {
    /// Records files that exist now. Returns the paths that need hashing: new ones, and
    /// changed ones (whose hash is dropped). A new path whose identity matches a known
    /// hashed file (a rename, a hard link) takes its hash instead of being read again.
    @discardableResult
    package func observe(_ files: [ObservedFile], now: Date = Date()) async throws -> [String] {
        guard !files.isEmpty else { return [] }
        return try await write { db in try Self.observe(files, in: db, now: now).map(\.path) }
    }

    /// The body of `observe`, inside the caller's transaction. `new` are files the caller
    /// just found absent from the queue: they are inserted without looking them up first
    /// (a path that turns up after all takes the long way). A first scan runs this a
    /// hundred thousand times, so the statements are cached and run through the C API.
    private static func observe(_ files: [ObservedFile], new: [ObservedFile] = [], in db: Database, now: Date) throws -> [ObservedFile] {
        let select = try RawStatement(db, "SELECT id, device, inode, size, mtimeSec, mtimeNsec, state, md5 FROM file WHERE path = ?")
        let twin = try RawStatement(db, """
            SELECT md5, id FROM file WHERE inode = ? AND device = ? AND size = ? AND mtimeSec = ? AND mtimeNsec = ?
              AND md5 IS NOT NULL AND id != ? LIMIT 1
            """)
        defer { [select, twin].forEach { $0.reset() } }
        let moves = Transitions(db, now: now)
        var needHash: [ObservedFile] = []

        /// Inserts a file not in the table; false when its path is there after all.
        func insertNew(_ f: ObservedFile) throws -> Bool {
            guard let id = try moves.insertFile(path: f.path, identity: f.identity) else { return false }
            // The same inode, size and mtime already hashed elsewhere: a rename or a hard
            // link made while we were not watching. It takes that hash instead of a read.
            let found = try twin.step(.int(Int64(bitPattern: f.identity.inode)), .int(Int64(bitPattern: f.identity.device)),
                                      .int(f.identity.size), .int(f.identity.mtimeSec), .int(f.identity.mtimeNsec), .int(id))
            let md5 = found ? twin.text(0) : nil
            let twinId = twin.int64(1)
            twin.reset()
            if let md5 {
                try moves.fileAdopts(id: id, md5: md5, size: f.identity.size)
                // The same inode: the same bytes, owner and mode.
                try db.execute(sql: "UPDATE file SET (sha256, uid, gid, mode) = (SELECT sha256, uid, gid, mode FROM file WHERE id = ?) WHERE id = ?",
                               arguments: [twinId, id])
            } else {
                needHash.append(f)
            }
            return true
        }

        var known = files
        for f in new {
            if try !insertNew(f) { known.append(f) }
        }
        for f in known {
            guard try select.step(.text(f.path)) else {
                select.reset()
                _ = try insertNew(f)
                continue
            }
            let id = select.int64(0)
            let identity = FileIdentity(device: UInt64(bitPattern: select.int64(1)), inode: UInt64(bitPattern: select.int64(2)),
                                        size: select.int64(3), mtimeSec: select.int64(4), mtimeNsec: select.int64(5))
            let state = FileState(rawValue: select.text(6) ?? "") ?? .pending
            let md5 = select.text(7)
            select.reset()
            if identity == f.identity && state != .gone {
                if state == .pending { needHash.append(f) }
                continue
            }
            if identity == f.identity, state == .gone, let md5 {
                try moves.fileAdopts(id: id, md5: md5, size: f.identity.size)
                continue
            }
            try moves.fileChanged(id: id, identity: f.identity)
            needHash.append(f)
        }
        return needHash
    }

    /// The id just before the first file waiting for a hash (new, changed, or caught
    /// mid-hash by a crash), or nil when none waits: where `unhashedFiles(after:)` starts.
    /// Found through the state index, so it costs as much as there are files waiting.
    package func unhashedStart() async throws -> Int64? {
        try await read { db in
            try Int64.fetchOne(db, sql: "SELECT min(id) FROM file WHERE state = ?", arguments: [FileState.pending]).map { $0 - 1 }
        }
    }

    /// The next files waiting for a hash after `id`, in id order. Walks the table by id
    /// (the unary `+` keeps the planner off the state index, which would sort every
    /// waiting file on each call): draining a backlog a chunk at a time reads the table
    /// once, however big the backlog.
    package func unhashedFiles(after id: Int64, limit: Int) async throws -> [UnhashedFile] {
        try await read { db in
            let select = try RawStatement(db, """
                SELECT id, path, mtimeSec, mtimeNsec FROM file WHERE id > ? AND +state = ? ORDER BY id LIMIT ?
                """)
            defer { select.reset() }
            var files: [UnhashedFile] = []
            var more = try select.step(.int(id), .text(FileState.pending.rawValue), .int(Int64(limit)))
            while more {
                if let path = select.text(1) {
                    files.append(UnhashedFile(id: select.int64(0), path: path, mtimeSec: select.int64(2), mtimeNsec: select.int64(3)))
                }
                more = try select.next()
            }
            return files
        }
    }

    package enum HashOutcome: Sendable, Equatable {
        /// Queued for upload (or already uploaded: same bytes seen before).
        case recorded(FileState)
        /// The file changed since it was observed; a newer observation will hash it.
        case stale
        /// Not in the queue any more (deleted meanwhile).
        case unknown
    }

    /// Stores a hash if the file is still the one that was read, and links it to its
    /// object (created if these bytes are new). One transaction.
    package func recordHash(path: String, identity: FileIdentity, md5: String, sha256: [UInt8]? = nil, owner: FileOwner? = nil,
                            now: Date = Date()) async throws -> HashOutcome {
        try await recordHashes([HashedFile(path: path, identity: identity, md5: md5, sha256: sha256, owner: owner)], now: now)[0]
    }

    /// `recordHash` for many files in one transaction, in order; one outcome per file. A
    /// scan of thousands of small photos hashes them faster than one commit per file
    /// can keep up with (each commit rewrites every index page it touched into the WAL).
    package func recordHashes(_ files: [HashedFile], now: Date = Date()) async throws -> [HashOutcome] {
        guard !files.isEmpty else { return [] }
        let outcomes = try await write { db in
            let select = try RawStatement(db, "SELECT id, device, inode, size, mtimeSec, mtimeNsec, state FROM file WHERE path = ?")
            defer { select.reset() }
            let moves = Transitions(db, now: now)
            return try files.map { f -> HashOutcome in
                guard try select.step(.text(f.path)) else { return .unknown }
                let id = select.int64(0)
                let known = FileIdentity(device: UInt64(bitPattern: select.int64(1)), inode: UInt64(bitPattern: select.int64(2)),
                                         size: select.int64(3), mtimeSec: select.int64(4), mtimeNsec: select.int64(5))
                let gone = select.text(6) == FileState.gone.rawValue
                select.reset()
                if gone { return .unknown }
                if known != f.identity {
                    // Written again after it was observed: keep the newer identity, it needs hashing again.
                    return .stale
                }
                return .recorded(try moves.fileHashed(id: id, md5: f.md5, size: f.identity.size, sha256: f.sha256, owner: f.owner))
            }
        }
        if outcomes.contains(where: { if case .recorded = $0 { true } else { false } }) {
            signals.readyToUpload.changed()
        }
        return outcomes
    }

    /// A file that cannot be read (permission, I/O error): `failed` with the reason, until `retry`.
    package func recordUnreadable(path: String, reason: String, now: Date = Date()) async throws {
        try await write { db in try Transitions(db, now: now).fileUnreadable(path: path, reason: reason) }
    }

    /// A file (or a whole directory) left the tree.
    package func markGone(path: String, now: Date = Date()) async throws {
        try await write { db in try Transitions(db, now: now).subtreeGone(path: path) }
    }

    /// A directory renamed inside the tree: its files keep their hashes and states.
    package func renameDirectory(from old: String, to new: String, now: Date = Date()) async throws {
        let (oldLo, oldHi) = Self.subtreeRange(old)
        let (newLo, newHi) = Self.subtreeRange(new)
        let oldBase = old == "/" ? "" : old
        let newBase = new == "/" ? "" : new
        try await write { db in
            // Rows already at the destination are stale leftovers: the rename replaced them.
            try db.execute(sql: "DELETE FROM file WHERE path >= ? AND path < ?", arguments: [newLo, newHi])
            try db.execute(sql: """
                UPDATE file SET path = ? || substr(path, ?), dir = ? || substr(dir, ?), updatedAt = ?
                WHERE path >= ? AND path < ?
                """, arguments: [newBase, oldBase.utf8.count + 1, newBase, oldBase.utf8.count + 1, now.timeIntervalSince1970, oldLo, oldHi])
        }
    }

    /// A file renamed inside the tree (a paired move): it keeps its hash and state.
    package func renameFile(from old: String, to new: String, now: Date = Date()) async throws -> Bool {
        try await write { db in
            guard try Int64.fetchOne(db, sql: "SELECT id FROM file WHERE path = ? AND state != ?", arguments: [old, FileState.gone]) != nil else {
                return false
            }
            try db.execute(sql: "DELETE FROM file WHERE path = ?", arguments: [new])
            try db.execute(sql: "UPDATE file SET path = ?, dir = ?, updatedAt = ? WHERE path = ?",
                           arguments: [new, PathNames.parent(of: new), now.timeIntervalSince1970, old])
            return true
        }
    }

    /// Compares one directory's listing with the queue: returns what needs hashing, and
    /// marks gone the files the directory no longer holds. Unchanged files cost no write.
    package func reconcileDirectory(_ dir: String, files: [ObservedFile], now: Date = Date()) async throws -> [String] {
        try await reconcileDirectories([DirectoryListing(dir: dir, files: files)], now: now).map(\.path)
    }

    /// `reconcileDirectory` for a batch of listings: one read transaction for all of them
    /// and, only if something changed, one write transaction. A scan hands over about a
    /// thousand files at a time; per-directory transactions (two each) cost more than the
    /// listing itself. Returns the files to hash as listed (their identity says how
    /// recently they were written).
    ///
    /// `firstScan`: the queue knew nothing under the scanned root when the scan began, so
    /// no directory is looked up (a file that events recorded meanwhile is found by its
    /// insert, which then takes the long way).
    package func reconcileDirectories(_ listings: [DirectoryListing], firstScan: Bool = false, now: Date = Date()) async throws -> [ObservedFile] {
        guard !listings.isEmpty else { return [] }
        let known: [[String: (FileIdentity, FileState)]] = firstScan ? listings.map { _ in [:] } : try await read { db in
            let select = try RawStatement(db, "SELECT path, device, inode, size, mtimeSec, mtimeNsec, state FROM file WHERE dir = ?")
            defer { select.reset() }
            return try listings.map { listing in
                var map: [String: (FileIdentity, FileState)] = [:]
                var more = try select.step(.text(listing.dir))
                while more {
                    if let path = select.text(0) {
                        map[path] = (FileIdentity(device: UInt64(bitPattern: select.int64(1)), inode: UInt64(bitPattern: select.int64(2)),
                                                  size: select.int64(3), mtimeSec: select.int64(4), mtimeNsec: select.int64(5)),
                                     FileState(rawValue: select.text(6) ?? "") ?? .pending)
                    }
                    more = try select.next()
                }
                return map
            }
        }
        var new: [ObservedFile] = []
        var changed: [ObservedFile] = []
        var needHash: [ObservedFile] = []
        var vanished: [String] = []
        for (listing, known) in zip(listings, known) {
            var present = Set<String>(minimumCapacity: known.isEmpty ? 0 : listing.files.count)
            for f in listing.files {
                guard let (identity, state) = known[f.path] else {
                    new.append(f)
                    continue
                }
                present.insert(f.path)
                if identity == f.identity, state != .gone {
                    if state == .pending { needHash.append(f) }
                } else {
                    changed.append(f)
                }
            }
            vanished += known.filter { !present.contains($0.key) && $0.value.1 != .gone }.map(\.key)
        }
        guard !new.isEmpty || !changed.isEmpty || !vanished.isEmpty else { return needHash }
        let (fresh, altered, gone) = (new, changed, vanished)
        return needHash + (try await write { db in
            let moves = Transitions(db, now: now)
            for path in gone { try moves.fileGone(path: path) }
            return try Self.observe(altered, new: fresh, in: db, now: now)
        })
    }

    /// Whether the queue holds any present file under `dir` (or in it): a scan of a folder
    /// it knew nothing of can find nothing gone, and skips the sweep.
    package func knowsFiles(under dir: String) async throws -> Bool {
        let (lo, hi) = Self.subtreeRange(dir)
        return try await read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM file WHERE (dir = ? OR (dir >= ? AND dir < ?)) AND state != ?)",
                              arguments: [dir, lo, hi, FileState.gone]) ?? false
        }
    }

    /// After a complete scan of `root`: directories the queue knows under it that the
    /// scan did not visit are gone, with their files.
    package func sweepDirectories(under root: String, visited: Set<String>, excluding blind: [String] = [], now: Date = Date()) async throws -> Int {
        let (lo, hi) = Self.subtreeRange(root)
        let dirs = try await read { db in
            try String.fetchAll(db, sql: "SELECT DISTINCT dir FROM file WHERE (dir = ? OR (dir >= ? AND dir < ?)) AND state != ?",
                                arguments: [root, lo, hi, FileState.gone])
        }
        var swept = 0
        for dir in dirs where !visited.contains(dir) && !blind.contains(where: { dir == $0 || dir.hasPrefix($0 + "/") }) {
            swept += try await write { db in try Transitions(db, now: now).directoryGone(dir) }
        }
        return swept
    }
}

/// One file as `photolalactl files` shows it: where it stands and, once backed up, when.
package struct FileRecord: Sendable, Equatable {
    package var path: String
    package var state: FileState
    package var size: Int64
    package var md5: String?
    /// When its object went up (or was found in the bucket); nil until it is uploaded.
    package var uploadedAt: Date?
    package var lastError: String?
    package var updatedAt: Date

    package init(path: String, state: FileState, size: Int64, md5: String?, uploadedAt: Date?, lastError: String?, updatedAt: Date) {
        self.path = path
        self.state = state
        self.size = size
        self.md5 = md5
        self.uploadedAt = uploadedAt
        self.lastError = lastError
        self.updatedAt = updatedAt
    }
}

/// `photolalactl files`: "is this backed up?" for a file or everything under a folder,
/// a page at a time in path order.
extension QueueDatabase {
    /// The file at `path` itself (only on the first page, `after` nil: even one deleted
    /// since), then the files under it as a folder that are still there, in byte order
    /// after `after`, at most `limit` in all.
    package func files(at path: String, after: String?, limit: Int) async throws -> [FileRecord] {
        try await read { db in
            let select = """
                SELECT f.path, f.state, f.size, f.md5, f.updatedAt, coalesce(f.lastError, o.lastError) AS lastError,
                       CASE WHEN f.state = :uploaded THEN o.uploadedAt END AS uploadedAt
                FROM file f LEFT JOIN object o ON o.md5 = f.md5
                """
            var records: [FileRecord] = []
            if after == nil, let row = try Row.fetchOne(db, sql: select + " WHERE f.path = :path",
                                                        arguments: ["uploaded": FileState.uploaded, "path": path]) {
                records.append(Self.record(row))
            }
            let (low, high) = Self.subtreeRange(path)
            let rows = try Row.fetchAll(db, sql: select + """
                 WHERE f.path > :low AND f.path < :high AND f.state != :gone ORDER BY f.path LIMIT :limit
                """, arguments: ["uploaded": FileState.uploaded, "low": max(low, after ?? ""), "high": high, "gone": FileState.gone,
                                 "limit": max(0, limit - records.count)])
            return records + rows.map(Self.record)
        }
    }

    static func record(_ row: Row) -> FileRecord {
        FileRecord(path: row["path"], state: FileState(rawValue: row["state"]) ?? .pending, size: row["size"], md5: row["md5"],
                   uploadedAt: (row["uploadedAt"] as Double?).map { Date(timeIntervalSince1970: $0) },
                   lastError: row["lastError"], updatedAt: Date(timeIntervalSince1970: row["updatedAt"]))
    }
}
