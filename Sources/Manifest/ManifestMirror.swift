import Foundation
import GRDB
import ManifestFormat
import PhotolalaCore
import Queue

/// The manifest stage's tables in the queue database (migration `v6-manifest`): the
/// changed paths the triggers on `file` collect (`manifest_change`), the mirror of every
/// record written to the bucket (`manifest_entry`, `manifest_folder`) and the ledger (one
/// `setting` row). Queue keeps the schema and the triggers; the records and the requests
/// live here, beside the one stage that reads and writes them. Each segment is recorded in
/// one transaction after the bucket took it, so a kill -9 loses no change: the worst is a
/// segment written but not recorded, which the next start finds in the bucket.
extension QueueDatabase {
    func manifestLedger() async throws -> ManifestLedger? {
        try await read { db in try ManifestLedger.fetch(db) }
    }

    /// The oldest changed paths (at most `limit` change rows), each with its file row and
    /// the manifest's last record for it; `through` is the last change row they cover.
    /// nil when nothing changed.
    func manifestCandidates(limit: Int) async throws -> (through: Int64, candidates: [ManifestCandidate])? {
        try await read { db in
            let rows = try Row.fetchCursor(db, sql: "SELECT seq, path FROM manifest_change ORDER BY seq LIMIT ?", arguments: [limit])
            var last: Int64?
            var seen = Set<ExactPath>()
            var candidates: [ManifestCandidate] = []
            // Compiled once a connection: GRDB's authorizer makes each compile cost more
            // than the lookup, and a segment looks up 5,000 paths twice.
            let fileRow = try db.cachedStatement(sql: "SELECT state, size, md5, mtimeSec, mtimeNsec, updatedAt, sha256, uid, gid, mode FROM file WHERE path = ?")
            while let row = try rows.next() {
                last = row[0]
                let path: String = row[1]
                guard seen.insert(ExactPath(path)).inserted else { continue }
                // By position (the statement's order): a lookup by name lowercases the name
                // and searches the columns, and a segment reads 5,000 rows of ten.
                let file = try Row.fetchOne(fileRow, arguments: [path]).map { f in
                    ManifestCandidate.FileRow(state: FileState(rawValue: f[0]) ?? .pending, size: f[1], md5: f[2],
                                              mtimeSec: f[3], mtimeNsec: f[4], updatedAt: f[5],
                                              sha256: (f[6] as Data?).map { Array($0) }, owner: FileOwner(row: f, at: 7))
                }
                candidates.append(ManifestCandidate(path: path, file: file, current: try ManifestRecord.last(db, path: path)))
            }
            return last.map { ($0, candidates) }
        }
    }

    /// Changed paths that turned out to change nothing in the manifest (a file being read
    /// again, a gone file the manifest never had): consumed without a segment.
    func dropManifestChanges(through: Int64) async throws {
        try await write { db in try db.execute(sql: "DELETE FROM manifest_change WHERE seq <= ?", arguments: [through]) }
    }

