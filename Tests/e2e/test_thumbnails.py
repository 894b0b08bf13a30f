"""Thumbnails and photo rows, end to end: real photos made with Pillow dropped into a
watched folder, the real daemon (its decoders in the sandboxed worker) against moto with
auth enforced, the user id in uppercase. Every thumbnail is read back from the bucket and
checked as the apps would (PTM-256: size, upright, baseline, ≤ 50 KB, no orientation
tag), and the `photo` rows the catalog stage will publish are read from the queue
database. Hostile images cost their preview, never the daemon."""
from __future__ import annotations

import io
import os
import random
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

from PIL import Image, ImageFilter

from support import dng, images
from support.daemon import binary
from support.preview_worker import PreviewWorker
from support.world import md5_hex

EXTENSIONS = ["jpg", "jpeg", "heic", "png", "tif", "gif", "webp", "bmp", "dng", "mp4", "mov"]


def photo_rows(d) -> dict[str, dict]:
    db = sqlite3.connect(f"file:{d.state_dir}/queue.db?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        return {r["md5"]: dict(r) for r in db.execute("SELECT * FROM photo")}
    finally:
        db.close()


def thumbnails(world, uid) -> dict[str, bytes]:
    s3 = world.moto.s3_admin()
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=world.moto.bucket, Prefix="thumbnails/"):
        for o in page.get("Contents", []):
            key = o["Key"]
            assert key.startswith(f"thumbnails/{uid}/"), f"{key} is not under the user id as the backend spells it"
            got = s3.get_object(Bucket=world.moto.bucket, Key=key)
            assert got["ContentType"] == "image/jpeg", key
            assert got.get("StorageClass", "STANDARD") == "STANDARD", key
            out[key.rsplit("/", 1)[1].removesuffix(".jpg")] = got["Body"].read()
    return out


def check_ptm256(jpeg: bytes, what: str) -> Image.Image:
    assert len(jpeg) <= 50_000, f"{what}: {len(jpeg)} bytes"
    img = Image.open(io.BytesIO(jpeg))
    assert img.format == "JPEG" and img.mode == "RGB", what
    assert not img.info.get("progressive") and not img.info.get("progression"), f"{what} is progressive"
    assert "icc_profile" not in img.info and 0x0112 not in img.getexif(), f"{what} keeps a profile or an orientation"
    assert min(img.size) == 256 and max(img.size) <= 512, f"{what}: {img.size}"
    # 4:2:0: both chroma planes sampled at half the luma's rate in each direction.
    assert img.layer[0][1:3] == (2, 2) and all(c[1:3] == (1, 1) for c in img.layer[1:]), f"{what}: sampling {img.layer}"
    return img


def near(px, colour, tolerance=40) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(px, colour))


def grey(img: Image.Image, xy) -> int:
    return round(sum(img.getpixel(xy)) / 3)


def stage(root: Path, name: str, body: bytes, mtime: int | None = None) -> Path:
    p = root / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(body)
    if mtime is not None:
        os.utime(p, (mtime, mtime))
    return p


def move_in(staging: Path, photos: Path):
    """Renames every staged file into the watched folder: each appears complete."""
    for p in sorted(staging.rglob("*")):
        if p.is_file():
            target = photos / p.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(p, target)


def wait_settled(d, ready: int, failed: int, uploaded: int, timeout=120):
    def done(s):
        t, q = s["thumbnails"], s["queue"]
        return (q["uploaded"] == uploaded and q["pending"] == 0 and t["done"] == ready
                and t["failed"] == failed and t["pending"] == 0)
    d.wait_for(done, timeout=timeout, what=f"{uploaded} uploaded, {ready} thumbnails, {failed} without a preview")


