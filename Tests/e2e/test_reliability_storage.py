"""Reliability, storage faults (issue 7, suite 2): the state directory on a small tmpfs
that fills up while photos keep arriving (the daemon says "disk full" in status and in
its log, keeps serving, corrupts nothing and recovers by itself once space returns); a
queue database made read-only, and one truncated while the daemon was stopped (a clear
error at start, never silent loss: the damaged file is kept aside and a scan rebuilds
the queue, so every photo is still backed up, none sent twice)."""
from __future__ import annotations

import sqlite3
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.daemon import Daemon
from support.world import write_photo

MiB = 1 << 20


@contextmanager
def tmpfs(path: Path, size: str):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> Path:
    """Fills the filesystem holding `path` to the last byte."""
    filler = path / "filler"
    with open(filler, "wb", buffering=0) as f:
        chunk = b"\0" * (64 << 10)
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        # The last partial chunk, byte by byte-ish.
        for size in (4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    return filler


def integrity(d: Daemon) -> str:
    con = sqlite3.connect(f"file:{d.state_dir / 'queue.db'}?mode=ro", uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def uploaded(n: int):
    return lambda s: s["queue"]["uploaded"] == n and s["queue"]["pending"] == 0 and s["queue"]["uploading"] == 0


@pytest.mark.reliability("storage")
def test_disk_full_is_reported_and_recovers_by_itself(world, reliability, long_run):
    rounds = 5 if long_run else 2
    d = world.daemon(start=False)
    with tmpfs(d.state_dir, "16m"):
        d.start()
        uid = world.login(d)
        bodies = [write_photo(d.photos / "before" / f"b{i}.jpg", 30_000 + i) for i in range(20)]
        d.wait_for(uploaded(len(bodies)), timeout=60, what="the first photos")
        reported = 0
        for r in range(rounds):
            filler = fill(d.state_dir)
            # Photos keep arriving while the disk is full: they must not be lost.
            more = [write_photo(d.photos / f"full{r}" / f"f{i:03d}-{'x' * 80}.jpg", 20_000 + i) for i in range(300)]
            bodies += more
            s = d.wait_for(lambda s: any("disk full" in p for p in s["problems"]), timeout=60,
                           what="disk full in status")
            reported += 1
            assert d.proc.poll() is None, "the daemon died on a full disk"
            human = d.ctl("status", check=True).stdout
            assert "disk full" in human
            time.sleep(2)
            assert d.proc.poll() is None
            filler.unlink()
            s = d.wait_for(uploaded(len(bodies)), timeout=120, what="recovery once space returned")
            assert not any("disk full" in p for p in s["problems"]), s["problems"]
            assert s["queue"]["failed"] == 0
        assert "disk full" in d.log()
        assert d.stop() == 0
        assert integrity(d) == "ok"
        assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
        reliability.describe(
            injected="state directory on a 16 MiB tmpfs filled to the last byte while 300 photos arrived "
                     "(the daemon signed in and uploading)",
            times=f"{rounds} fill(s)",
            checked="\"disk full\" in status, the human status and the log; the daemon alive; "
                    "after the filler is removed: every photo queued and uploaded with MD5 = key, the problem gone, "
                    "no file failed, PRAGMA integrity_check ok")
        reliability.figure("photos", len(bodies))
        reliability.figure("disk-full reports", reported)


@contextmanager
def read_only_file(path: Path):
    """Makes one file read-only even for root: a read-only bind mount of it on itself."""
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)
        yield
    finally:
        subprocess.run(["umount", str(path)], check=False)


@pytest.mark.reliability("storage")
def test_read_only_database_is_a_clear_error_at_start(world, reliability):
    d = world.daemon()
    uid = world.login(d)
    bodies = [write_photo(d.photos / f"r{i}.jpg", 10_000 + i) for i in range(5)]
    d.wait_for(uploaded(len(bodies)), timeout=60, what="photos uploaded")
    assert d.stop() == 0
    size_before = (d.state_dir / "queue.db").stat().st_size
    with read_only_file(d.state_dir / "queue.db"):
        log_before = len(d.log())
        d.start(wait=False)
        rc = d.proc.wait(30)
        d.kill9()
        out = d.log()[log_before:]
        assert rc == 1, f"exit {rc}: {out}"
        assert "queue.db" in out and ("read-only" in out or "cannot be written" in out), out
    assert (d.state_dir / "queue.db").stat().st_size == size_before
    # Writable again: it starts and nothing was lost or re-sent.
    n_puts = len([r for r in world.s3_ops() if r["op"] == "PutObject"])
    d.start()
    s = d.wait_for(uploaded(len(bodies)), timeout=30, what="the queue as it was")
    assert s["queue"]["failed"] == 0
    assert len([r for r in world.s3_ops() if r["op"] == "PutObject"]) == n_puts
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    reliability.describe(
        injected="queue.db made read-only (a read-only bind mount: even root cannot write it) while the daemon was stopped",
        times=1,
        checked="start fails with exit 1 and a message naming the file and what to check; the file is untouched; "
                "once writable it starts with its queue intact and sends nothing again")


@pytest.mark.reliability("storage")
def test_truncated_database_is_quarantined_and_rebuilt_from_a_scan(world, reliability):
    d = world.daemon()
    uid = world.login(d)
    bodies = [write_photo(d.photos / "t" / f"t{i:03d}-{'y' * 60}.jpg", 5_000 + i) for i in range(400)]
    d.wait_for(uploaded(len(bodies)), timeout=90, what="photos uploaded")
    assert d.stop() == 0
    db = d.state_dir / "queue.db"
    size = db.stat().st_size
    assert size > 32 * 4096, f"the database is too small ({size} bytes) to cut meaningfully"
    with open(db, "r+b") as f:
        f.truncate(size // 2)
    n_puts = len([r for r in world.s3_ops() if r["op"] == "PutObject"])
    log_before = len(d.log())
    d.start()
    more = [write_photo(d.photos / "after" / f"a{i}.jpg", 7_000 + i) for i in range(5)]
    s = d.wait_for(uploaded(len(bodies) + len(more)), timeout=120, what="the rebuilt queue")
    out = d.log()[log_before:]
    assert "damaged" in out, out[-3000:]
    aside = [p for p in d.state_dir.iterdir() if p.name.startswith("queue.db.damaged-")]
    assert len(aside) == 1 and aside[0].stat().st_size > 0, "the damaged file is kept for inspection"
    assert s["queue"]["failed"] == 0
    assert d.stop() == 0
    assert integrity(d) == "ok"
    # Nothing already in S3 was sent again: the rebuilt queue found each object in the listing.
    assert len([r for r in world.s3_ops() if r["op"] == "PutObject"]) == n_puts + len(more)
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies + more}
    reliability.describe(
        injected="queue.db truncated to half its size while the daemon was stopped (400 photos uploaded before)",
        times=1,
        checked="at start: an error in the log saying it was damaged and moved aside (file kept as queue.db.damaged-*); "
                "a scan rebuilds the queue; nothing already uploaded is sent again; new photos upload; integrity_check ok")
