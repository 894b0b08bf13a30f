#if canImport(Glibc)
import Glibc
#endif
import GRDB

/// The catalog stage's scratch space, `{state_dir}/catalog/`: the snapshot read from the
/// bucket, the one being built, and a scratch SQLite database that holds what a merge of
/// a million rows must remember (which of our photos the catalog already lists) on disk
/// instead of in memory. Nothing in it outlives one sync: it is emptied before each and
/// after it, and a crash leaves only files the next sync removes.
package struct CatalogWorkspace: Sendable {
    package let directory: String

    package init(stateDir: String) {
        directory = stateDir + "/catalog"
    }

    /// The snapshot as downloaded from the bucket.
    package var currentPath: String { directory + "/current.csv" }
    /// The snapshot being built.
    package var nextPath: String { directory + "/next.csv" }
    package var scratchPath: String { directory + "/scratch.db" }

    /// An empty workspace (created if needed, 0700: catalog rows are the user's data). Plain
    /// POSIX calls: the files are ours and flat, and Foundation's FileManager pages in
    /// megabytes of code for this.
    package func reset() throws {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw CatalogFileError(path: directory, action: "create", errno: errno)
        }
        for name in ["current.csv", "next.csv", "scratch.db", "scratch.db-journal"] {
            if unlink(directory + "/" + name) != 0 && errno != ENOENT {
                throw CatalogFileError(path: directory + "/" + name, action: "remove", errno: errno)
            }
        }
    }

    /// Removes what a sync left (two snapshots can be 170 MB).
    package func clear() {
        try? reset()
    }

    /// A fresh scratch database with the queue database attached as `q` (read only by
    /// convention: what the sync learns goes back through `QueueDatabase.recordCatalog`).
    package func openScratch(queuePath: String) throws -> DatabaseQueue {
        var config = Configuration()
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            // Disposable: no journal, no syncs. Small page caches (2 MB here, 1 MB for the
            // attached queue) keep memory flat; the OS keeps the files' pages warm anyway.
            // Twice as big made a 600,000-row publish 1.7 times faster and 7 MB bigger.
            try db.execute(sql: "PRAGMA journal_mode = OFF")
            try db.execute(sql: "PRAGMA synchronous = OFF")
            try db.execute(sql: "PRAGMA cache_size = -2048")
            try db.execute(sql: "PRAGMA temp_store = FILE")
            try db.execute(sql: "ATTACH DATABASE ? AS q", arguments: [queuePath])
            try db.execute(sql: "PRAGMA q.cache_size = -1024")
        }
        let scratch = try DatabaseQueue(path: scratchPath, configuration: config)
        try Self.change(scratch) { db in
            try db.execute(sql: """
                -- Our photos the catalog lists (by photo_md5), and those a build added to it
                -- (their queue rowids, appended in the catalog's order and indexed once at
                -- the end: half a million inserts into a B-tree in random order cost more
                -- than the rest of the merge).
                CREATE TABLE present(md5 TEXT PRIMARY KEY) WITHOUT ROWID;
                CREATE TABLE added(photo INTEGER NOT NULL);
                -- Rows of ours an app removed together with the photo: not put back.
                CREATE TABLE withdrawn(md5 TEXT PRIMARY KEY) WITHOUT ROWID;
                -- Ready photos whose columns the apps could not read.
                CREATE TABLE rejected(md5 TEXT PRIMARY KEY) WITHOUT ROWID;
                -- Photo MD5s in the bucket, when many rows were dropped at once.
                CREATE TABLE inBucket(md5 TEXT PRIMARY KEY) WITHOUT ROWID;
                -- The lines of a snapshot that was not in date order, to be sorted.
                CREATE TABLE lines(seq INTEGER PRIMARY KEY, date REAL, line BLOB NOT NULL);
                """)
        }
        return scratch
    }

    /// A transaction on the scratch database that locks only what it writes. GRDB begins
    /// writes IMMEDIATE, which reserves every attached database too: the queue's write
    /// lock held for the whole merge, and every stage's next write (and the status that
    /// waits on those stages) stuck behind it. DEFERRED takes the scratch file's lock and
    /// only a read snapshot of the queue.
    static func change<T>(_ scratch: DatabaseQueue, _ body: (Database) throws -> T) throws -> T {
        try scratch.writeWithoutTransaction { db in
            var result: T?
            try db.inTransaction(.deferred) {
                result = try body(db)
                return .commit
            }
            return result!
        }
    }
}
