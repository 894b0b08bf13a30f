"""The apps' catalog, end to end: the real photolalad publishing into moto (auth enforced,
credentials from the fake backend, every request through the fault proxy), read back
exactly as the Photolala apps read it (support/app_catalog.py). Photo rows are put in
the stopped daemon's queue the way the thumbnail stage leaves them `ready`."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from support import images
from support.app_catalog import (Row, fake_row, md5_hex, newest_first, publish_as_app, read_catalog, seed_ready_photos,
                                 thumbnail_key)
from support.fake_backend import user_id_for
from support.kill_triggers import ResponseTrigger, kill9, kill_on_db_write
from support.world import apple_subject


# How long a kill moment may take to come: a 70,000-row publish in a debug build, on a
# machine other tests (and builds) load, takes well over 30 s to reach its last steps.
MOMENT = 120

CATALOG = {"catalog": {"publish_interval": "1s", "check_interval": "1h"},
           "upload": {"multipart_threshold": "5MiB", "part_size": "5MiB"}}


def test_photos_of_the_nas_appear_in_the_apps_beside_the_phones(world, tmp_path):
    """Real photos through the whole daemon (upload, sandboxed thumbnails, catalog), a
    phone's catalog already there before sign-in: the apps' view has every row of the
    phone's and one per shown photo of ours, with the right head MD5, size, MD5, date and
    format, newest first, each with its thumbnail; none for a video or a broken file."""
    sub = apple_subject("catalog")
    uid = user_id_for(sub)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    phone = [fake_row(f"phone {i}", 1_650_000_000 + i * 86_400, "HEIF").line for i in range(30)]
    publish_as_app(s3, bucket, uid, phone)
    d = world.daemon(config={"catalog": {"publish_interval": "1s"}})
    assert world.login(d, sub=sub) == uid

    staging, mtime = tmp_path / "staging", 1_600_000_000
    local = int(time.mktime(time.strptime("2019:12:31 23:30:00", "%Y:%m:%d %H:%M:%S")))
    pattern = images.upright_pattern(1200, 900)
    ours: dict[str, Row] = {}

    def stage(name: str, body: bytes, fmt: str | None = None, taken: int | None = None):
        path = staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        os.utime(path, (mtime, mtime))
        if fmt:
            ours[md5_hex(body)] = Row(md5_hex(body[:4096]), len(body), md5_hex(body), taken, fmt)

    stage("2021/dated.jpg", images.encode(pattern, "JPEG", exif=images.exif("2021:05:06 07:08:09", "+09:00")), "JPEG", 1620252489)
    stage("2019/local.jpg", images.encode(pattern, "JPEG", exif=images.exif("2019:12:31 23:30:00")), "JPEG", local)
    stage("undated.jpg", images.encode(pattern, "JPEG", quality=70), "JPEG", mtime)
    stage("portrait.jpg", images.encode(images.stored_for_orientation_6(images.upright_pattern(900, 1200)), "JPEG",
                                        exif=images.exif("2023:01:02 03:04:05", "+00:00", orientation=6)), "JPEG", 1672628645)
    stage("tall.png", images.encode(images.bands(300, 1200, vertical=False, size=75), "PNG"), "PNG", mtime)
    stage("wide.webp", images.encode(images.bands(1200, 300, vertical=True, size=80), "WEBP"), "WEBP", mtime)
    stage("scan.tif", images.encode(pattern, "TIFF"), "TIFF", mtime)
    if images.pillow_heif:
        stage("phone.heic", images.encode(pattern, "HEIF", exif=images.exif("2022:02:03 04:05:06", "-05:00")), "HEIF", 1643879106)
    shown_nowhere = {"clip.mp4": images.mp4_header(), "cut.jpg": images.encode(pattern, "JPEG")[:6000]}
    for name, body in shown_nowhere.items():
        stage(name, body)
    for p in sorted(staging.rglob("*")):
        if p.is_file():
            target = d.photos / p.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(p, target)

    s = d.wait_for(lambda s: s["catalog"]["state"] == "published" and s["catalog"]["rows"] == len(ours)
                   and s["thumbnails"]["pending"] == 0 and s["queue"]["pending"] == 0,
                   timeout=120, what="every shown photo in the catalog")
    catalog = read_catalog(s3, bucket, uid)
    assert sorted(catalog.lines) == sorted(phone + [r.line for r in ours.values()])
    assert newest_first(catalog.lines)
    assert not {md5_hex(b) for b in shown_nowhere.values()} & set(catalog.md5s), "no row for the video or the broken file"
    for md5 in ours:
        thumb = s3.get_object(Bucket=bucket, Key=thumbnail_key(uid, md5))["Body"].read()
        assert thumb[:3] == b"\xff\xd8\xff", f"the row of {md5} has no JPEG thumbnail"
    assert s["catalog"]["total"] == len(phone) + len(ours) and s["catalog"]["pending"] == 0
    human = d.ctl("status", check=True).stdout
    assert f"Apps       {len(ours)} photos from this NAS in the Photolala apps ({len(catalog.lines)} in your catalog" in human


def kill_when_file_appears(pid: int, path: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return kill9(pid)
        time.sleep(0.0005)
    return False


class KillAfterPointerThenOnRecord:
    """Once the pointer PUT is answered, kills on the queue database's next write: the
    transaction that records what the publish did, or just before it."""

    def __init__(self, world, d):
        self.fired = threading.Event()
        self.d = d
        world.proxy.on_response = self._seen

    def _seen(self, r: dict):
        if self.fired.is_set() or r["method"] != "PUT" or not r["path"].endswith(".photolala.md5") or r["status"] != 200:
            return
        self.fired.set()
        threading.Thread(target=kill_on_db_write, args=(self.d.proc.pid, self.d.state_dir, 10), daemon=True).start()

    def wait(self, timeout: float) -> bool:
        if not self.fired.wait(timeout):
            return False
        try:
            self.d.proc.wait(10)
            return True
        except Exception:
            return False


def test_kill9_at_every_step_of_a_publish_leaves_the_catalog_readable_and_complete(world):
    """A phone's catalog of 70,000 rows (6 MB: every snapshot goes up in two parts) is in
    the bucket; batches of our photos become ready while the daemon is down, and each
    start's publish is killed at another step. After every kill the apps can load the
    catalog and no row that was in it is gone; in the end every row is there once."""
    d = world.daemon(config=CATALOG)
    uid = world.login(d)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    phone = [fake_row(f"phone {i}", 1_500_000_000 + (i * 7919) % 90_000_000, "HEIF").line for i in range(70_000)]
    publish_as_app(s3, bucket, uid, phone)
    assert d.stop() == 0

    def on(op: str, path_part: str):
        methods = {"get": "GET", "put": "PUT", "create": "POST", "complete": "POST"}
        def match(r):
            p = r["path"]
            if r["method"] != methods[op] or path_part not in p:
                return False
            if op == "create":
                return "uploads" in p and "uploadId=" not in p
            if op == "complete":
                return "uploadId=" in p
            if op == "put":
                return ("partNumber=" in p) == (path_part == ".csv")
            return True
        return match

    steps = ["pointer read", "snapshot read", "building", "multipart created", "part sent", "multipart completed",
             "pointer written", "recording"]
    ours: list = []
    kills: list[str] = []
    for round_no, step in enumerate(steps):
        batch = [fake_row(f"nas {round_no}/{i}", 1_400_000_000 + (round_no * 1_000_003 + i * 104_729) % 200_000_000)
                 for i in range(40)]
        seed_ready_photos(d.state_dir, batch, s3, bucket, uid)
        ours += batch
        before = read_catalog(s3, bucket, uid)
        # Armed before the daemon can send anything: the first read comes moments after start.
        d.start(wait=False)
        pid = d.proc.pid
        if step == "building":
            fired = kill_when_file_appears(pid, d.state_dir / "catalog" / "next.csv", MOMENT)
        elif step == "recording":
            fired = KillAfterPointerThenOnRecord(world, d).wait(MOMENT)
        else:
            match = {
                "pointer read": on("get", ".photolala.md5"),
                "snapshot read": on("get", ".csv"),
                "multipart created": on("create", "/catalogs/"),
                "part sent": on("put", ".csv"),
                "multipart completed": on("complete", "/catalogs/"),
                "pointer written": on("put", ".photolala.md5"),
            }[step]
            fired = ResponseTrigger(world.proxy, pid, match).wait(MOMENT)
        world.proxy.on_response = None
        if not fired:
            kill9(pid)
            step += " (moment not reached: killed anyway)"
        d.kill9()
        kills.append(step)
        after = read_catalog(s3, bucket, uid)   # asserts the pointer names a whole snapshot
        assert after is not None and set(after.lines) >= set(before.lines), f"rows lost by a kill at {step}"

    d.start()
    s = d.wait_for(lambda s: s["catalog"]["state"] == "published" and s["catalog"]["rows"] == len(ours),
                   timeout=90, what="every row published after the kills")
    final = read_catalog(s3, bucket, uid)
    assert sorted(final.lines) == sorted(phone + [r.line for r in ours]), "every row once: the phone's and ours"
    assert newest_first(final.lines)
    assert s["catalog"]["total"] == len(phone) + len(ours) and s["catalog"]["pending"] == 0
    human = d.ctl("status", check=True).stdout
    assert f"Apps       {len(ours)} photos from this NAS in the Photolala apps ({len(final.lines)} in your catalog" in human
    assert all("not reached" not in k for k in kills), kills

    # Only a kill right after CreateMultipartUpload (before the id is recorded) can leave
    # an upload open; the one cut off mid-parts was aborted at the next start.
    open_uploads = [u for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) if u["Key"].startswith("catalogs/")]
    assert len(open_uploads) <= 1, open_uploads
    assert d.stop() == 0
    # The scratch space is emptied after each sync.
    assert not any((d.state_dir / "catalog").iterdir())


def test_a_store_refusing_if_match_that_holds_gets_the_pointer_written_and_read_back(world):
    """Ceph Pacific answers 412 to a quoted If-Match even when it matches. Starting over
    would loop forever: the daemon sees the pointer did not change, says so, and falls
    back to writing the pointer and reading it back (app-catalog.md)."""
    d = world.daemon(config=CATALOG)
    uid = world.login(d)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    phone = [fake_row(f"phone {i}", 1_600_000_000 + i, "HEIF").line for i in range(50)]
    publish_as_app(s3, bucket, uid, phone)
    assert d.stop() == 0
    ours = [fake_row(f"nas {i}", 1_600_000_025 + 2 * i) for i in range(20)]
    seed_ready_photos(d.state_dir, ours, s3, bucket, uid)
    world.proxy.set_faults(refuse_if_match=True)
    d.start()
    s = d.wait_for(lambda s: s["catalog"]["state"] == "published" and s["catalog"]["rows"] == 20, timeout=30,
                   what="the publish through a store that refuses If-Match")
    assert s["catalog"]["conditionalWrites"] is False
    final = read_catalog(s3, bucket, uid)
    assert sorted(final.lines) == sorted(phone + [r.line for r in ours]) and newest_first(final.lines)
    pointer_puts = [r for r in world.s3_ops() if r["op"] == "PutObject" and r["path"].endswith(".photolala.md5")]
    assert [r["status"] for r in pointer_puts] == [412, 200], "one refusal, then one plain write: no loop"
    assert world.proxy.stats()["faults"]["refused_if_match"] == 1
    assert "cannot replace objects conditionally" in d.log()
    assert "the store ignores conditional writes" in d.ctl("status", check=True).stdout
