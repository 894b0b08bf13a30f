import Foundation
import GRDB
import ManifestFormat
import PhotolalaCore
import Queue

/// How many entries stand where, for status, metrics and the human line.
package struct MirrorCounts: Sendable, Equatable {
    /// Objects the account holds, as far as the mirror knows (every state, not gone).
    package var inAccount = 0
    package var present = 0
    package var pending = 0
    package var pendingBytes: Int64 = 0
    package var copied = 0
    package var adopted = 0
    /// Archived, asked back or not.
    package var archived = 0
    package var thawing = 0
    /// Copies whose object the account no longer holds (kept, or removed here since).
    package var onlyHere = 0
    package var removedHere = 0
    package var trashed = 0
    package var refused = 0
    /// Objects a watched file of this NAS holds (`include = "others"`).
    package var own = 0
    /// Refused objects refused `AttentionRules.mirrorRefusalsForAttention` times or more.
    package var refusedRepeatedly = 0

    package init() {}
}

/// The mirror's rows (`mirror_object`, the migration "v9-mirror" in Queue) and the settings
/// it keeps, one transaction per page or per object, so a kill -9 at any instant leaves
/// every object either as it was or as the step left it.
extension QueueDatabase {
    static let mirrorColumns = """
        md5, size, storageClass, modified, catalogDate, ext, path, state, gone, device, inode, attempts, refusals, nextAttemptAt,
        thawAskedAt, lastError
        """

    /// The states of an object not (or no longer) on this NAS: what a file of its size may be adopted as.
    static let notHere: [MirrorState] = [.pending, .archived, .thawing, .refused, .removed]
    static let notHereMarks = "(" + notHere.map { _ in "?" }.joined(separator: ", ") + ")"
    static var notHereArguments: StatementArguments { StatementArguments(notHere.map(\.rawValue)) }

    static func mirrorEntry(_ row: Row) -> MirrorEntry? {
        guard let md5 = MD5Value(hex: row["md5"]), let state = MirrorState(rawValue: row["state"]) else { return nil }
        return MirrorEntry(md5: md5, size: row["size"], storageClass: row["storageClass"], modified: row["modified"],
                           catalogDate: row["catalogDate"], ext: row["ext"], path: row["path"], state: state, gone: row["gone"],
                           device: (row["device"] as Int64?).map { UInt64(bitPattern: $0) },
                           inode: (row["inode"] as Int64?).map { UInt64(bitPattern: $0) },
                           attempts: row["attempts"], refusals: row["refusals"], nextAttemptAt: row["nextAttemptAt"],
                           thawAskedAt: row["thawAskedAt"], lastError: row["lastError"])
    }

    static func mirrorArguments(_ e: MirrorEntry, now: Date) -> StatementArguments {
        [e.md5.hex, e.size, e.storageClass, e.modified, e.catalogDate, e.ext, e.path, e.state.rawValue, e.gone,
         e.device.map { Int64(bitPattern: $0) }, e.inode.map { Int64(bitPattern: $0) }, e.attempts, e.refusals, e.nextAttemptAt,
         e.thawAskedAt, e.lastError, now.timeIntervalSince1970]
    }

    static func saveMirror(_ db: Database, _ e: MirrorEntry, now: Date) throws {
        try db.cachedStatement(sql: """
            INSERT INTO mirror_object(\(mirrorColumns), updatedAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(md5) DO UPDATE SET size = excluded.size, storageClass = excluded.storageClass, modified = excluded.modified,
              catalogDate = excluded.catalogDate, ext = excluded.ext, path = excluded.path, state = excluded.state,
              gone = excluded.gone, device = excluded.device, inode = excluded.inode, attempts = excluded.attempts,
              refusals = excluded.refusals, nextAttemptAt = excluded.nextAttemptAt, thawAskedAt = excluded.thawAskedAt,
              lastError = excluded.lastError, updatedAt = excluded.updatedAt
            """).execute(arguments: mirrorArguments(e, now: now))
    }

    // MARK: reading