    /// Records segment `seq` (its PUT succeeded): its records, the changes it consumed
    /// (`through`; nil for a segment another database wrote) and the ledger, with the
    /// totals moved by the records and `update` applied, all in one transaction. Returns
    /// the ledger saved. `ordBase` numbers the records after those of an earlier call with
    /// the same `seq` (a snapshot read back part by part).
    func recordManifestSegment(seq: Int64, records: [ManifestRecord], through: Int64?, ordBase: Int64 = 0,
                               update: @escaping @Sendable (inout ManifestLedger) -> Void) async throws -> ManifestLedger {
        try await write { db in
            guard var ledger = try ManifestLedger.fetch(db) else { throw DatabaseError(message: "the manifest ledger is missing") }
            var folders = ExactKeyed<Int64>()
            let insert = try db.cachedStatement(sql: """
                INSERT OR REPLACE INTO manifest_entry(path, seq, ord, folder, kind, time, size, md5, mtimeSec, mtimeNsec,
                                                      sha256, uid, gid, mode, user, grp)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            // Only what the totals need of the record a file had before, its kind and size:
            // no join and no row of thirteen columns for each of a segment's 5,000 records.
            let previous = try db.cachedStatement(sql: """
                SELECT kind, size FROM manifest_entry WHERE path = ? AND kind != 4 ORDER BY seq DESC, ord DESC LIMIT 1
                """)
            for (i, r) in records.enumerated() {
                // A folder record counts no file.
                if !r.isFolder {
                    if let before = try Row.fetchOne(previous, arguments: [r.path]), (before[0] as Int) != 3 {
                        ledger.files -= 1
                        ledger.bytes -= (before[1] as Int64?) ?? 0
                    }
                    if !r.isGone {
                        ledger.files += 1
                        ledger.bytes += r.size ?? 0
                    }
                }
                let folder: Int64
                if let known = folders[r.folder] {
                    folder = known
                } else {
                    try db.execute(sql: "INSERT INTO manifest_folder(path) VALUES (?) ON CONFLICT(path) DO NOTHING", arguments: [r.folder])
                    folder = try Int64.fetchOne(db, sql: "SELECT id FROM manifest_folder WHERE path = ?", arguments: [r.folder]) ?? 0
                    folders[r.folder] = folder
                }
                try insert.execute(arguments: [r.path, seq, ordBase + Int64(i), folder, r.kind, r.time, r.size, r.md5, r.mtimeSec, r.mtimeNsec,
                                               r.sha256.map { Data($0) }, r.owner.map { Int64($0.uid) }, r.owner.map { Int64($0.gid) },
                                               r.owner.map { Int64($0.mode) }, r.owner?.user, r.owner?.group])
            }
            if let through { try db.execute(sql: "DELETE FROM manifest_change WHERE seq <= ?", arguments: [through]) }
            update(&ledger)
            try ledger.save(db)
            return ledger
        }
    }

    /// Saves the ledger alone (a snapshot written, the device record's totals).
    func saveManifestLedger(_ ledger: ManifestLedger) async throws {
        try await write { db in try ledger.save(db) }
    }

    /// Every backed-up path, in path order (bytes, SQLite's BINARY): read through the
    /// (state, size) index instead, a first sign-in wrote a library in the order of its
    /// files' sizes, every segment touched every folder (looked up and walked again for
    /// each file) and the mirror's inserts landed all over its tree. `+state` keeps that
    /// index out, so the rows come from the path index already in order rather than
    /// sorted in a temporary tree (a million paths: 100 MB of it).
    static let uploadedPathsInOrder = "SELECT path FROM file WHERE +state = \(FileState.uploaded.sqlLiteral) ORDER BY path"

    /// Starts the mirror over for another account or device (or a bucket rebuilt from
    /// here): no records, every backed-up file a change to write, by path.
    func resetManifest(_ ledger: ManifestLedger) async throws {
        try await write { db in
            try db.execute(sql: """
                DELETE FROM manifest_entry;
                DELETE FROM manifest_folder;
                DELETE FROM manifest_change;
                INSERT INTO manifest_change(path) \(Self.uploadedPathsInOrder);
                """)
            try ledger.save(db)
        }
    }

    /// Hands over up to `limit` mirrored records after `after`, in (path, seq, ord) order,
    /// one at a time from a cursor, to `each` with `state` (an encoder, say): a snapshot is
    /// written from these pages, each file's history together and in order, without a page
    /// ever held as a list. Returns how many, and the state as `each` left it.
    func manifestRecords<State: Sendable>(after: (path: String, seq: Int64, ord: Int64)?, limit: Int, into state: State,
                                          _ each: @escaping @Sendable (inout State, StoredManifestRecord) -> Void) async throws
        -> (count: Int, state: State)
    {
        return try await read { db in
            var state = state
            let columns = "e.path, e.seq, e.ord, \(ManifestRecord.columns), f.path AS folder"
            let from = "FROM manifest_entry e JOIN manifest_folder f ON f.id = e.folder"
            let cursor = try after.map { a in
                try Row.fetchCursor(db, sql: "SELECT \(columns) \(from) WHERE (e.path, e.seq, e.ord) > (?, ?, ?) ORDER BY e.path, e.seq, e.ord LIMIT ?",
                                    arguments: [a.path, a.seq, a.ord, limit])
            } ?? Row.fetchCursor(db, sql: "SELECT \(columns) \(from) ORDER BY e.path, e.seq, e.ord LIMIT ?", arguments: [limit])
            var n = 0
            while let r = try cursor.next() {
                each(&state, StoredManifestRecord(seq: r[1], ord: r[2], record: ManifestRecord(row: r, at: 3, path: r[0])))
                n += 1
            }
            return (n, state)
        }
    }

    /// The same, collected (for tests and small pages).
    func manifestRecords(after: (path: String, seq: Int64, ord: Int64)?, limit: Int) async throws -> [StoredManifestRecord] {
        try await manifestRecords(after: after, limit: limit, into: [StoredManifestRecord]()) { $0.append($1) }.state
    }

    /// Changed-path rows waiting, counted up to `limit`: more than the records they can
    /// make (a path changed twice is one record), for a decision that needs only a bound.
    func manifestChangeCount(upTo limit: Int) async throws -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM (SELECT 1 FROM manifest_change LIMIT ?)", arguments: [limit]) ?? 0
        }
    }

    /// The last folder record of each of `paths` (absolute), for those that have one.
    func manifestFolderRecords(_ paths: [String]) async throws -> ExactKeyed<ManifestRecord> {
        try await read { db in
            var out = ExactKeyed<ManifestRecord>()
            for path in paths {
                if let r = try ManifestRecord.lastFolder(db, path: path) { out[path] = r }
            }
            return out
        }
    }

    /// The newest device record and head this NAS wrote or read for `device`.
    func manifestHead(userId: String, device: String) async throws -> RememberedHead? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT counter, seq, sha256 FROM manifest_head WHERE userId = ? AND device = ?",
                             arguments: [userId, device]).map { r in
                RememberedHead(counter: r["counter"], head: ManifestHead(seq: r["seq"], sha256: r["sha256"]))
            }
        }
    }

    /// Every device of `userId` this NAS remembers a head of.
    func manifestHeads(userId: String) async throws -> [String: RememberedHead] {
        try await read { db in
            var out: [String: RememberedHead] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT device, counter, seq, sha256 FROM manifest_head WHERE userId = ?", arguments: [userId]) {
                out[row[0]] = RememberedHead(counter: row[1], head: ManifestHead(seq: row[2], sha256: row[3]))
            }
            return out
        }
    }

    /// Keeps `head` for `device` unless a newer one is kept already.
    func rememberManifestHead(userId: String, device: String, _ head: RememberedHead, now: Date) async throws {
        try await write { db in
            try db.execute(sql: """
                INSERT INTO manifest_head(userId, device, counter, seq, sha256, seenAt) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(userId, device) DO UPDATE SET counter = excluded.counter, seq = excluded.seq, sha256 = excluded.sha256,
                  seenAt = excluded.seenAt
                WHERE excluded.counter > manifest_head.counter
                   OR (excluded.counter = manifest_head.counter AND excluded.seq > manifest_head.seq)
                """, arguments: [userId, device, head.counter, head.head.seq, head.head.sha256, now.timeIntervalSince1970])
        }
    }

    /// Whether any change waits for the manifest stage.
    func hasManifestChanges() async throws -> Bool {
        try await read { db in try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS(SELECT 1 FROM manifest_change)")) ?? false }
    }
}

/// Where this NAS's manifest stands, kept in the queue database (one JSON row of the
/// `setting` table) and changed only in the transaction that records a segment: which
/// account and device it belongs to, the last segment the bucket acknowledged, and the
/// totals the device's record shows.
struct ManifestLedger: Codable, Sendable, Equatable {
    static let settingKey = "manifest"

    var userId: String?
    var deviceId: String?
    /// Made with the ledger: tells the segments this database wrote from those an earlier
    /// database (set aside as damaged, say) wrote under the same device.
    var writer: String
    /// The last log segment in the bucket and mirrored here.
    var seq: Int64 = 0
    /// The last snapshot written (it covers the log up to its number); 0: none.
    var snapshot: Int64 = 0
    /// Records and segments in the log since that snapshot, and records in it.
    var logEntries: Int64 = 0
    var logSegments: Int64 = 0
    var snapshotEntries: Int64 = 0
    /// Files the manifest holds as present now, and their bytes.
    var files: Int64 = 0
    var bytes: Int64 = 0
    /// The newest record's time (ms since the epoch).
    var lastChange: Int64?
    /// When the last segment was written (seconds since the epoch).
    var writtenAt: Double?
    /// The format of what this ledger wrote to the bucket: 2; nil for a ledger of format 1
    /// (written by a release before it), whose manifest the stage upgrades.
    var format: Int?
    /// The chain's head: the SHA-256 of the last log segment's sealed bytes (64 zeros
    /// before the first, and after an upgrade until the next).
    var headSHA: String?
    /// How many times the device record was written (its `counter`).
    var counter: Int64?
    /// The fingerprint of the account key the chain was last written under: another one
    /// (a new account key sealed everything again) means the head's SHA-256 is read again.
    var keyFingerprint: String?

    init(userId: String?, deviceId: String?, writer: String = UUID().uuidString.lowercased()) {
        self.userId = userId
        self.deviceId = deviceId
        self.writer = writer
        format = ManifestSegment.sealedFormat
    }

    /// Whether the bucket may hold this device's manifest in the plaintext format 1.
    var isPlaintext: Bool { (format ?? 1) < ManifestSegment.sealedFormat }

    var head: ManifestHead { ManifestHead(seq: seq, sha256: headSHA ?? ManifestHeader.noPrevious) }

    /// Log segment `seq` recorded with `records`, written at `writtenAt` (seconds since the epoch).
    mutating func logged(_ seq: Int64, records: [ManifestRecord], writtenAt: Double?) {
        self.seq = seq
        logEntries += Int64(records.count)
        logSegments += 1
        lastChange = max(lastChange ?? 0, records.map(\.time).max() ?? 0)
        self.writtenAt = writtenAt ?? self.writtenAt
    }

    /// Log segment `seq` with the SHA-256 of its sealed bytes.
    mutating func logged(_ seq: Int64, sha256: String, records: [ManifestRecord], writtenAt: Double?) {
        logged(seq, records: records, writtenAt: writtenAt)
        headSHA = sha256
    }

    static func fetch(_ db: Database) throws -> ManifestLedger? {
        guard let text = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = ?", arguments: [settingKey]) else { return nil }
        return try? JSONDecoder().decode(ManifestLedger.self, from: Data(text.utf8))
    }

    func save(_ db: Database) throws {
        let text = String(decoding: try JSONEncoder().encode(self), as: UTF8.self)
        try db.execute(sql: "INSERT INTO setting(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                       arguments: [Self.settingKey, text])
    }
}

/// A record of the manifest as the queue mirrors it: keyed by the file's (or folder's)
/// absolute path.
struct ManifestRecord: Sendable, Equatable {
    /// 1 appeared, 2 changed, 3 gone, 4 a folder (as the format's record kinds).
    var kind: Int
    var path: String
    var folder: String
    /// Milliseconds since the epoch.
    var time: Int64
    var size: Int64?
    var md5: String?
    /// A file's modification time; a folder record's too.
    var mtimeSec: Int64?
    var mtimeNsec: Int64?
    /// The 32 bytes of the file's SHA-256, when known.
    var sha256: [UInt8]?
    /// Owner, group (ids and names) and mode, when known (always for a folder).
    var owner: Ownership?

    var isGone: Bool { kind == 3 }
    var isFolder: Bool { kind == 4 }

    static let columns = "e.kind, e.time, e.size, e.md5, e.mtimeSec, e.mtimeNsec, e.sha256, e.uid, e.gid, e.mode, e.user, e.grp"

    /// A row holding `columns` from position `i`, then its folder's path: read by position,
    /// as compaction reads every record (by name, each column lowercased and searched for).
    init(row r: Row, at i: Int, path: String) {
        var owner: Ownership?
        if let uid: Int64 = r[i + 7], let gid: Int64 = r[i + 8], let mode: Int64 = r[i + 9] {
            owner = Ownership(uid: UInt32(truncatingIfNeeded: uid), gid: UInt32(truncatingIfNeeded: gid), user: r[i + 10], group: r[i + 11],
                              mode: UInt32(truncatingIfNeeded: mode))
        }
        self.init(kind: r[i], path: path, folder: r[i + 12], time: r[i + 1], size: r[i + 2], md5: r[i + 3],
                  mtimeSec: r[i + 4], mtimeNsec: r[i + 5], sha256: (r[i + 6] as Data?).map { Array($0) }, owner: owner)
    }

    init(kind: Int, path: String, folder: String, time: Int64, size: Int64?, md5: String?, mtimeSec: Int64?, mtimeNsec: Int64?,
         sha256: [UInt8]? = nil, owner: Ownership? = nil) {
        self.kind = kind
        self.path = path
        self.folder = folder
        self.time = time
        self.size = size
        self.md5 = md5
        self.mtimeSec = mtimeSec
        self.mtimeNsec = mtimeNsec
        self.sha256 = sha256
        self.owner = owner
    }

    /// The last file record mirrored for `path` (folder records aside).
    static func last(_ db: Database, path: String) throws -> ManifestRecord? {
        try Row.fetchOne(db.cachedStatement(sql: """
            SELECT \(columns), f.path AS folder FROM manifest_entry e
            JOIN manifest_folder f ON f.id = e.folder WHERE e.path = ? AND e.kind != 4 ORDER BY e.seq DESC, e.ord DESC LIMIT 1
            """), arguments: [path]).map { ManifestRecord(row: $0, at: 0, path: path) }
    }

    /// The last folder record mirrored for the folder `path`.
    static func lastFolder(_ db: Database, path: String) throws -> ManifestRecord? {
        try Row.fetchOne(db.cachedStatement(sql: """
            SELECT \(columns), f.path AS folder FROM manifest_entry e
            JOIN manifest_folder f ON f.id = e.folder WHERE e.path = ? AND e.kind = 4 ORDER BY e.seq DESC, e.ord DESC LIMIT 1
            """), arguments: [path]).map { ManifestRecord(row: $0, at: 0, path: path) }
    }
}

/// A mirrored record with its place in the log, for writing snapshots in (path, seq, ord) order.
struct StoredManifestRecord: Sendable, Equatable {
    var seq: Int64
    var ord: Int64
    var record: ManifestRecord
}

/// One path whose backed-up state may have changed: the file as the queue holds it now,
/// and the manifest's last record for that path.
struct ManifestCandidate: Sendable, Equatable {
    struct FileRow: Sendable, Equatable {
        var state: FileState
        var size: Int64
        var md5: String?
        var mtimeSec: Int64
        var mtimeNsec: Int64
        var updatedAt: Double
        /// The 32 bytes of its SHA-256, and its owner and mode, when the hasher took them.
        var sha256: [UInt8]? = nil
        var owner: FileOwner? = nil
    }

    var path: String
    /// nil: no row at this path any more (it moved away).
    var file: FileRow?
    /// nil: the manifest never had this path.
    var current: ManifestRecord?
}

extension FileOwner {
    /// From a row's `uid`, `gid` and `mode` at positions `i`, `i + 1`, `i + 2`; nil unless all three are there.
    init?(row r: Row, at i: Int) {
        guard let uid: Int64 = r[i], let gid: Int64 = r[i + 1], let mode: Int64 = r[i + 2] else { return nil }
        self.init(uid: UInt32(truncatingIfNeeded: uid), gid: UInt32(truncatingIfNeeded: gid), mode: UInt32(truncatingIfNeeded: mode))
    }
}

/// The heads this NAS wrote or read of each device (`manifest_head`), for the restore's
/// reader: an older device record or chain coming back from the bucket is refused.
package struct ManifestHeads: ManifestHeadMemory {
    private let database: QueueDatabase
    private let clock: any DaemonClock

    package init(database: QueueDatabase, clock: any DaemonClock = SystemClock()) {
        self.database = database
        self.clock = clock
    }

    package func remembered(userId: String, device: String) async -> RememberedHead? {
        try? await database.manifestHead(userId: userId, device: device)
    }

    package func remember(userId: String, device: String, _ head: RememberedHead) async {
        try? await database.rememberManifestHead(userId: userId, device: device, head, now: clock.now())
    }

    package func all(userId: String) async -> [String: RememberedHead] {
        (try? await database.manifestHeads(userId: userId)) ?? [:]
    }
}
