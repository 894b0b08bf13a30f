"""Reliability, crash (issue 7, suite 1): kill -9 the daemon again and again while it
ingests and uploads 500 photos and two multipart files, at chosen moments (a photo open
for hashing, the queue database's WAL just written, right after S3 answered a PUT or an
UploadPart) and at random ones, restarting each time. Afterwards every photo is in S3
under the MD5 of its bytes, nothing is `failed`, the database passes integrity_check
after every single kill, and what was sent twice is at most one part per kill."""
from __future__ import annotations

import os
import random
import shutil
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from support.kill_triggers import ResponseTrigger, kill9, kill_on_db_write, kill_when_reading
from support.world import write_photo

MiB = 1 << 20
PART = 5 * MiB


# How long a kill moment may take to come (a wait, not a bound): on a machine loaded by
# other tests and builds the daemon reaches a step well after 20 s.
MOMENT = 90


def integrity_of_copy(d, dest: Path) -> str:
    """integrity_check of the database exactly as the kill left it (with its WAL), on a copy
    so the check itself does not recover or checkpoint the original."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in d.state_dir.iterdir():
        if f.name.startswith("queue.db"):
            shutil.copy2(f, dest / f.name)
    con = sqlite3.connect(str(dest / "queue.db"))
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()
        shutil.rmtree(dest, ignore_errors=True)


def sends(world) -> list[dict]:
    """PutObject and UploadPart requests S3 accepted, with (key, part) identifying what was sent."""
    out = []
    for r in world.s3_ops():
        if r["op"] not in ("PutObject", "UploadPart") or r["status"] != 200:
            continue
        u = urlsplit(r["path"])
        part = parse_qs(u.query).get("partNumber", ["0"])[0]
        out.append(r | {"what": (u.path, int(part))})
    return out


@pytest.mark.reliability("crash")
def test_kill9_at_chosen_and_random_moments_loses_nothing(world, reliability, long_run):
    seed = int(os.environ.get("PL_SEED", time.time()))
    rng = random.Random(seed)
    photos, videos = (2000, 4) if long_run else (500, 2)
    # Slow enough that there is an upload to interrupt at every round.
    d = world.daemon(config={"upload": {"multipart_threshold": "5MiB", "part_size": "5MiB",
                                        "bandwidth_limit": "3MiB/s", "concurrency": 4}})
    uid = world.login(d)

    bodies: list[bytes] = []
    kills: list[str] = []
    integrity: list[str] = []

    kill_times: list[float] = []

    def after_kill(kind: str):
        kill_times.append(time.time())
        d.proc.wait(10)
        d.kill9()  # closes the log handle
        kills.append(kind)
        integrity.append(integrity_of_copy(d, d.root / f"copy{len(kills)}"))

    # Kill 1: during hashing. The photos arrive while the daemon runs; the first one it
    # opens kills it, and the rest land while it is down (the restart's scan finds them).
    seen: list[str | None] = []
    watcher = threading.Thread(target=lambda: seen.append(kill_when_reading(d.proc.pid, d.photos, 60)))
    watcher.start()
    plan = ["create", "db-write", "part", "startup", "put", "reading", "db-write", "random", "part", "complete",
            "put", "startup", "db-write", "reading", "random", "part", "random"]
    if long_run:
        plan = plan * 3
    # A third of the photos now, the rest in batches while the daemon is down between
    # rounds, so every round has photos to hash, record and PUT alongside the parts.
    first_batch = photos // 3
    per_round = -(-(photos - first_batch) // len(plan))
    made = 0

    def drop(count: int):
        nonlocal made
        for _ in range(min(count, photos - made)):
            bodies.append(write_photo(d.photos / f"album{made % 10}" / f"p{made:04d}.jpg", rng.randint(20_000, 120_000)))
            made += 1

    drop(first_batch)
    for j in range(videos):
        bodies.append(write_photo(d.photos / "videos" / f"v{j}.mov", 6 * PART + 1234 + j))   # 7 parts each
    watcher.join()
    assert seen[0], "the daemon never opened a photo"
    after_kill("hashing")

    for kind in plan:
        drop(per_round)
        d.start(wait=kind != "startup")
        pid = d.proc.pid
        if kind == "startup":
            # While it opens (and recovers) the database, before it listens.
            time.sleep(rng.uniform(0.0, 0.15))
            fired = kill9(pid)
        elif kind == "reading":
            # A photo open: hashing what arrived while it was down, or reading it for a PUT.
            fired = kill_when_reading(pid, d.photos, timeout=MOMENT) is not None
        elif kind == "db-write":
            fired = kill_on_db_write(pid, d.state_dir, timeout=MOMENT, skip=rng.randint(0, 40))
        elif kind in ("part", "put", "create", "complete"):
            match = {
                "part": lambda r: r["method"] == "PUT" and "partNumber=" in r["path"],
                "put": lambda r: r["method"] == "PUT" and "partNumber=" not in r["path"],
                # The upload id S3 just gave is not recorded yet / the object now exists
                # while the queue still holds its multipart upload.
                "create": lambda r: r["method"] == "POST" and "uploads" in r["path"] and "uploadId=" not in r["path"],
                "complete": lambda r: r["method"] == "POST" and "uploadId=" in r["path"],
            }[kind]
            fired = ResponseTrigger(world.proxy, pid, match).wait(MOMENT)
        else:
            time.sleep(rng.uniform(0.3, 3.0))
            fired = kill9(pid)
        if not fired:
            kill9(pid)
            kind += " (moment not reached: killed anyway)"
        after_kill(kind)

    d.start()
    n = len(set(bodies))
    s = d.wait_for(lambda s: s["queue"]["uploaded"] == n and s["queue"]["pending"] == 0 and s["queue"]["uploading"] == 0,
                   timeout=240, what="every photo uploaded after the kills")
    assert s["queue"]["failed"] == 0
    assert d.stop() == 0
    con = sqlite3.connect(f"file:{d.state_dir / 'queue.db'}?mode=ro", uri=True)
    final_integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()

    # Every photo under the MD5 of its bytes (objects() checks each body against its key).
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    assert all(r == "ok" for r in integrity), integrity
    assert final_integrity == "ok"
    by_kind = Counter(k.split(" ")[0] for k in kills if "not reached" not in k)
    for kind in ("hashing", "db-write", "part", "put", "random", "startup", "reading", "create", "complete"):
        assert by_kind[kind] >= 1, f"no kill landed at {kind}: {kills}"
    assert len(kills) >= 10

    # Multipart uploads S3 still holds: a kill right after CreateMultipartUpload loses its
    # id before the queue records it, and the STS policy does not allow listing uploads,
    # so at most one per such kill may be left to the bucket's lifecycle rule.
    s3 = world.moto.s3_admin()
    leftover = s3.list_multipart_uploads(Bucket=world.moto.bucket).get("Uploads", [])
    creates = [r for r in world.s3_ops() if r["op"] == "CreateMultipartUpload" and r["status"] == 200]
    for u in leftover:
        # Each one must have been created moments before a kill (any kill may land in
        # that window, not only the ones aimed at it); one that was not is a leak.
        answered = [r["time"] for r in creates if u["Key"] in r["path"]]
        assert any(0 <= k - t <= 1.0 for t in answered for k in kill_times), \
            f"multipart upload {u['Key']} left open without a kill right after its creation"
    resent_allowance = PART * len(kills)
    # Bytes sent twice: every accepted PUT/part after the first of the same (key, part).
    first: set = set()
    resent = 0
    for r in sends(world):
        if r["what"] in first:
            resent += r["bytes"]
        first.add(r["what"])
    assert resent <= resent_allowance, f"{resent} bytes re-sent after {len(kills)} kills"
    total = sum(r["bytes"] for r in world.s3_ops() if r["op"] in ("PutObject", "UploadPart"))

    reliability.describe(
        injected=f"kill -9 while hashing, while starting (opening the database), with a photo open, after a WAL write, right after S3 accepted a CreateMultipartUpload, an UploadPart, a CompleteMultipartUpload or a PutObject, "
                 f"and at random; restart each time ({photos} photos of 20–120 kB + {videos} files of 7 parts, "
                 f"3 MiB/s limit, seed {seed})",
        times=f"{len(kills)} kills: " + ", ".join(f"{k} ×{v}" for k, v in sorted(Counter(kills).items())),
        checked="every object present with MD5 = key; no file failed; PRAGMA integrity_check ok on the database "
                "as each kill left it and at the end; bytes accepted twice ≤ one part (5 MiB) per kill; "
                "every multipart upload left open was created < 1 s before a kill")
    reliability.figure("objects", len(set(bodies)))
    reliability.figure("multipart uploads left open", len(leftover))
    reliability.figure("bytes re-sent", resent)
    reliability.figure("allowed", resent_allowance)
    reliability.figure("bytes sent incl. cut-off requests", total)