    package func mirrorEntry(_ md5: MD5Value) async throws -> MirrorEntry? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.mirrorColumns) FROM mirror_object WHERE md5 = ?", arguments: [md5.hex])
                .flatMap(Self.mirrorEntry)
        }
    }

    /// The entries with keys after `after` (nil: from the first) up to and including
    /// `through` (nil: to the last), in MD5 order: what a listing page covers.
    package func mirrorEntries(after: MD5Value?, through: MD5Value?) async throws -> [MirrorEntry] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT \(Self.mirrorColumns) FROM mirror_object WHERE md5 > ? AND md5 <= ? ORDER BY md5
                """, arguments: [after?.hex ?? "", through?.hex ?? "g"]).compactMap(Self.mirrorEntry)
        }
    }

    /// The entries of these objects (at most a few thousand at a time).
    package func mirrorEntries(md5s: [MD5Value]) async throws -> [MD5Value: MirrorEntry] {
        guard !md5s.isEmpty else { return [:] }
        return try await read { db in
            var out: [MD5Value: MirrorEntry] = [:]
            try Self.inChunks(md5s.map(\.hex)) { marks, arguments in
                for row in try Row.fetchAll(db, sql: "SELECT \(Self.mirrorColumns) FROM mirror_object WHERE md5 IN (\(marks))",
                                            arguments: arguments) {
                    if let e = Self.mirrorEntry(row) { out[e.md5] = e }
                }
            }
            return out
        }
    }

    /// Runs `body` once per 500 values, with their placeholders and arguments: an `IN`
    /// list stays under SQLite's limit on bound parameters whatever the batch.
    private static func inChunks(_ values: [String], _ body: (_ marks: String, _ arguments: StatementArguments) throws -> Void) rethrows {
        for start in stride(from: 0, to: values.count, by: 500) {
            let chunk = values[start..<min(values.count, start + 500)]
            try body(chunk.map { _ in "?" }.joined(separator: ","), StatementArguments(Array(chunk)))
        }
    }

    /// At most `limit` entries in `states`, in MD5 order after `after`, due by `now` when given.
    package func mirrorEntries(in states: [MirrorState], after: MD5Value? = nil, dueBy now: Date? = nil, limit: Int) async throws -> [MirrorEntry] {
        try await read { db in
            let marks = states.map { _ in "?" }.joined(separator: ",")
            var arguments = StatementArguments(states.map(\.rawValue))
            var sql = "SELECT \(Self.mirrorColumns) FROM mirror_object WHERE state IN (\(marks)) AND md5 > ?"
            _ = arguments.append(contentsOf: [after?.hex ?? ""])
            if let now {
                sql += " AND (nextAttemptAt IS NULL OR nextAttemptAt <= ?)"
                _ = arguments.append(contentsOf: [now.timeIntervalSince1970])
            }
            sql += " ORDER BY md5 LIMIT ?"
            _ = arguments.append(contentsOf: [limit])
            return try Row.fetchAll(db, sql: sql, arguments: arguments).compactMap(Self.mirrorEntry)
        }
    }

    /// At most `limit` copies whose object the account no longer holds, in MD5 order.
    package func mirrorGone(limit: Int) async throws -> [MirrorEntry] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT \(Self.mirrorColumns) FROM mirror_object WHERE gone = 1 AND state IN (?, ?) ORDER BY md5 LIMIT ?
                """, arguments: [MirrorState.copied.rawValue, MirrorState.adopted.rawValue, limit]).compactMap(Self.mirrorEntry)
        }
    }

    /// When the next entry in `states` waiting for a retry is due (nil: none waits).
    package func mirrorNextAttempt(in states: [MirrorState]) async throws -> Date? {
        try await read { db in
            let marks = states.map { _ in "?" }.joined(separator: ",")
            return try Double.fetchOne(db, sql: "SELECT min(nextAttemptAt) FROM mirror_object WHERE state IN (\(marks))",
                                       arguments: StatementArguments(states.map(\.rawValue)))
                .map { Date(timeIntervalSince1970: $0) }
        }
    }

    /// Whether another entry than `md5` names `path`.
    package func mirrorPathTaken(_ path: String, by md5: MD5Value) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM mirror_object WHERE path = ? AND md5 != ?)",
                              arguments: [path, md5.hex]) ?? false
        }
    }

    /// Which of `paths` some entry names (at most a few thousand at a time).
    package func mirrorPathsTaken(_ paths: [String]) async throws -> Set<String> {
        guard !paths.isEmpty else { return [] }
        return try await read { db in
            var out: Set<String> = []
            try Self.inChunks(paths) { marks, arguments in
                out.formUnion(try String.fetchAll(db, sql: "SELECT path FROM mirror_object WHERE path IN (\(marks))", arguments: arguments))
            }
            return out
        }
    }

    /// The sizes of the objects not yet on this NAS (what a file in the folder must have to
    /// be adopted), and how many there are.
    package func mirrorAdoptableSizes() async throws -> Set<Int64> {
        try await read { db in
            Set(try Int64.fetchAll(db, sql: "SELECT DISTINCT size FROM mirror_object WHERE state IN \(Self.notHereMarks)",
                                   arguments: Self.notHereArguments))
        }
    }

    /// The entries not on this NAS with one of these sizes.
    package func mirrorAdoptable(size: Int64) async throws -> [MirrorEntry] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT \(Self.mirrorColumns) FROM mirror_object WHERE size = ? AND state IN \(Self.notHereMarks)
                """, arguments: [size] + Self.notHereArguments).compactMap(Self.mirrorEntry)
        }
    }

    package func mirrorCounts() async throws -> MirrorCounts {
        try await read { db in
            var c = MirrorCounts()
            for row in try Row.fetchAll(db, sql: """
                SELECT state, gone, count(*) AS n, coalesce(sum(size), 0) AS bytes, sum(refusals >= ?) AS repeated
                FROM mirror_object GROUP BY state, gone
                """, arguments: [AttentionRules.mirrorRefusalsForAttention]) {
                guard let state = MirrorState(rawValue: row["state"]) else { continue }
                let (n, bytes, gone): (Int, Int64, Bool) = (row["n"], row["bytes"], row["gone"])
                if !gone { c.inAccount += n }
                switch state {
                case .pending:
                    c.pending += n
                    c.pendingBytes += bytes
                case .own: c.own += n
                case .archived: c.archived += n
                case .thawing:
                    c.archived += n
                    c.thawing += n
                case .copied: c.copied += n
                case .adopted: c.adopted += n
                case .removed: c.removedHere += n
                case .trashed: c.trashed += n
                case .refused:
                    c.refused += n
                    c.refusedRepeatedly += row["repeated"] as Int? ?? 0
                }
                if state.isPresent {
                    c.present += n
                    if gone { c.onlyHere += n }
                }
            }
            return c
        }
    }

    // MARK: writing

    /// A listing page's changes, the entries the account lost and those it forgot, at once.
    package func applyMirror(saving: [MirrorEntry], forgetting: [MD5Value], now: Date) async throws {
        guard !saving.isEmpty || !forgetting.isEmpty else { return }
        try await write { db in
            for e in saving { try Self.saveMirror(db, e, now: now) }
            for md5 in forgetting {
                try db.execute(sql: "DELETE FROM mirror_object WHERE md5 = ?", arguments: [md5.hex])
            }
        }
    }

    package func saveMirror(_ e: MirrorEntry, now: Date) async throws {
        try await write { db in try Self.saveMirror(db, e, now: now) }
    }

    /// The name a copy is about to take, and — in the same transaction, before the file
    /// appears where ingest could see it — its object in the inventory, so the uploader
    /// knows it is in the account and sends nothing for it (mirror.md "No loop").
    package func mirrorNaming(_ e: MirrorEntry, key: String, etag: String, now: Date) async throws {
        try await write { db in
            try Self.saveMirror(db, e, now: now)
            try Self.recordStored(db, key: key, size: e.size, etag: etag, storageClass: e.storageClass, now: now)
        }
    }

    /// Every entry removed here goes back to be fetched again (`mirror --refill`); returns how many.
    package func mirrorRefill(now: Date) async throws -> Int {
        try await write { db in
            try db.execute(sql: """
                UPDATE mirror_object SET state = ?, path = NULL, device = NULL, inode = NULL, attempts = 0,
                  nextAttemptAt = NULL, lastError = NULL, updatedAt = ? WHERE state = ? AND gone = 0
                """, arguments: [MirrorState.pending.rawValue, now.timeIntervalSince1970, MirrorState.removed.rawValue])
            return db.changesCount
        }
    }

    /// Refused objects are looked at again now (`mirror --pass`).
    package func mirrorRetryRefused(now: Date) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE mirror_object SET nextAttemptAt = NULL WHERE state IN (?, ?) AND nextAttemptAt IS NOT NULL",
                           arguments: [MirrorState.pending.rawValue, MirrorState.refused.rawValue])
        }
    }

    /// Another account's entries, or another folder's: they say nothing of this one.
    package func forgetMirror() async throws {
        try await write { db in try db.execute(sql: "DELETE FROM mirror_object") }
    }
}
