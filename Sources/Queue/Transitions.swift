import Foundation
import GRDB
import PhotolalaCore

/// The one place `file.state` and `object.state` change: every stage that moves a file or
/// an object calls one of these inside its own write transaction (`QueueDatabase.write`),
/// beside the rest of its step, so a crash leaves the rows before or after the whole step.
/// The states are the enums of `RowStates.swift`, bound as values; the schema's `CHECK`s
/// refuse any other (migration "v10-state-checks"). Reads stay with the stages.
///
/// The statements a scan runs once per file (a file seen, hashed, gone) go through
/// `RawStatement`; the rest through GRDB's statement cache.
package struct Transitions {
    private let db: Database
    private let stamp: Double

    /// `now`: the time each row changed records (`updatedAt`).
    package init(_ db: Database, now: Date) {
        self.db = db
        stamp = now.timeIntervalSince1970
    }

    /// What a move changed.
    package struct Moved: Sendable, Equatable {
        package var objects = 0
        package var files = 0

        package init(objects: Int = 0, files: Int = 0) {
            self.objects = objects
            self.files = files
        }
    }

    // MARK: - Objects, and their files with them

    /// Moves the object `md5` along `move` (only from one of `move.from`), and its files in
    /// `move.filesFrom` to `move.filesTo`. `lost` moves the object only when some file
    /// still holds its bytes (nothing to send it from otherwise).
    @discardableResult
    package func moveObject(_ md5: String, _ move: ObjectMove) throws -> Moved {
        var moved = Moved()
        if case .lost = move {
            moved.files = try moveFiles(of: md5, move)
            guard moved.files > 0 else { return moved }
            moved.objects = try updateObjects(md5, move)
            return moved
        }
        moved.objects = try updateObjects(md5, move)
        switch move {
        case .uploaded, .fail: try db.cachedStatement(sql: "DELETE FROM part WHERE md5 = ?").execute(arguments: [md5])
        default: break
        }
        moved.files = try moveFiles(of: md5, move)
        return moved
    }

    /// `moveObject` for every object in `move.from` (a start after a crash: `recover`;
    /// `retry`), and all their files that follow.
    @discardableResult
    package func moveEveryObject(_ move: ObjectMove) throws -> Moved {
        var moved = Moved()
        moved.objects = try updateObjects(nil, move)
        guard !move.filesFrom.isEmpty else { return moved }
        let (inSQL, states) = Self.states(move.filesFrom)
        try db.execute(sql: "UPDATE file SET state = ?, updatedAt = ? WHERE state IN \(inSQL)",
                       arguments: [move.filesTo, stamp] + states)
        moved.files = db.changesCount
        return moved
    }

    /// The object row's part of a move: its own columns, and from which states.
    private func updateObjects(_ md5: String?, _ move: ObjectMove) throws -> Int {
        let set: String
        var arguments: StatementArguments = [move.to]
        switch move {
        case .recover, .claim, .giveBack:
            set = ""
        case let .uploaded(etag, at):
            set = ", uploadId = NULL, lastError = NULL, nextAttemptAt = NULL, etag = ?, uploadedAt = ?, overwrite = 0"
            arguments += [etag, at.timeIntervalSince1970]
        case let .release(retryAt, error, countAttempt):
            set = ", nextAttemptAt = ?, lastError = coalesce(?, lastError), attempts = attempts + ?"
            arguments += [retryAt?.timeIntervalSince1970, error, countAttempt ? 1 : 0]
        case let .fail(reason):
            set = ", lastError = ?, attempts = attempts + 1, uploadId = NULL"
            arguments += [reason]
        case let .lost(reason, overwrite):
            set = ", attempts = 0, nextAttemptAt = NULL, lastError = ?, etag = NULL, overwrite = ?"
            arguments += [reason, overwrite]
        case .retry:
            set = ", attempts = 0, nextAttemptAt = NULL, lastError = NULL"
        }
        arguments += [stamp]
        var conditions: [String] = []
        if let md5 {
            conditions.append("md5 = ?")
            arguments += [md5]
        }
        if move.from != Set(ObjectState.allCases) {
            let (inSQL, states) = Self.states(move.from)
            conditions.append("state IN \(inSQL)")
            arguments += states
        }
        try db.cachedStatement(sql: "UPDATE object SET state = ?\(set), updatedAt = ? WHERE \(conditions.joined(separator: " AND "))")
            .execute(arguments: arguments)
        return db.changesCount
    }

    /// The files' part of a move: those holding the object's bytes, in one of `filesFrom`.
    private func moveFiles(of md5: String, _ move: ObjectMove) throws -> Int {
        guard !move.filesFrom.isEmpty else { return 0 }
        let set: String
        var arguments: StatementArguments = [move.filesTo]
        switch move {
        case .uploaded:
            set = ", lastError = NULL"
        case let .fail(reason), let .lost(reason, _):
            set = ", lastError = ?"
            arguments += [reason]
        default:
            set = ""
        }
        let (inSQL, states) = Self.states(move.filesFrom)
        arguments += [stamp, md5] + states
        try db.cachedStatement(sql: "UPDATE file SET state = ?\(set), updatedAt = ? WHERE md5 = ? AND state IN \(inSQL)")
            .execute(arguments: arguments)
        return db.changesCount
    }

    /// `(?, ?)` and the states to bind to it, in a stable order (one cached statement each).
    private static func states<S: CaseIterable & Hashable & DatabaseValueConvertible>(_ set: Set<S>) -> (String, StatementArguments) {
        let ordered = S.allCases.filter(set.contains)
        return ("(" + ordered.map { _ in "?" }.joined(separator: ", ") + ")", StatementArguments(ordered))
    }

    // MARK: - Files seen, hashed, unreadable, gone

    /// A file the queue did not hold: `pending` (waiting for its hash). Returns its id,
    /// nil when the path is there after all.
    package func insertFile(path: String, identity: FileIdentity) throws -> Int64? {
        let insert = try RawStatement(db, """
            INSERT INTO file(path, dir, device, inode, size, mtimeSec, mtimeNsec, state, updatedAt)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO NOTHING
            """)
        defer { insert.reset() }
        _ = try insert.step(.text(path), .text(PathNames.parent(of: path)), .int(Int64(bitPattern: identity.device)),
                            .int(Int64(bitPattern: identity.inode)), .int(identity.size), .int(identity.mtimeSec),
                            .int(identity.mtimeNsec), .text(FileState.pending.rawValue), .double(stamp))
        return insert.changes == 1 ? db.lastInsertedRowID : nil
    }

    /// A known file whose identity changed (written again, replaced): back to `pending`
    /// with its hash dropped.
    package func fileChanged(id: Int64, identity: FileIdentity) throws {
        let update = try RawStatement(db, """
            UPDATE file SET device = ?, inode = ?, size = ?, mtimeSec = ?, mtimeNsec = ?, md5 = NULL,
              state = ?, attempts = 0, nextAttemptAt = NULL, lastError = NULL, updatedAt = ?
            WHERE id = ?
            """)
        defer { update.reset() }
        _ = try update.step(.int(Int64(bitPattern: identity.device)), .int(Int64(bitPattern: identity.inode)), .int(identity.size),
                            .int(identity.mtimeSec), .int(identity.mtimeNsec), .text(FileState.pending.rawValue), .double(stamp), .int(id))
    }

    /// A file read as it was observed (`size` bytes): it holds the object `md5` (made
    /// `pending` if these bytes are new) and stands where that object does
    /// (`FileState(following:)`), with the SHA-256, owner and mode of the same read.
    /// Returns where it stands now.
    package func fileHashed(id: Int64, md5: String, size: Int64, sha256: [UInt8]?, owner: FileOwner?) throws -> FileState {
        let state = try joinObject(md5, size: size)
        let update = try RawStatement(db, """
            UPDATE file SET md5 = ?, state = ?, attempts = 0, lastError = NULL, nextAttemptAt = NULL, updatedAt = ?,
              sha256 = ?, uid = ?, gid = ?, mode = ? WHERE id = ?
            """)
        defer { update.reset() }
        _ = try update.step(.text(md5), .text(state.rawValue), .double(stamp), sha256.map { .blob($0) } ?? .null,
                            owner.map { .int(Int64($0.uid)) } ?? .null, owner.map { .int(Int64($0.gid)) } ?? .null,
                            owner.map { .int(Int64($0.mode)) } ?? .null, .int(id))
        return state
    }

    /// A file that takes a hash known already (a rename or a hard link made while the
    /// daemon was not watching, a file back with the bytes it had): as `fileHashed`,
    /// without a read.
    package func fileAdopts(id: Int64, md5: String, size: Int64) throws {
        let state = try joinObject(md5, size: size)
        try db.cachedStatement(sql: "UPDATE file SET md5 = ?, state = ?, lastError = NULL, updatedAt = ? WHERE id = ?")
            .execute(arguments: [md5, state, stamp, id])
    }

    /// The object a file with these bytes joins: made `pending` when new; a waiting one is
    /// due at once. Returns the file's state.
    private func joinObject(_ md5: String, size: Int64) throws -> FileState {
        let select = try RawStatement(db, "SELECT state FROM object WHERE md5 = ?")
        let existing = try select.step(.text(md5)) ? select.text(0).flatMap(ObjectState.init) : nil
        select.reset()
        if existing == nil {
            let insert = try RawStatement(db, "INSERT INTO object(md5, size, state, updatedAt) VALUES (?, ?, ?, ?)")
            defer { insert.reset() }
            _ = try insert.step(.text(md5), .int(size), .text(ObjectState.pending.rawValue), .double(stamp))
        } else if existing == .pending {
            // An object no file held any more was put off for an hour by the uploader's
            // claim; without this, a file that came back with those bytes (re-read after a
            // change, say) waited out that hour.
            let dueNow = try RawStatement(db, "UPDATE object SET nextAttemptAt = NULL WHERE md5 = ? AND nextAttemptAt IS NOT NULL")
            defer { dueNow.reset() }
            _ = try dueNow.step(.text(md5))
        }
        return FileState(following: existing ?? .pending)
    }

    /// A file that cannot be read (permission, I/O error): `failed` with the reason, until `retry`.
    package func fileUnreadable(path: String, reason: String) throws {
        try db.cachedStatement(sql: """
            UPDATE file SET state = ?, attempts = attempts + 1, lastError = ?, updatedAt = ? WHERE path = ? AND state != ?
            """).execute(arguments: [FileState.failed, reason, stamp, path, FileState.gone])
    }

    /// A file that left the tree (its listing lacks it, the file being sent is gone).
    package func fileGone(path: String) throws {
        let gone = try RawStatement(db, "UPDATE file SET state = ?, updatedAt = ? WHERE path = ?")
        defer { gone.reset() }
        _ = try gone.step(.text(FileState.gone.rawValue), .double(stamp), .text(path))
    }

    /// A file, or a whole directory, that left the tree: the path and every file below it.
    package func subtreeGone(path: String) throws {
        let (lo, hi) = QueueDatabase.subtreeRange(path)
        try db.cachedStatement(sql: "UPDATE file SET state = ?, updatedAt = ? WHERE (path = ? OR (path >= ? AND path < ?)) AND state != ?")
            .execute(arguments: [FileState.gone, stamp, path, lo, hi, FileState.gone])
    }

    /// The files directly in `dir` (a directory a complete scan did not find). Returns how many.
    package func directoryGone(_ dir: String) throws -> Int {
        try db.cachedStatement(sql: "UPDATE file SET state = ?, updatedAt = ? WHERE dir = ? AND state != ?")
            .execute(arguments: [FileState.gone, stamp, dir, FileState.gone])
        return db.changesCount
    }

    /// The file being sent no longer holds `md5`: back to `pending`, its hash dropped, to
    /// be read again. Only if the row still says these bytes: events may have had the new
    /// content hashed already while the upload ran, and wiping that hash left its object
    /// with no file for a moment, long enough to be put off for an hour.
    package func fileChangedUnderUpload(path: String, md5: String) throws {
        try db.cachedStatement(sql: "UPDATE file SET state = ?, md5 = NULL, updatedAt = ? WHERE path = ? AND md5 = ?")
            .execute(arguments: [FileState.pending, stamp, path, md5])
    }

    /// `photolalactl retry`'s files: the unreadable ones go back to `pending` (returned:
    /// to be read again), those whose object failed to `queued` (their object is put back
    /// by `moveEveryObject(.retry)`). Returns how many files moved.
    package func retryFailedFiles() throws -> (files: Int, needHash: [String]) {
        let needHash = try String.fetchAll(db, sql: "SELECT path FROM file WHERE state = ? AND md5 IS NULL", arguments: [FileState.failed])
        try db.execute(sql: "UPDATE file SET state = ?, attempts = 0, lastError = NULL, updatedAt = ? WHERE state = ? AND md5 IS NULL",
                       arguments: [FileState.pending, stamp, FileState.failed])
        let unhashed = db.changesCount
        try db.execute(sql: "UPDATE file SET state = ?, attempts = 0, lastError = NULL, updatedAt = ? WHERE state = ? AND md5 IS NOT NULL",
                       arguments: [FileState.queued, stamp, FileState.failed])
        return (unhashed + db.changesCount, needHash)
    }
}

extension QueueDatabase {
    /// Upper bound of the paths strictly under `dir` in byte order ('/' + 1 is '0'), so the
    /// UNIQUE index answers "everything below" without LIKE and its wildcards.
    package static func subtreeRange(_ dir: String) -> (String, String) {
        let base = dir == "/" ? "" : dir
        return (base + "/", base + "0")
    }
}
