import GRDB

/// The named migrations of the queue database. Shipped migrations are never edited:
/// a change is a new migration appended here.
package enum QueueSchema {
    package static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1-files-objects") { db in
            // One row per content: two files with the same bytes share it and are uploaded once.
            try db.execute(sql: """
                CREATE TABLE object (
                    md5 TEXT PRIMARY KEY NOT NULL,
                    size INTEGER NOT NULL,
                    state TEXT NOT NULL DEFAULT 'pending',
                    attempts INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt REAL,
                    lastError TEXT,
                    uploadId TEXT,
                    partSize INTEGER,
                    updatedAt REAL NOT NULL
                );
                CREATE INDEX object_ready ON object(state, nextAttemptAt);

                CREATE TABLE part (
                    md5 TEXT NOT NULL REFERENCES object(md5) ON DELETE CASCADE,
                    partNumber INTEGER NOT NULL,
                    etag TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    PRIMARY KEY (md5, partNumber)
                );

                CREATE TABLE file (
                    id INTEGER PRIMARY KEY,
                    path TEXT NOT NULL UNIQUE,
                    -- The parent folder, so a scan compares one directory listing at a time.
                    dir TEXT NOT NULL,
                    device INTEGER NOT NULL DEFAULT 0,
                    inode INTEGER NOT NULL DEFAULT 0,
                    size INTEGER NOT NULL DEFAULT 0,
                    mtimeSec INTEGER NOT NULL DEFAULT 0,
                    mtimeNsec INTEGER NOT NULL DEFAULT 0,
                    md5 TEXT,
                    state TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt REAL,
                    lastError TEXT,
                    updatedAt REAL NOT NULL
                );
                -- Covers the status counts so they stay fast with a million rows.
                CREATE INDEX file_state_size ON file(state, size);
                CREATE INDEX file_md5 ON file(md5);
                CREATE INDEX file_dir ON file(dir);
                -- Finds a moved file by its inode so a rename costs no re-hash.
                CREATE INDEX file_inode ON file(inode, device);
                CREATE INDEX file_updated ON file(updatedAt);

                CREATE TABLE setting (
                    key TEXT PRIMARY KEY NOT NULL,
                    value TEXT NOT NULL
                );
                """)
        }
        m.registerMigration("v2-hash-indexes-partial") { db in
            // Only hashed rows are ever looked up by md5 or by inode (the rename check asks
            // for a row with a hash): rows still waiting for theirs stay out of both indexes,
            // so recording a first scan updates five indexes per file instead of seven.
            try db.execute(sql: """
                DROP INDEX file_md5;
                CREATE INDEX file_md5 ON file(md5) WHERE md5 IS NOT NULL;
                DROP INDEX file_inode;
                CREATE INDEX file_inode ON file(inode, device) WHERE md5 IS NOT NULL;
                """)
        }
        m.registerMigration("v3-photos") { db in
            // What the apps need of each uploaded object (app-catalog.md): the thumbnail
            // stage takes objects `uploaded` with no row here and leaves one `ready`
            // (thumbnail in the bucket, the catalog columns filled), `failed` (could not be
            // decoded: backed up, but no thumbnail and no row; lastError says why) or
            // `skipped` (a format the apps do not show: video, CR3, RW2, unknown). The
            // catalog stage publishes the `ready` ones.
            try db.execute(sql: """
                CREATE TABLE photo (
                    md5 TEXT PRIMARY KEY NOT NULL REFERENCES object(md5) ON DELETE CASCADE,
                    state TEXT NOT NULL DEFAULT 'pending',
                    headMD5 TEXT,
                    size INTEGER,
                    format TEXT,
                    takenAt INTEGER,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt REAL,
                    lastError TEXT,
                    updatedAt REAL NOT NULL
                );
                CREATE INDEX photo_state ON photo(state, nextAttemptAt);
                """)
        }
        m.registerMigration("v3-metrics-indexes") { db in
            // The metrics ask, every scrape, for the oldest file still waiting and the last
            // object uploaded: with `updatedAt` after `state` both are one index seek, where
            // they read a million rows without. The counts stay covered (state, size).
            try db.execute(sql: """
                DROP INDEX file_state_size;
                CREATE INDEX file_state_updated_size ON file(state, updatedAt, size);
                CREATE INDEX object_state_updated ON object(state, updatedAt);
                """)
        }
        m.registerMigration("v4-inventory") { db in
            // What the bucket holds, from listing it (s3-layout.md, "Knowing what is already
            // there"): one row per key under the user's prefixes, and one row per prefix for
            // the listing passes. A pass stamps `seenAt` on every key it sees; at its end the
            // keys it did not see since it started are gone from the bucket.
            //
            // On `object`: `etag` is the ETag S3 must list for an object this daemon sent (the
            // MD5 of a single PUT, the MD5 of the parts' MD5s + "-N" of a multipart upload;
            // null when it was found already there), `uploadedAt` when it went up or was found
            // there, `deepCheckedAt` when `verify --deep` last read it back, and `overwrite`
            // that the object in the bucket is wrong (verify): it is sent again without any
            // condition and without asking whether it is there.
            try db.execute(sql: """
                CREATE TABLE inventory (
                    key TEXT PRIMARY KEY NOT NULL,
                    size INTEGER NOT NULL,
                    etag TEXT NOT NULL,
                    storageClass TEXT NOT NULL DEFAULT 'STANDARD',
                    seenAt REAL NOT NULL
                ) WITHOUT ROWID;

                CREATE TABLE inventory_listing (
                    prefix TEXT PRIMARY KEY NOT NULL,
                    state TEXT NOT NULL,
                    startedAt REAL,
                    listedAt REAL,
                    objects INTEGER NOT NULL DEFAULT 0,
                    seen INTEGER NOT NULL DEFAULT 0,
                    failures INTEGER NOT NULL DEFAULT 0,
                    lastError TEXT,
                    updatedAt REAL NOT NULL
                );

                ALTER TABLE object ADD COLUMN etag TEXT;
                ALTER TABLE object ADD COLUMN uploadedAt REAL;
                ALTER TABLE object ADD COLUMN deepCheckedAt REAL;
                ALTER TABLE object ADD COLUMN overwrite INTEGER NOT NULL DEFAULT 0;
                UPDATE object SET uploadedAt = updatedAt WHERE state = 'uploaded';
                """)
        }
        m.registerMigration("v5-catalog") { db in
            // The catalog stage's bookkeeping (app-catalog.md), per photo: NULL, its row is
            // not known to be in the user's catalog yet; 'listed', it was there when the
            // catalog was last published or read; 'withdrawn', an app removed the row and
            // deleted the photo from the bucket (an unstar), so it is not ours to put back;
            // 'rejected', its catalog columns are not ones the apps can read (logged).
            try db.execute(sql: """
                ALTER TABLE photo ADD COLUMN catalog TEXT;
                -- Every publish reads our rows in the catalog's order, newest first.
                CREATE INDEX photo_catalog_order ON photo(state, takenAt, md5);
                -- The photos waiting for a publish, counted at every wake of the stage. Keyed
                -- by state alone, so its entries are in rowid order, as the catalog stage
                -- marks rows: half a million marks rewrite each page once, not once a batch.
                CREATE INDEX photo_unlisted ON photo(state) WHERE state = 'ready' AND catalog IS NULL;
                """)
        }
        m.registerMigration("v6-manifest") { db in
            // The device manifest (docs/manifest.md). `manifest_change` lists the paths whose
            // backed-up state may have changed, filled by triggers in the same transaction
            // as the change, whichever stage made it: a file became uploaded (appeared or
            // changed), went away, or moved. The manifest stage turns them into entries and
            // deletes them in the transaction that records the segment, after its PUT.
            // `manifest_entry` mirrors every entry written to the bucket (the manifest's
            // whole history, so a snapshot can be written from here in path order).
            try db.execute(sql: """
                CREATE TABLE manifest_change (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    path TEXT NOT NULL
                );
                CREATE TABLE manifest_folder (
                    id INTEGER PRIMARY KEY,
                    path TEXT NOT NULL UNIQUE
                );
                CREATE TABLE manifest_entry (
                    path TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    ord INTEGER NOT NULL,
                    folder INTEGER NOT NULL,
                    kind INTEGER NOT NULL,
                    time INTEGER NOT NULL,
                    size INTEGER,
                    md5 TEXT,
                    mtimeSec INTEGER,
                    mtimeNsec INTEGER,
                    PRIMARY KEY (path, seq, ord)
                ) WITHOUT ROWID;
                CREATE TRIGGER manifest_file_inserted AFTER INSERT ON file WHEN new.state = 'uploaded'
                BEGIN
                    INSERT INTO manifest_change(path) VALUES (new.path);
                END;
                CREATE TRIGGER manifest_file_updated AFTER UPDATE ON file
                WHEN new.state IN ('uploaded', 'gone') OR old.path IS NOT new.path
                BEGIN
                    INSERT INTO manifest_change(path) VALUES (old.path);
                    INSERT INTO manifest_change(path) SELECT new.path WHERE new.path IS NOT old.path;
                END;
                CREATE TRIGGER manifest_file_deleted AFTER DELETE ON file
                BEGIN
                    INSERT INTO manifest_change(path) VALUES (old.path);
                END;
                INSERT INTO manifest_change(path) SELECT path FROM file WHERE state = 'uploaded';
                """)
        }
        m.registerMigration("v7-manifest-format2") { db in
            // Manifest format 2 (docs/manifest.md, privacy.md). Each file keeps the SHA-256
            // the hasher took in the same read as its MD5 (32 bytes) and the owner, group and
            // permission bits it had when it was opened for that read; rows hashed before
            // this stay NULL until they are read again. The mirror keeps them per record,
            // with the owner and group names resolved when the record was written, and
            // folder records (kind 4: a folder's owner, mode and time, in mtimeSec and
            // mtimeNsec). `manifest_head` remembers, per device of the account, the newest
            // device record (its counter) and chain head this NAS wrote or read, so an
            // older one coming back from the bucket is refused.
            try db.execute(sql: """
                ALTER TABLE file ADD COLUMN sha256 BLOB;
                ALTER TABLE file ADD COLUMN uid INTEGER;
                ALTER TABLE file ADD COLUMN gid INTEGER;
                ALTER TABLE file ADD COLUMN mode INTEGER;
                ALTER TABLE manifest_entry ADD COLUMN sha256 BLOB;
                ALTER TABLE manifest_entry ADD COLUMN uid INTEGER;
                ALTER TABLE manifest_entry ADD COLUMN gid INTEGER;
                ALTER TABLE manifest_entry ADD COLUMN mode INTEGER;
                ALTER TABLE manifest_entry ADD COLUMN user TEXT;
                ALTER TABLE manifest_entry ADD COLUMN grp TEXT;
                CREATE TABLE manifest_head (
                    userId TEXT NOT NULL,
                    device TEXT NOT NULL,
                    counter INTEGER NOT NULL,
                    seq INTEGER NOT NULL,
                    sha256 TEXT NOT NULL,
                    seenAt REAL NOT NULL,
                    PRIMARY KEY (userId, device)
                ) WITHOUT ROWID;
                """)
        }
        m.registerMigration("v8-inventory-modified") { db in
            // When each key was written to the bucket, as the listing says (S3's
            // LastModified): the month a photo only the cloud holds (a phone's) falls in on
            // the status page's chart (web.md `/api/history`). NULL until a listing sees
            // the key again.
            try db.execute(sql: "ALTER TABLE inventory ADD COLUMN lastModified REAL")
        }
        m.registerMigration("v9-mirror") { db in
            // The mirror (mirror.md): every object of the account the mirror knows, by MD5,
            // and where its copy stands on this NAS (`Mirror.MirrorRecords` owns the rows).
            // `path` is below the mirror's folder, given once before the first byte is
            // fetched and never changed by the daemon except when it follows a file the user
            // moved; `gone` says the account no longer holds the object. A state with a file
            // has a path, and no two rows name one path.
            try db.execute(sql: """
                CREATE TABLE mirror_object (
                    md5 TEXT PRIMARY KEY NOT NULL CHECK (length(md5) = 32 AND md5 NOT GLOB '*[^0-9a-f]*'),
                    size INTEGER NOT NULL CHECK (size >= 0),
                    storageClass TEXT NOT NULL DEFAULT 'STANDARD',
                    modified INTEGER,
                    catalogDate INTEGER,
                    ext TEXT,
                    path TEXT,
                    state TEXT NOT NULL CHECK (state IN ('pending', 'own', 'archived', 'thawing', 'copied', 'adopted', 'removed',
                                                         'trashed', 'refused')),
                    gone INTEGER NOT NULL DEFAULT 0 CHECK (gone IN (0, 1)),
                    device INTEGER,
                    inode INTEGER,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    refusals INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt REAL,
                    thawAskedAt REAL,
                    lastError TEXT,
                    updatedAt REAL NOT NULL,
                    CHECK (state NOT IN ('copied', 'adopted', 'removed', 'trashed') OR path IS NOT NULL)
                ) WITHOUT ROWID;
                CREATE INDEX mirror_state ON mirror_object(state, nextAttemptAt);
                CREATE UNIQUE INDEX mirror_path ON mirror_object(path) WHERE path IS NOT NULL;
                """)
        }
        m.registerMigration("v10-state-checks") { db in
            // The states a row may be in, checked by SQLite (Queue's `FileState` and
            // `ObjectState`; `Transitions` moves them): a mistyped state is refused instead
            // of becoming a new one no stage takes. SQLite adds a CHECK only by rebuilding
            // the table (https://www.sqlite.org/lang_altertable.html#otheralter; GRDB runs
            // this with foreign keys off and checks them all before it commits): each table
            // is copied, rowids included (the thumbnail stage seeds by object rowid), and
            // its indexes and triggers made again as they were. A million files take about
            // ten seconds, once (docs/benchmarks.md, "The state checks").
            try db.execute(sql: """
                CREATE TABLE new_object (
                    md5 TEXT PRIMARY KEY NOT NULL,
                    size INTEGER NOT NULL,
                    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'uploading', 'uploaded', 'failed')),
                    attempts INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt REAL,
                    lastError TEXT,
                    uploadId TEXT,
                    partSize INTEGER,
                    updatedAt REAL NOT NULL,
                    etag TEXT,
                    uploadedAt REAL,
                    deepCheckedAt REAL,
                    overwrite INTEGER NOT NULL DEFAULT 0
                );
                INSERT INTO new_object(rowid, md5, size, state, attempts, nextAttemptAt, lastError, uploadId, partSize, updatedAt,
                                       etag, uploadedAt, deepCheckedAt, overwrite)
                  SELECT rowid, md5, size, state, attempts, nextAttemptAt, lastError, uploadId, partSize, updatedAt,
                         etag, uploadedAt, deepCheckedAt, overwrite FROM object ORDER BY rowid;
                DROP TABLE object;
                ALTER TABLE new_object RENAME TO object;
                CREATE INDEX object_ready ON object(state, nextAttemptAt);
                CREATE INDEX object_state_updated ON object(state, updatedAt);

                CREATE TABLE new_file (
                    id INTEGER PRIMARY KEY,
                    path TEXT NOT NULL UNIQUE,
                    dir TEXT NOT NULL,
                    device INTEGER NOT NULL DEFAULT 0,
                    inode INTEGER NOT NULL DEFAULT 0,
                    size INTEGER NOT NULL DEFAULT 0,
                    mtimeSec INTEGER NOT NULL DEFAULT 0,
                    mtimeNsec INTEGER NOT NULL DEFAULT 0,
                    md5 TEXT,
                    state TEXT NOT NULL CHECK (state IN ('pending', 'queued', 'uploading', 'uploaded', 'failed', 'gone')),
                    attempts INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt REAL,
                    lastError TEXT,
                    updatedAt REAL NOT NULL,
                    sha256 BLOB,
                    uid INTEGER,
                    gid INTEGER,
                    mode INTEGER
                );
                INSERT INTO new_file(id, path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, state, attempts, nextAttemptAt,
                                     lastError, updatedAt, sha256, uid, gid, mode)
                  SELECT id, path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, state, attempts, nextAttemptAt,
                         lastError, updatedAt, sha256, uid, gid, mode FROM file ORDER BY id;
                DROP TABLE file;
                ALTER TABLE new_file RENAME TO file;
                CREATE INDEX file_dir ON file(dir);
                CREATE INDEX file_updated ON file(updatedAt);
                CREATE INDEX file_md5 ON file(md5) WHERE md5 IS NOT NULL;
                CREATE INDEX file_inode ON file(inode, device) WHERE md5 IS NOT NULL;
                CREATE INDEX file_state_updated_size ON file(state, updatedAt, size);
                CREATE TRIGGER manifest_file_inserted AFTER INSERT ON file WHEN new.state = 'uploaded'
                BEGIN
                    INSERT INTO manifest_change(path) VALUES (new.path);
                END;
                CREATE TRIGGER manifest_file_updated AFTER UPDATE ON file
                WHEN new.state IN ('uploaded', 'gone') OR old.path IS NOT new.path
                BEGIN
                    INSERT INTO manifest_change(path) VALUES (old.path);
                    INSERT INTO manifest_change(path) SELECT new.path WHERE new.path IS NOT old.path;
                END;
                CREATE TRIGGER manifest_file_deleted AFTER DELETE ON file
                BEGIN
                    INSERT INTO manifest_change(path) VALUES (old.path);
                END;
                """)
        }
        return m
    }
}
