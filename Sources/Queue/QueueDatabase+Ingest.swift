import Foundation
import GRDB
import PhotolalaCore

/// A file as the watcher or the scanner saw it.
public struct ObservedFile: Sendable, Equatable {
    public var path: String
    public var identity: FileIdentity
    public init(path: String, identity: FileIdentity) {
        self.path = path
        self.identity = identity
    }
}

/// The ingest side of the queue: files seen, hashed, moved and gone. Each call is one
/// transaction, so a crash leaves every file either before or after the change.
extension QueueDatabase {
    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Upper bound of the paths strictly under `dir` in byte order ('/' + 1 is '0'), so the
    /// UNIQUE index answers "everything below" without LIKE and its wildcards.
    static func subtreeRange(_ dir: String) -> (String, String) {
        let base = dir == "/" ? "" : dir
        return (base + "/", base + "0")
    }

    /// Records files that exist now. Returns the paths that need hashing: new ones, and
    /// changed ones (whose hash is dropped). A new path whose identity matches a known
    /// hashed file (a rename, a hard link) takes its hash instead of being read again.
    @discardableResult
    public func observe(_ files: [ObservedFile], now: Date = Date()) throws -> [String] {
        guard !files.isEmpty else { return [] }
        return try write { db in
            var needHash: [String] = []
            for f in files {
                if let row = try Row.fetchOne(db, sql: "SELECT id, device, inode, size, mtimeSec, mtimeNsec, state, md5 FROM file WHERE path = ?", arguments: [f.path]) {
                    let known = FileIdentity(device: UInt64(bitPattern: row["device"]), inode: UInt64(bitPattern: row["inode"]),
                                             size: row["size"], mtimeSec: row["mtimeSec"], mtimeNsec: row["mtimeNsec"])
                    let state = FileState(rawValue: row["state"]) ?? .pending
                    if known == f.identity && state != .gone {
                        if state == .pending || state == .hashing { needHash.append(f.path) }
                        continue
                    }
                    if known == f.identity, state == .gone, let md5: String = row["md5"] {
                        try adopt(db, id: row["id"], md5: md5, now: now)
                        continue
                    }
                    try db.execute(sql: """
                        UPDATE file SET device = ?, inode = ?, size = ?, mtimeSec = ?, mtimeNsec = ?, md5 = NULL,
                          state = 'pending', attempts = 0, nextAttemptAt = NULL, lastError = NULL, updatedAt = ?
                        WHERE id = ?
                        """, arguments: [Int64(bitPattern: f.identity.device), Int64(bitPattern: f.identity.inode), f.identity.size,
                                         f.identity.mtimeSec, f.identity.mtimeNsec, now.timeIntervalSince1970, row["id"] as Int64])
                    needHash.append(f.path)
                    continue
                }
                try db.execute(sql: """
                    INSERT INTO file(path, dir, device, inode, size, mtimeSec, mtimeNsec, state, updatedAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?)
                    """, arguments: [f.path, Self.parent(of: f.path), Int64(bitPattern: f.identity.device), Int64(bitPattern: f.identity.inode),
                                     f.identity.size, f.identity.mtimeSec, f.identity.mtimeNsec, now.timeIntervalSince1970])
                let id = db.lastInsertedRowID
                if let twin = try String.fetchOne(db, sql: """
                    SELECT md5 FROM file WHERE inode = ? AND device = ? AND size = ? AND mtimeSec = ? AND mtimeNsec = ?
                      AND md5 IS NOT NULL AND id != ? LIMIT 1
                    """, arguments: [Int64(bitPattern: f.identity.inode), Int64(bitPattern: f.identity.device), f.identity.size,
                                     f.identity.mtimeSec, f.identity.mtimeNsec, id]) {
                    try adopt(db, id: id, md5: twin, now: now)
                } else {
                    needHash.append(f.path)
                }
            }
            return needHash
        }
    }