def test_every_shown_format_gets_an_upright_ptm256_thumbnail_and_its_row(world, tmp_path):
    d = world.daemon(config={"watch": {"extensions": EXTENSIONS}})
    uid = world.login(d)
    assert uid == uid.upper() and any(c.isalpha() for c in uid), uid

    staging = tmp_path / "staging"
    mtime = 1_600_000_000
    local = time.mktime(time.strptime("2019:12:31 23:30:00", "%Y:%m:%d %H:%M:%S"))
    pattern = images.upright_pattern(1200, 900)
    expect = {}  # name -> (format, taken_at, kind of check)

    def add(name, body, fmt, taken, check, stamp=mtime):
        stage(staging, name, body, stamp)
        expect[name] = (md5_hex(body), body, fmt, taken, check)

    add("dated.jpg", images.encode(pattern, "JPEG", quality=92,
                                   exif=images.exif("2021:05:06 07:08:09", "+09:00")),
        "JPEG", 1620252489, "landscape")
    add("local.jpg", images.encode(pattern, "JPEG", exif=images.exif("2019:12:31 23:30:00")), "JPEG", int(local), "landscape")
    add("undated.jpg", images.encode(pattern, "JPEG"), "JPEG", mtime, "landscape")
    upright = images.upright_pattern(900, 1200)
    add("portrait6.jpg", images.encode(images.stored_for_orientation_6(upright), "JPEG", exif=images.exif(orientation=6)),
        "JPEG", mtime, "portrait")
    # A RAW stand-in: a DNG that LibRaw reads as one (raw-identify: DNG 1.4, a 160 × 120
    # mosaic, a 1200 × 900 thumb, flip 6), whose flat grey mosaic cannot make this thumbnail:
    # only the embedded preview, turned by the DNG's orientation, can.
    sensor = images.stored_for_orientation_6(upright)
    add("camera.dng", dng.dng(images.encode(sensor, "JPEG", quality=90), sensor.size, orientation=6,
                              date="2020:07:08 09:10:11"),
        "RAW-DNG", int(time.mktime(time.strptime("2020:07:08 09:10:11", "%Y:%m:%d %H:%M:%S"))), "portrait")
    add("tall.png", images.encode(images.bands(300, 1200, vertical=False, size=75), "PNG"), "PNG", mtime, "tall")
    add("wide.webp", images.encode(images.bands(1200, 300, vertical=True, size=80), "WEBP", quality=95), "WEBP", mtime, "wide")
    rgba = pattern.convert("RGBA")
    rgba.paste((0, 0, 0, 0), (600, 300, 1200, 900))
    add("alpha.png", images.encode(rgba, "PNG"), "PNG", mtime, "alpha")
    add("scan.tif", images.encode(pattern, "TIFF"), "TIFF", mtime, "landscape")
    add("anim.gif", images.encode(pattern.convert("P"), "GIF"), "GIF", mtime, "landscape")
    add("old.bmp", images.encode(pattern, "BMP"), "BMP", mtime, "landscape")
    add("small.jpg", images.encode(images.upright_pattern(100, 80), "JPEG"), "JPEG", mtime, "small")
    # Detail that makes 56 KB at quality 85 and 48 KB at 80 (measured with libjpeg-turbo).
    noise = Image.frombytes("RGB", (384, 256), random.Random(7).randbytes(384 * 256 * 3)).filter(ImageFilter.GaussianBlur(0.6))
    add("busy.png", images.encode(noise, "PNG"), "PNG", mtime, "busy")
    if images.pillow_heif:
        add("phone.heic", images.encode(pattern, "HEIF", exif=images.exif("2022:02:03 04:05:06", "-05:00")),
            "HEIF", 1643879106, "landscape")
    # Backed up, but no row: a video, bytes no decoder can read, random bytes.
    skipped = {"clip.mp4": images.mp4_header(), "mystery.jpg": os.urandom(5000)}
    broken = {"cut.jpg": images.encode(pattern, "JPEG")[:6000]}
    for name, body in {**skipped, **broken}.items():
        stage(staging, name, body)

    move_in(staging, d.photos)
    wait_settled(d, ready=len(expect), failed=len(broken), uploaded=len(expect) + len(skipped) + len(broken))

    rows = photo_rows(d)
    thumbs = thumbnails(world, uid)
    assert set(thumbs) == {e[0] for e in expect.values()}, "exactly one thumbnail per shown photo"
    # Every key in the bucket is one the daemon may write, each thumbnail a photo's (World.objects).
    assert {k.rsplit("/", 1)[1].removesuffix(".jpg") for k in world.objects(uid, prefix="thumbnails/")} == set(thumbs)
    assert len(world.objects(uid)) == len(expect) + len(skipped) + len(broken)
    for name, (md5, body, fmt, taken, check) in expect.items():
        row = rows[md5]
        assert row["state"] == "ready", (name, row)
        assert row["headMD5"] == md5_hex(body[:4096]) and row["size"] == len(body), name
        assert row["format"] == fmt and row["takenAt"] == taken, (name, row)
        img = check_ptm256(thumbs[md5], name)
        w, h = img.size
        if check in ("landscape", "alpha"):
            assert (w, h) == (341, 256), (name, img.size)
            assert near(img.getpixel((w // 3, 4)), images.BLUE) and near(img.getpixel((w // 3, h - 4)), images.GREEN), name
            assert near(img.getpixel((6, 24)), images.RED) and not near(img.getpixel((w - 6, 24)), images.RED), name
        if check == "alpha":
            assert near(img.getpixel((w - 20, h - 60)), images.WHITE, 12), "transparency is flattened on white"
        if check == "portrait":
            assert (w, h) == (256, 341), (name, img.size)
            assert near(img.getpixel((w // 2, 4)), images.BLUE) and near(img.getpixel((w // 2, h - 4)), images.GREEN), name
            assert near(img.getpixel((6, 40)), images.RED) and not near(img.getpixel((w - 6, 40)), images.RED), name
        if check == "tall":
            # 300 × 1200 → 256 × 1024, 512 rows too many: 205 off the top (40 %), 307 off the bottom.
            # The first kept row is source row 240.2 (band 3), the last 838.9 (band 11); an even crop
            # would start at row 300 (band 4).
            assert (w, h) == (256, 512), (name, img.size)
            assert abs(grey(img, (128, 3)) - 3 * images.BAND) <= 6, grey(img, (128, 3))
            assert abs(grey(img, (128, 508)) - 11 * images.BAND) <= 6, grey(img, (128, 508))
        if check == "wide":
            # 1200 × 300 → 1024 × 256, 256 columns off each side: the first kept column is
            # source column 300 (band 3), the last 899 (band 11).
            assert (w, h) == (512, 256), (name, img.size)
            assert abs(grey(img, (3, 128)) - 3 * images.BAND) <= 6 and abs(grey(img, (508, 128)) - 11 * images.BAND) <= 6
        if check == "small":
            assert (w, h) == (320, 256), "a small photo is scaled up to 256 on its short edge"
        if check == "busy":
            assert 40_000 < len(thumbs[md5]) <= 50_000, f"quality stepped down just enough: {len(thumbs[md5])} bytes"

    for name, body in skipped.items():
        assert rows[md5_hex(body)]["state"] == "skipped", name
    for name, body in broken.items():
        row = rows[md5_hex(body)]
        assert row["state"] == "failed" and row["lastError"], (name, row)
        assert md5_hex(body) not in thumbs
    # Every original is backed up whatever became of its preview.
    s3 = world.moto.s3_admin()
    for body in [e[1] for e in expect.values()] + list(skipped.values()) + list(broken.values()):
        got = s3.get_object(Bucket=world.moto.bucket, Key=f"photos/{uid}/{md5_hex(body)}.dat")["Body"].read()
        assert got == body
    # The queue listing names the photo without a preview, and why.
    listing = d.ctl("queue", "--json", check=True).stdout
    assert "cut.jpg" in listing and "no preview: " in listing, listing
    # `retry` reads it again (its attempts start over), and says so; still truncated, it fails again.
    cut = md5_hex(broken["cut.jpg"])
    first = rows[cut]
    r = d.ctl("retry", check=True)
    assert "No failed files; 1 photo without a preview will be read again." in r.stdout, r.stdout
    d.wait_for(lambda s: (row := photo_rows(d)[cut])["state"] == "failed" and row["updatedAt"] > first["updatedAt"]
               and s["thumbnails"]["failed"] == 1, timeout=60, what="the retried photo read again")
    again = photo_rows(d)[cut]
    assert again["attempts"] == 1 and again["lastError"] == first["lastError"], (first, again)


def test_hostile_images_cost_their_preview_never_the_daemon(world, tmp_path):
    d = world.daemon(config={"watch": {"extensions": EXTENSIONS}})
    uid = world.login(d)
    rng = random.Random(15)
    seeds = {
        "jpg": images.encode(images.upright_pattern(320, 240), "JPEG"),
        "png": images.encode(images.upright_pattern(320, 240), "PNG"),
        "gif": images.encode(images.upright_pattern(320, 240).convert("P"), "GIF"),
        "webp": images.encode(images.upright_pattern(320, 240), "WEBP"),
        "tif": images.encode(images.upright_pattern(320, 240), "TIFF"),
        "bmp": images.encode(images.upright_pattern(320, 240), "BMP"),
    }
    if images.pillow_heif:
        seeds["heic"] = images.encode(images.upright_pattern(320, 240), "HEIF")
    staging = tmp_path / "staging"
    hostile = {"bomb.png": images.png_declaring(100_000, 100_000),
               "cut1.jpg": seeds["jpg"][:2000], "cut2.jpg": seeds["jpg"][: len(seeds["jpg"]) // 2]}
    if images.pillow_heif:
        heic = bytearray(seeds["heic"])
        heic[len(heic) // 2:] = os.urandom(len(heic) - len(heic) // 2)
        hostile["malformed.heic"] = bytes(heic)
    bodies = {}
    for i in range(280):
        ext = rng.choice(sorted(seeds))
        bodies[f"mutated/{i:03d}.{ext}"] = images.mutated(seeds[ext], rng)
    bodies.update(hostile)
    # Distinct bytes only (a mutation can repeat another): one object each.
    unique = {}
    for name, body in bodies.items():
        unique.setdefault(md5_hex(body), (name, body))
    for name, body in unique.values():
        stage(staging, name, body)

    rss_before = rss_kib(d.proc.pid)
    started = time.monotonic()
    move_in(staging, d.photos)
    d.wait_for(lambda s: s["queue"]["uploaded"] == len(unique) and s["queue"]["pending"] == 0
               and s["thumbnails"]["pending"] == 0, timeout=240, what="every hostile photo handled")
    elapsed = time.monotonic() - started
    assert d.proc.poll() is None, "the daemon is still running"
    s = d.status()
    rows = photo_rows(d)
    thumbs = thumbnails(world, uid)
    states = {}
    for md5, (name, body) in unique.items():
        row = rows[md5]
        states[row["state"]] = states.get(row["state"], 0) + 1
        if row["state"] == "ready":
            check_ptm256(thumbs[md5], name)
        else:
            assert row["state"] in ("failed", "skipped") and md5 not in thumbs, (name, row)
    assert s["thumbnails"]["failed"] == states.get("failed", 0) > 0
    for name in hostile:
        md5 = md5_hex(hostile[name])
        assert rows[md5]["state"] == "failed", (name, rows[md5])
    assert "100000 × 100000" in rows[md5_hex(hostile["bomb.png"])]["lastError"]
    rss_after = rss_kib(d.proc.pid)
    # The decoders' memory is the worker's, not the daemon's.
    assert rss_after < rss_before + 40 * 1024, (rss_before, rss_after)
    reasons = Counter((r["lastError"] or "").split(":")[0][:60] for r in rows.values() if r["state"] == "failed")
    print(f"hostile run: {len(unique)} files in {elapsed:.1f}s, states {states}, daemon RSS {rss_before} → {rss_after} KiB")
    print("why no preview:", dict(reasons.most_common(8)))


def test_the_worker_sandbox_refuses_files_sockets_and_processes():
    # Started with this test's whole environment: the worker drops it before anything reads it.
    r = subprocess.run([binary(), "__preview-worker", "--self-test"], capture_output=True, text=True, timeout=60,
                       pass_fds=(), env=dict(os.environ, PHOTOLALA_SELF_TEST_MARKER="not-for-the-worker"))
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    for attempt in ("open /etc/hostname", "create /tmp/previews-self-test", "socket AF_INET", "socket AF_UNIX",
                    "fork", "execve /bin/true", "mmap executable", "newfstatat of the working directory"):
        assert f"{attempt}: refused" in r.stdout, r.stdout
    # Issue 24: signals through fcntl, a named file through the fstat calls, a raised limit.
    for attempt in ("fcntl F_SETOWN", "fcntl F_SETSIG", "fcntl F_SETFL O_ASYNC", "fcntl F_GETFD",
                    "newfstatat /etc/hostname", "newfstatat /etc/hostname with AT_EMPTY_PATH",
                    "statx /etc/hostname", "statx /etc/hostname with AT_EMPTY_PATH",
                    "prlimit64 raising RLIMIT_CPU", "prlimit64 lowering RLIMIT_CPU"):
        assert f"{attempt}: refused (Operation not permitted)" in r.stdout, r.stdout
    assert "environment: empty" in r.stdout, r.stdout
    # What the decoders need still works: fstat of a descriptor it holds (glibc's fstat is
    # newfstatat with an empty path), statx the same way, reading its limits.
    for need in ("fstat(2) of a held descriptor", "fstat of a held descriptor (newfstatat with an empty path)",
                 "statx of a held descriptor with an empty path", "getrlimit RLIMIT_CPU"):
        assert f"{need}: works" in r.stdout, r.stdout
    assert "sandbox: every attempt refused, every need met" in r.stdout
    assert not os.path.exists("/tmp/previews-self-test")


def worker_of(daemon_pid: int) -> int:
    """The preview worker the daemon started (its child running `__preview-worker`)."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmdline = f.read().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if ppid == daemon_pid and b"__preview-worker" in cmdline:
                return int(name)
    raise AssertionError(f"no preview worker under {daemon_pid}")


def test_the_daemon_passes_its_worker_no_environment(world, tmp_path):
    d = world.daemon(env={"PHOTOLALA_DAEMON_ONLY": "a-value-of-the-daemons-own"})
    world.login(d)
    stage(d.photos, "one.jpg", images.encode(images.upright_pattern(640, 480), "JPEG"))
    wait_settled(d, ready=1, failed=0, uploaded=1)
    with open(f"/proc/{d.proc.pid}/environ", "rb") as f:
        assert b"PHOTOLALA_DAEMON_ONLY=" in f.read()
    worker = worker_of(d.proc.pid)
    # What it was started with (the kernel's copy; the worker empties its own too).
    with open(f"/proc/{worker}/environ", "rb") as f:
        assert f.read() == b""


def test_the_worker_protocol_answers_each_descriptor_and_survives_nothing_else(tmp_path):
    """The worker as the daemon drives it: a thumbnail per descriptor, a date-only answer,
    and a clear refusal for a bomb, all from one process."""
    w = PreviewWorker(binary())
    try:
        jpg = tmp_path / "a.jpg"
        jpg.write_bytes(images.encode(images.upright_pattern(1200, 900), "JPEG", exif=images.exif("2020:01:02 03:04:05")))
        r = w.read(jpg, "jpeg")
        assert r.failure is None and r.quality == 85 and r.date_time_original == "2020:01:02 03:04:05"
        check_ptm256(r.jpeg, "a.jpg")
        r = w.read(jpg, "jpeg", want_thumbnail=False)
        assert r.jpeg is None and r.date_time_original == "2020:01:02 03:04:05"
        bomb = tmp_path / "bomb.png"
        bomb.write_bytes(images.png_declaring(100_000, 100_000))
        r = w.read(bomb, "png")
        assert r.jpeg is None and "100000 × 100000" in r.failure
        assert w.proc.poll() is None
    finally:
        w.close()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")
