#!/usr/bin/env python3
"""What SQLite alone costs for a first start's writes, without the daemon around it.

Takes the queue.db of a daemon that made a first start (`scripts/bench firststart --keep`
leaves one in WORKDIR/first-daemon-0/state), copies it, and replays the writes of that
first start with the daemon's pragmas, 4,096 files a transaction (the batch size the
daemon's hash writes were measured at):

  scan      the scan's inserts of `pending` rows
  hash      the hash writes as the daemon makes them: the row looked up by path, the
            object looked up and inserted, the row updated with its digests and owner
  notrigger the same without the manifest's AFTER UPDATE trigger
  single    one insert of the finished row and its object (had the scan waited for the hashes)

Python's sqlite3 adds a few microseconds a statement. docs/benchmarks.md, "First start:
what SQLite alone costs for a row a file".
"""
import argparse
import os
import shutil
import sqlite3
import tempfile
import time

BATCH = 4096


def fresh_copy(source: str, folder: str, keep_files: bool) -> tuple[sqlite3.Connection, list]:
    path = os.path.join(folder, "queue.db")
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(path)
    src.backup(dst)
    src.close()
    dst.close()
    db = sqlite3.connect(path, isolation_level=None)
    rows = db.execute("SELECT id, path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, sha256 FROM file ORDER BY id").fetchall()
    db.execute("DELETE FROM object")
    db.execute("DELETE FROM manifest_change")
    if keep_files:
        db.execute("UPDATE file SET md5 = NULL, sha256 = NULL, uid = NULL, gid = NULL, mode = NULL, state = 'pending'")
    else:
        db.execute("DELETE FROM file")
    db.execute("VACUUM")
    for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "cache_size = -8192", "temp_store = MEMORY", "foreign_keys = ON"):
        db.execute(f"PRAGMA {pragma}")
    return db, rows


def batched(db: sqlite3.Connection, rows: list, step) -> float:
    t = time.perf_counter()
    db.execute("BEGIN")
    for i, row in enumerate(rows):
        step(row)
        if i % BATCH == BATCH - 1:
            db.execute("COMMIT")
            db.execute("BEGIN")
    db.execute("COMMIT")
    return time.perf_counter() - t


def join_object(db: sqlite3.Connection, md5: str, size: int) -> None:
    if db.execute("SELECT state FROM object WHERE md5 = ?", (md5,)).fetchone() is None:
        db.execute("INSERT INTO object(md5, size, state, updatedAt) VALUES (?, ?, 'pending', ?)", (md5, size, time.time()))


def run(variant: str, source: str) -> float:
    with tempfile.TemporaryDirectory(prefix="sqlite-replay-") as folder:
        db, rows = fresh_copy(source, folder, keep_files=variant in ("hash", "notrigger"))
        if variant == "notrigger":
            db.execute("DROP TRIGGER manifest_file_updated")
        if variant == "scan":
            return batched(db, rows, lambda r: db.execute(
                "INSERT INTO file(path, dir, device, inode, size, mtimeSec, mtimeNsec, state, updatedAt) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?) ON CONFLICT(path) DO NOTHING", (*r[1:8], time.time())))
        if variant == "single":
            def insert(r):
                join_object(db, r[8], r[5])
                db.execute("INSERT INTO file(path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, state, updatedAt, sha256, uid, gid, mode) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, 0, 0, 420) ON CONFLICT(path) DO NOTHING",
                           (*r[1:9], time.time(), r[9]))
            return batched(db, rows, insert)

        def hashed(r):
            db.execute("SELECT id, device, inode, size, mtimeSec, mtimeNsec, state FROM file WHERE path = ?", (r[1],)).fetchone()
            join_object(db, r[8], r[5])
            db.execute("UPDATE file SET md5 = ?, state = 'queued', attempts = 0, lastError = NULL, nextAttemptAt = NULL, "
                       "updatedAt = ?, sha256 = ?, uid = 0, gid = 0, mode = 420 WHERE id = ?", (r[8], time.time(), r[9], r[0]))
        return batched(db, rows, hashed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("queue", help="a queue.db after a first start (every file hashed)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    files = sqlite3.connect(f"file:{args.queue}?mode=ro", uri=True).execute(
        "SELECT count(*) FROM file WHERE md5 IS NOT NULL").fetchone()[0]
    if files == 0:
        raise SystemExit(f"{args.queue} holds no hashed file: run `scripts/bench firststart --keep` first")
    print(f"{files:,} files from {args.queue}, {BATCH} a transaction, {args.rounds} round(s)")
    for variant in ("scan", "hash", "notrigger", "single"):
        times = [run(variant, args.queue) for _ in range(args.rounds)]
        print(f"  {variant:<10} {', '.join(f'{t:.2f} s' for t in times)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