    /// Gives a file a known hash and the state of its object.
    private func adopt(_ db: Database, id: Int64, md5: String, now: Date) throws {
        let objectState = try String.fetchOne(db, sql: "SELECT state FROM object WHERE md5 = ?", arguments: [md5]).flatMap(ObjectState.init)
        let fileState = Self.fileState(for: objectState ?? .pending)
        if objectState == nil {
            let size = try Int64.fetchOne(db, sql: "SELECT size FROM file WHERE id = ?", arguments: [id]) ?? 0
            try db.execute(sql: "INSERT INTO object(md5, size, state, updatedAt) VALUES (?, ?, 'pending', ?)", arguments: [md5, size, now.timeIntervalSince1970])
        }
        try db.execute(sql: "UPDATE file SET md5 = ?, state = ?, lastError = NULL, updatedAt = ? WHERE id = ?",
                       arguments: [md5, fileState.rawValue, now.timeIntervalSince1970, id])
    }

    static func fileState(for object: ObjectState) -> FileState {
        switch object {
        case .pending: .queued
        case .uploading: .uploading
        case .uploaded: .uploaded
        case .failed: .failed
        }
    }

    /// Files waiting for a hash (new, changed, or caught mid-hash by a crash).
    public func pathsNeedingHash(limit: Int = 10_000) throws -> [String] {
        try pool.read { db in
            try String.fetchAll(db, sql: "SELECT path FROM file WHERE state IN ('pending', 'hashing') ORDER BY id LIMIT ?", arguments: [limit])
        }
    }

    public enum HashOutcome: Sendable, Equatable {
        /// Queued for upload (or already uploaded: same bytes seen before).
        case recorded(FileState)
        /// The file changed since it was observed; a newer observation will hash it.
        case stale
        /// Not in the queue any more (deleted meanwhile).
        case unknown
    }

