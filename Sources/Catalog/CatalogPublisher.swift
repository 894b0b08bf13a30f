import Bucket
import Foundation
import PhotolalaCore
import GRDB
import Logging
import Queue

/// One sync of the user's catalog, app-catalog.md's steps 1–5:
///
/// 1. read the pointer and its ETag;
/// 2. read the snapshot it names, and check its bytes have that MD5 (else publish
///    nothing: rows that cannot be read are not ours to drop);
/// 3. keep every row there as it is, add each of our ready photos it lacks by
///    `photo_md5`, newest first;
/// 4. upload the new snapshot, then replace the pointer on the condition that it is
///    still the one read (412: someone published in between, start over);
/// 5. the pointer last, so no reader ever sees it name a missing snapshot.
///
/// A kill at any step leaves the catalog as it was or as published: a snapshot without a
/// pointer is an unreferenced file, and what we learnt is recorded only after the
/// pointer, the pointer's ETag last (a crash before costs one more read).
package struct CatalogPublisher {
    let store: any CatalogStore
    let workspace: CatalogWorkspace
    let database: QueueDatabase
    let logger: Logger
    /// False once the store refused a condition that held: pointers are then written and
    /// read back (app-catalog.md's fallback), for the rest of the process's life.
    package var conditionalWrites = true
    package var maximumRounds = 8
    /// Dropped rows are checked with a HEAD each up to this many; more, with one listing.
    package var headLimit = 200

    package init(store: any CatalogStore, workspace: CatalogWorkspace, database: QueueDatabase, logger: Logger,
                 conditionalWrites: Bool = true) {
        self.store = store
        self.workspace = workspace
        self.database = database
        self.logger = logger
        self.conditionalWrites = conditionalWrites
    }

    /// - Parameters:
    ///   - ledger: what was seen last; updated with what this sync saw and recorded.
    ///   - pending: ready photos without a row; with none and the pointer as last seen,
    ///     nothing is downloaded.
    package mutating func sync(ledger: inout CatalogLedger, pending: Int, now: @Sendable () -> Date = Date.init) async throws -> SyncOutcome {
        let userId = store.userId
        // The pointer as this NAS last read or wrote it: one that differs was published by
        // someone else, and replacing it is recorded.
        let lastSeen = ledger.pointer
        for round in 1...maximumRounds {
            var phases = SyncPhases()
            let pointer = try await store.readPointer()
            var named: String?
            if let pointer {
                guard let md5 = CatalogFormat.pointerMD5(pointer.body) else {
                    let shown = String(decoding: pointer.body.prefix(40), as: UTF8.self).debugDescription
                    return .blocked("the catalog pointer \(CatalogFormat.pointerKey(userId: userId)) holds \(shown), not a snapshot's MD5; " + Self.notPublishing)
                }
                named = md5
            }
            let seen = pointer.map { SeenPointer(etag: $0.etag, md5: named!) }
            if pending == 0, seen == ledger.pointer { return .unchanged }

            try workspace.reset()
            if let named {
                let key = CatalogFormat.snapshotKey(userId: userId, md5: named)
                guard let got = try await store.downloadSnapshot(md5: named, to: workspace.currentPath) else {
                    return .blocked("the catalog pointer names \(key), which is not in the bucket; " + Self.notPublishing)
                }
                guard got == named.lowercased() else {
                    return .blocked("the catalog snapshot \(key) is damaged (its bytes have MD5 \(got)); " + Self.notPublishing)
                }
            }
            phases.lap("download")
            let existing = named.map { _ in workspace.currentPath }
            let scratch = try workspace.openScratch(queuePath: database.path)
            let index: SnapshotIndexer.Result
            do {
                index = try await Blocking.run { stop in
                    try CatalogWorkspace.change(scratch) { db in try existing.map { try SnapshotIndexer.index(path: $0, into: db, stop: stop) } ?? .init() }
                }
            } catch let unreadable as CatalogUnreadable {
                return .blocked("the catalog snapshot \(CatalogFormat.snapshotKey(userId: userId, md5: named ?? "")) cannot be read: \(unreadable); " + Self.notPublishing)
            }
            phases.lap("index")
            var report = SyncReport(pointer: seen, rows: 0, total: index.rows)
            (report.withdrawn, report.putBack) = try await findWithdrawn(scratch)
            phases.lap("dropped")

            let toAdd = try await Blocking.run { _ in try scratch.read { try SnapshotBuilder.countToAdd($0) } }
            var built: SnapshotBuilder.Result?
            if toAdd > 0 {
                if !index.sorted {
                    logger.notice("the catalog's rows were not newest first; sorting them", metadata: ["rows": "\(index.rows)"])
                    try await Blocking.run { stop in
                        try CatalogWorkspace.change(scratch) { try SnapshotIndexer.loadForSorting(path: existing!, into: $0, stop: stop) }
                    }
                }
                let output = workspace.nextPath
                built = try await Blocking.run { stop in
                    try CatalogWorkspace.change(scratch) { try SnapshotBuilder.build(existing: existing, sorted: index.sorted, output: output, db: $0, stop: stop) }
                }
                phases.lap("merge")
                report.rejected = built?.rejected ?? 0
                report.firstRejection = built?.firstRejection
            }
            report.rows = try await Blocking.run { _ in
                try scratch.read { try Int.fetchOne($0, sql: "SELECT (SELECT count(*) FROM present) + (SELECT count(*) FROM added)") ?? 0 }
            }

            guard let built, built.added > 0 else {
                ledger.note(report, at: now(), published: false)
                try await record(ledger, from: scratch)
                try scratch.close()
                phases.lap("record")
                report.phases = phases.description
                return .current(report)
            }
            try await store.uploadSnapshot(path: workspace.nextPath, md5: built.md5, size: built.size)
            phases.lap("upload")
            let replaced = try await replacePointer(read: pointer, with: built.md5)
            phases.lap("pointer")
            guard let etag = replaced else {
                logger.info("someone published the catalog meanwhile; merging again from theirs", metadata: ["round": "\(round)"])
                continue
            }
            report.pointer = SeenPointer(etag: etag, md5: built.md5)
            if let seen, seen.etag != lastSeen?.etag { report.replaced = seen.md5 }
            report.total = built.rows
            report.added = built.added
            ledger.note(report, at: now(), published: true)
            try await record(ledger, from: scratch)
            try scratch.close()
            phases.lap("record")
            report.phases = phases.description
            return .published(report)
        }
        return .contended(rounds: maximumRounds)
    }

    /// What this sync learnt, in the queue (seconds for half a million rows, the scratch
    /// reads off the cooperative pool; a stop ends it between two transactions, and the
    /// next start reads the catalog again).
    private func record(_ ledger: CatalogLedger, from scratch: DatabaseQueue) async throws {
        let (database, settings) = (database, ledger.settings)
        // A kill among the transactions below leaves marks the ledger does not
        // count: this says so to the next start, which reads the catalog again.
        try await database.setSetting(CatalogLedger.recordingKey, "1")
        // Listed ones in the queue's rowid order, a batch of 2,048 a transaction: the
        // batches rewrite neighbouring pages, each page once (in the catalog's or MD5
        // order every batch rewrote pages all over the table: 1.2 GB of WAL for 300,000).
        var after: Int64 = 0
        while true {
            let from = after
            let batch = try await Blocking.run {
                try scratch.read {
                    try Row.fetchAll($0, sql: """
                        SELECT p.rowid, p.md5 FROM q.photo p
                        WHERE p.rowid > ? AND p.catalog IS NOT 'listed'
                          AND (EXISTS (SELECT 1 FROM present x WHERE x.md5 = p.md5) OR EXISTS (SELECT 1 FROM added x WHERE x.photo = p.rowid))
                        ORDER BY p.rowid LIMIT 2048
                        """, arguments: [from])
                }.map { (rowid: $0[0] as Int64, md5: $0[1] as String) }
            }
            guard let last = batch.last else { break }
            try await database.markCatalog(batch.map(\.md5), as: "listed")
            after = last.rowid
            try Task.checkCancellation()
        }
        // Few, usually none.
        for (table, value) in [("withdrawn", "withdrawn"), ("rejected", "rejected")] {
            let md5s = try await Blocking.run { try scratch.read { try String.fetchAll($0, sql: "SELECT md5 FROM \(table)") } }
            for start in stride(from: 0, to: md5s.count, by: 2048) {
                try await database.markCatalog(Array(md5s[start..<min(start + 2048, md5s.count)]), as: value)
            }
        }
        try await database.setSettings(settings)
    }

    static let notPublishing = "photolalad publishes nothing over a catalog it cannot read and tries again later (publishing from a Photolala app repairs it)"

    /// Step 4's pointer write. Nil when someone published in between: start over.
    private mutating func replacePointer(read pointer: StoredPointer?, with md5: String) async throws -> String? {
        let condition: PointerCondition = pointer.map { .ifMatch($0.etag) } ?? .ifNoneMatch
        if conditionalWrites {
            let written: Result<String, S3Error>
            do throws(S3Error) {
                written = .success(try await store.writePointer(md5: md5, condition: condition))
            } catch {
                written = .failure(error)
            }
            switch written {
            case .success(let etag):
                return etag
            case .failure(let error) where error.kind != .preconditionFailed:
                throw error
            case .failure:
                let now = try await store.readPointer()
                guard PointerRefusal.judge(sent: condition, now: now) == .storeIgnoresConditions else { return nil }
                conditionalWrites = false
                logger.warning("""
                    the S3 store refused a conditional write whose condition held (\(condition)): it cannot replace \
                    objects conditionally, so the catalog pointer is written and read back from now on
                    """)
            }
        }
        return try await writeAndReadBack(expected: pointer, md5: md5)
    }

    /// app-catalog.md's fallback for stores without conditional writes. Another device's
    /// publish can still be lost between the read and the write here; that window is one
    /// round trip, and its rows come back at its next publish.
    private func writeAndReadBack(expected: StoredPointer?, md5: String) async throws -> String? {
        let before = try await store.readPointer()
        guard before?.etag == expected?.etag else { return nil }
        _ = try await store.writePointer(md5: md5, condition: .unconditional)
        guard let after = try await store.readPointer(), CatalogFormat.pointerMD5(after.body) == md5 else { return nil }
        return after.etag
    }

    /// Our rows that were in the catalog and are not any more: an app rewrote it from an
    /// older copy (they go back in), or an app unstarred the photo and deleted it from the
    /// bucket (they stay out: `withdrawn`). The bucket says which: (withdrawn, put back).
    private func findWithdrawn(_ scratch: DatabaseQueue) async throws -> (Int, Int) {
        let dropped = """
            FROM q.photo p WHERE p.catalog = 'listed' AND NOT EXISTS (SELECT 1 FROM present WHERE present.md5 = p.md5)
            """
        let limit = headLimit
        let some = try await Blocking.run { _ in
            try scratch.read { try String.fetchAll($0, sql: "SELECT p.md5 " + dropped + " LIMIT ?", arguments: [limit + 1]) }
        }
        guard !some.isEmpty else { return (0, 0) }
        if some.count <= headLimit {
            var gone: [String] = []
            for md5 in some {
                if try await !store.photoExists(md5: md5) { gone.append(md5) }
            }
            try await Blocking.run { [gone] _ in
                try CatalogWorkspace.change(scratch) { db in
                    for md5 in gone { try db.execute(sql: "INSERT OR IGNORE INTO withdrawn(md5) VALUES (?)", arguments: [md5]) }
                }
            }
            logDropped(some.count, gone: gone.count)
            return (gone.count, some.count - gone.count)
        }
        try await store.listPhotos { md5s in
            try CatalogWorkspace.change(scratch) { db in
                for md5 in md5s { try db.execute(sql: "INSERT OR IGNORE INTO inBucket(md5) VALUES (?)", arguments: [md5]) }
            }
        }
        let (count, gone) = try await Blocking.run { _ in
            try CatalogWorkspace.change(scratch) { db -> (Int, Int) in
                let count = try Int.fetchOne(db, sql: "SELECT count(*) " + dropped) ?? 0
                try db.execute(sql: "INSERT OR IGNORE INTO withdrawn(md5) SELECT p.md5 " + dropped
                               + " AND NOT EXISTS (SELECT 1 FROM inBucket b WHERE b.md5 = p.md5)")
                return (count, db.changesCount)
            }
        }
        logDropped(count, gone: gone)
        return (gone, count - gone)
    }

    private func logDropped(_ count: Int, gone: Int) {
        logger.notice("rows of ours were missing from the catalog: an app rewrote it", metadata: [
            "missing": "\(count)", "putBack": "\(count - gone)", "deletedByAnApp": "\(gone)",
        ])
    }
}