    /// Stores a hash if the file is still the one that was read, and links it to its
    /// object (created if these bytes are new). One transaction.
    public func recordHash(path: String, identity: FileIdentity, md5: String, now: Date = Date()) throws -> HashOutcome {
        try write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT id, device, inode, size, mtimeSec, mtimeNsec, state FROM file WHERE path = ?", arguments: [path]) else {
                return .unknown
            }
            let known = FileIdentity(device: UInt64(bitPattern: row["device"]), inode: UInt64(bitPattern: row["inode"]),
                                     size: row["size"], mtimeSec: row["mtimeSec"], mtimeNsec: row["mtimeNsec"])
            if (row["state"] as String) == FileState.gone.rawValue { return .unknown }
            let id: Int64 = row["id"]
            if known != identity {
                // Written again after it was observed: keep the newer identity, it needs hashing again.
                return .stale
            }
            let objectState = try String.fetchOne(db, sql: "SELECT state FROM object WHERE md5 = ?", arguments: [md5]).flatMap(ObjectState.init)
            if objectState == nil {
                try db.execute(sql: "INSERT INTO object(md5, size, state, updatedAt) VALUES (?, ?, 'pending', ?)",
                               arguments: [md5, identity.size, now.timeIntervalSince1970])
            }
            let state = Self.fileState(for: objectState ?? .pending)
            try db.execute(sql: "UPDATE file SET md5 = ?, state = ?, attempts = 0, lastError = NULL, nextAttemptAt = NULL, updatedAt = ? WHERE id = ?",
                           arguments: [md5, state.rawValue, now.timeIntervalSince1970, id])
            return .recorded(state)
        }
    }

    /// A file that cannot be read (permission, I/O error): `failed` with the reason, until `retry`.
    public func recordUnreadable(path: String, reason: String, now: Date = Date()) throws {
        try write { db in
            try db.execute(sql: "UPDATE file SET state = 'failed', attempts = attempts + 1, lastError = ?, updatedAt = ? WHERE path = ? AND state != 'gone'",
                           arguments: [reason, now.timeIntervalSince1970, path])
        }
    }

    /// A file (or a whole directory) left the tree.
    public func markGone(path: String, now: Date = Date()) throws {
        let (lo, hi) = Self.subtreeRange(path)
        try write { db in
            try db.execute(sql: "UPDATE file SET state = 'gone', updatedAt = ? WHERE (path = ? OR (path >= ? AND path < ?)) AND state != 'gone'",
                           arguments: [now.timeIntervalSince1970, path, lo, hi])
        }
    }

    /// A directory renamed inside the tree: its files keep their hashes and states.
    public func renameDirectory(from old: String, to new: String, now: Date = Date()) throws {
        let (oldLo, oldHi) = Self.subtreeRange(old)
        let (newLo, newHi) = Self.subtreeRange(new)
        let oldBase = old == "/" ? "" : old
        let newBase = new == "/" ? "" : new
        try write { db in
            // Rows already at the destination are stale leftovers: the rename replaced them.
            try db.execute(sql: "DELETE FROM file WHERE path >= ? AND path < ?", arguments: [newLo, newHi])
            try db.execute(sql: """
                UPDATE file SET path = ? || substr(path, ?), dir = ? || substr(dir, ?), updatedAt = ?
                WHERE path >= ? AND path < ?
                """, arguments: [newBase, oldBase.utf8.count + 1, newBase, oldBase.utf8.count + 1, now.timeIntervalSince1970, oldLo, oldHi])
        }
    }

    /// A file renamed inside the tree (a paired move): it keeps its hash and state.
    public func renameFile(from old: String, to new: String, now: Date = Date()) throws -> Bool {
        try write { db in
            guard try Int64.fetchOne(db, sql: "SELECT id FROM file WHERE path = ? AND state != 'gone'", arguments: [old]) != nil else { return false }
            try db.execute(sql: "DELETE FROM file WHERE path = ?", arguments: [new])
            try db.execute(sql: "UPDATE file SET path = ?, dir = ?, updatedAt = ? WHERE path = ?",
                           arguments: [new, Self.parent(of: new), now.timeIntervalSince1970, old])
            return true
        }
    }

    /// Compares one directory's listing with the queue: returns what needs hashing, and
    /// marks gone the files the directory no longer holds. Unchanged files cost no write.
    public func reconcileDirectory(_ dir: String, files: [ObservedFile], now: Date = Date()) throws -> [String] {
        let known: [String: (FileIdentity, FileState)] = try pool.read { db in
            var map: [String: (FileIdentity, FileState)] = [:]
            let rows = try Row.fetchCursor(db, sql: "SELECT path, device, inode, size, mtimeSec, mtimeNsec, state FROM file WHERE dir = ?", arguments: [dir])
            while let row = try rows.next() {
                map[row["path"]] = (FileIdentity(device: UInt64(bitPattern: row["device"]), inode: UInt64(bitPattern: row["inode"]),
                                                 size: row["size"], mtimeSec: row["mtimeSec"], mtimeNsec: row["mtimeNsec"]),
                                    FileState(rawValue: row["state"]) ?? .pending)
            }
            return map
        }
        var changed: [ObservedFile] = []
        var needHash: [String] = []
        var present = Set<String>()
        for f in files {
            present.insert(f.path)
            if let (identity, state) = known[f.path], identity == f.identity, state != .gone {
                if state == .pending || state == .hashing { needHash.append(f.path) }
            } else {
                changed.append(f)
            }
        }
        let vanished = known.filter { !present.contains($0.key) && $0.value.1 != .gone }.map(\.key)
        if !vanished.isEmpty {
            try write { db in
                for path in vanished {
                    try db.execute(sql: "UPDATE file SET state = 'gone', updatedAt = ? WHERE path = ?", arguments: [now.timeIntervalSince1970, path])
                }
            }
        }
        return needHash + (try observe(changed, now: now))
    }

    /// After a complete scan of `root`: directories the queue knows under it that the
    /// scan did not visit are gone, with their files.
    public func sweepDirectories(under root: String, visited: Set<String>, excluding blind: [String] = [], now: Date = Date()) throws -> Int {
        let (lo, hi) = Self.subtreeRange(root)
        let dirs = try pool.read { db in
            try String.fetchAll(db, sql: "SELECT DISTINCT dir FROM file WHERE (dir = ? OR (dir >= ? AND dir < ?)) AND state != 'gone'", arguments: [root, lo, hi])
        }
        var swept = 0
        for dir in dirs where !visited.contains(dir) && !blind.contains(where: { dir == $0 || dir.hasPrefix($0 + "/") }) {
            try write { db in
                try db.execute(sql: "UPDATE file SET state = 'gone', updatedAt = ? WHERE dir = ? AND state != 'gone'", arguments: [now.timeIntervalSince1970, dir])
                swept += db.changesCount
            }
        }
        return swept
    }
}
