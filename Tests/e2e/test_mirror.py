"""The mirror (mirror.md, issue 32): the NAS keeps its own verified, dated copy of every
photo of the account. Photos "from a phone" are written into moto exactly as the
Photolala app writes them (the object with its content type and original-format, its
thumbnail, then the whole catalog: snapshot first, pointer last, no condition); the real
daemon pulls them through the fault proxy, which counts every request. Each test checks
names, bytes (MD5 against the key) and modification times on disk, and that the daemon
never deleted a file of the user's."""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from support import images
from support.prom import parse, scrape_socket
from support.app_catalog import md5_hex, publish_as_app, thumbnail_key
from support.fake_backend import user_id_for
from support.notify_receivers import Receiver
from support.state_watch import filesystem_type
from support.world import apple_subject, settled, write_photo

FAST = {"check_interval": "10s", "list_interval": "1h", "min_free": "0"}
EXT = {"JPEG": "jpg", "HEIF": "heic", "PNG": "png", "RAW-DNG": "dng", "MP4": "mp4", "MOV": "mov"}
TYPES = {"JPEG": "image/jpeg", "HEIF": "image/heif", "PNG": "image/png", "RAW-DNG": "image/x-adobe-dng", "MP4": "video/mp4",
         "MOV": "video/quicktime"}
# Formats the apps catalogue (a row); videos get none.
CATALOGUED = {"JPEG", "HEIF", "PNG", "RAW-DNG"}


def name(date: int, md5: str, ext: str, whole: bool = False) -> str:
    """privacy.md's export name, in UTC."""
    t = time.gmtime(date)
    return time.strftime("%Y/%m/%Y-%m-%d %H.%M.%S", t) + f" {md5 if whole else md5[:8]}.{ext}"


class Phone:
    """The Photolala app on a phone: uploads photos and rewrites the whole catalog."""

    def __init__(self, s3, bucket: str, uid: str):
        self.s3, self.bucket, self.uid = s3, bucket, uid
        self.rows: dict[str, str] = {}
        self.bodies: dict[str, tuple[bytes, str, int | None]] = {}

    def take(self, body: bytes, fmt: str = "JPEG", date: int | None = None, storage_class: str | None = None) -> str:
        m = md5_hex(body)
        extra = {"StorageClass": storage_class} if storage_class else {}
        self.s3.put_object(Bucket=self.bucket, Key=f"photos/{self.uid}/{m}.dat", Body=body, ContentType=TYPES[fmt],
                           Metadata={"original-format": fmt}, **extra)
        if fmt in CATALOGUED:
            self.s3.put_object(Bucket=self.bucket, Key=thumbnail_key(self.uid, m), Body=b"\xff\xd8\xff" + os.urandom(200),
                               ContentType="image/jpeg")
            head = md5_hex(body[:4096])
            self.rows[m] = f"{head},{len(body)},{m},{date},{fmt}"
        self.bodies[m] = (body, fmt, date if fmt in CATALOGUED else None)
        return m

    def publish(self) -> str:
        return publish_as_app(self.s3, self.bucket, self.uid, list(self.rows.values()))

    def unstar(self, m: str) -> None:
        """What the app does on an unstar: the object and its thumbnail deleted, the catalog rewritten."""
        self.s3.delete_object(Bucket=self.bucket, Key=f"photos/{self.uid}/{m}.dat")
        self.s3.delete_object(Bucket=self.bucket, Key=thumbnail_key(self.uid, m))
        self.rows.pop(m, None)
        self.publish()

    def expected(self) -> dict[str, tuple[bytes, int]]:
        """Name below the mirror -> (bytes, mtime)."""
        out = {}
        for m, (body, fmt, date) in self.bodies.items():
            if date is None or not (0 <= date < 4_102_444_800):
                date = int(self.s3.head_object(Bucket=self.bucket, Key=f"photos/{self.uid}/{m}.dat")["LastModified"].timestamp())
            out[name(date, m, EXT[fmt])] = (body, date)
        return out


def files_under(root: Path) -> dict[str, Path]:
    """Every file below `root` but the hidden ones (the marker, .trash/, temporary files)."""
    out = {}
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_file() and not p.is_symlink():
            out[str(rel)] = p
    return out


def photo_puts(world, uid: str, since: float) -> list[str]:
    """The PUTs (single or multipart) of photos/ keys the proxy saw."""
    return [r["path"] for r in world.s3_ops(since=since)
            if r["op"] in ("PutObject", "CreateMultipartUpload", "UploadPart") and f"/photos/{uid}/" in r["path"]]


def mirror(s: dict) -> dict:
    return s["mirror"]


def body(size: int, seed: str) -> bytes:
    block = hashlib.sha256(seed.encode()).digest()
    return (block * (size // 32 + 1))[:size]


# ---- photos from a phone arrive ---------------------------------------------------------

def test_a_phones_photos_arrive_named_dated_and_checked(world, tmp_path):
    sub = apple_subject("mirror")
    uid = user_id_for(sub)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    phone = Phone(s3, bucket, uid)
    for i, fmt in enumerate(["HEIF", "JPEG", "PNG", "RAW-DNG"]):
        phone.take(body(3000 + i, f"phone {i}"), fmt, 1_650_000_000 + i * 86_400 + 3_661)
    phone.take(images.mp4_header() + os.urandom(40_000), "MP4")
    # A row dated outside 1970–2099 (the catalog is app-writable): its object's time.
    phone.take(body(2500, "odd"), "JPEG", 5_000_000_000)
    phone.publish()

    folder = tmp_path / "Photolala"
    d = world.daemon(config={"mirror": {"folder": str(folder), **FAST}, "catalog": {"publish_interval": "1s"}})
    assert world.login(d, sub=sub) == uid
    # The NAS's own photo: backed up by the daemon, not copied back with include = "others".
    own = write_photo(d.photos / "mine.jpg", 0, images.encode(images.bands(320, 200, vertical=False, size=20), "JPEG"))
    d.wait_for(lambda s: settled(1)(s) and mirror(s)["present"] == len(phone.bodies) and mirror(s)["state"] == "idle",
               timeout=120, what="the phone's photos mirrored")
    expected = phone.expected()
    found = files_under(folder)
    assert set(found) == set(expected), (sorted(set(found) ^ set(expected)))
    for rel, (data, mtime) in expected.items():
        assert found[rel].read_bytes() == data, rel
        assert os.stat(found[rel]).st_mtime_ns == mtime * 10**9, rel
        assert os.stat(found[rel]).st_mode & 0o7777 == 0o640, rel
    assert os.stat(folder / "2022").st_mode & 0o7777 == 0o750
    assert (folder / ".photolala-mirror").read_text().startswith("photolala-mirror ")
    assert uid not in (folder / ".photolala-mirror").read_text(), "the marker names no user id"
    # The NAS's own photo counts in the account once its catalog row is published.
    m = mirror(d.wait_for(lambda s: mirror(s)["inAccount"] == len(phone.bodies) + 1, timeout=60, what="the NAS's photo in the account"))
    assert m["folder"] == str(folder) and m["pauseReason"] is None and m["copied"] == len(phone.bodies) and m["pending"] == 0
    assert m["lastPassAt"] and m["nextCheckAt"] and m["lastError"] is None
    human = d.ctl("status", check=True).stdout
    assert f"Mirror: {len(phone.bodies)} of {len(phone.bodies)} photos on this NAS" in human, human
    listing = json.loads(d.ctl("mirror", "--json", check=True).stdout)
    assert listing["mirror"]["present"] == len(phone.bodies) and listing["pending"] == []
    samples = parse(scrape_socket(d.socket))
    assert samples[("photolala_mirror_objects", frozenset({("state", "present")}))] == len(phone.bodies)
    assert samples[("photolala_mirror_state", frozenset({("state", "idle")}))] == 1
    assert samples[("photolala_mirror_bytes_total", frozenset())] >= sum(len(v[0]) for v in expected.values())
    # The group may look, without names.
    r = d.ctl("mirror", "--json", user="nobody", groups="users")
    assert r.returncode == 0 and json.loads(r.stdout)["mirror"]["present"] == len(phone.bodies), r.stderr

    # include = "all": this NAS's own photo is copied too (reloaded, no restart).
    d.sections["mirror"]["include"] = "all"
    d.write_config()
    d.signal(signal.SIGHUP)
    d.ctl("mirror", "--pass", check=True)
    d.wait_for(lambda s: mirror(s)["present"] == len(phone.bodies) + 1, timeout=60, what="the NAS's own photo copied too")
    mine = [p for p in files_under(folder).values() if md5_hex(p.read_bytes()) == md5_hex(own)]
    assert len(mine) == 1 and mine[0].name.endswith(f" {md5_hex(own)[:8]}.jpg")


def resident_bytes(path: Path) -> int:
    """How much of the file the page cache holds (util-linux's fincore, mincore(2) underneath)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def test_a_pull_leaves_the_page_cache_to_the_nas(world, tmp_path):
    """The mirror writes its copies past the page cache and gives back the pages its
    read-back filled (docs/decisions.md): megabytes of photos pulled evict nothing the NAS
    had cached. Only each copy's tail — its last, partial page, written through the cache
    — may stay."""
    if filesystem_type(tmp_path) in ("tmpfs", "ramfs"):
        pytest.skip("on a RAM filesystem every file is the page cache")
    sub = apple_subject("mirror-cache")
    uid = user_id_for(sub)
    phone = Phone(world.moto.s3_admin(), world.moto.bucket, uid)
    for i in range(4):
        phone.take(os.urandom(3 * 1024 * 1024 + 1000 * i + 7), "JPEG", 1_650_000_000 + i * 86_400)
    phone.publish()
    folder = tmp_path / "Photolala"
    d = world.daemon(config={"mirror": {"folder": str(folder), **FAST}, "catalog": {"publish_interval": "1s"}})
    assert world.login(d, sub=sub) == uid
    d.wait_for(lambda s: mirror(s)["present"] == len(phone.bodies) and mirror(s)["state"] == "idle",
               timeout=120, what="the phone's photos mirrored")
    found = files_under(folder)
    assert len(found) == len(phone.bodies)
    # Before anything here reads them (which would fill the cache).
    cached = {rel: resident_bytes(p) for rel, p in found.items()}
    assert all(n <= 8192 for n in cached.values()), cached
    expected = phone.expected()
    for rel, (data, _) in expected.items():
        assert found[rel].read_bytes() == data, rel


def test_a_mirror_inside_a_watched_folder_uploads_nothing(world, tmp_path):
    """No loop: the mirror's copies land in a watched folder, ingest hashes them, and the
    uploader finds each already in the account: zero PUTs to photos/ for them, counted
    at the proxy in front of moto. The phone's photos come after the inventory's first
    listing, so only the mirror can have told the uploader they are in the account."""
    sub = apple_subject("mirror-loop")
    uid = user_id_for(sub)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    phone = Phone(s3, bucket, uid)
    d = world.daemon(start=False)
    folder = d.photos / "Photolala"
    d.sections["mirror"] = {"folder": str(folder), **FAST}
    d.write_config()
    d.start()
    assert world.login(d, sub=sub) == uid
    d.wait_for(lambda s: s["inventory"]["state"] == "ok" and mirror(s)["state"] == "idle" and mirror(s)["lastPassAt"],
               timeout=60, what="the first listings")
    since = time.time()
    for i in range(12):
        phone.take(images.encode(images.bands(200 + i, 150, vertical=False, size=10 + i), "JPEG"), "JPEG", 1_660_000_000 + i * 3600)
    phone.publish()
    # One photo of the NAS's own, beside: uploaded as usual.
    own = write_photo(d.photos / "own.jpg", 0, images.encode(images.bands(333, 222, vertical=False, size=30), "JPEG"))
    n = len(phone.bodies) + 1
    d.wait_for(lambda s: mirror(s)["present"] == len(phone.bodies) and settled(n)(s) and s["queue"]["uploaded"] == n,
               timeout=180, what="the copies mirrored, seen by ingest and found in the account")
    # A full pass more: still nothing sent for them.
    d.ctl("mirror", "--pass", check=True)
    time.sleep(3)
    d.wait_for(lambda s: settled(n)(s) and mirror(s)["state"] == "idle", timeout=60, what="quiet again")
    puts = photo_puts(world, uid, since)
    assert puts and all(md5_hex(own) in p for p in puts), puts
    assert len(files_under(folder)) == len(phone.bodies)
    assert d.status()["queue"]["failed"] == 0


# ---- kill -9 -------------------------------------------------------------------------------

def test_kill9_at_random_instants_of_a_200_photo_pull(world, tmp_path):
    sub = apple_subject("mirror-kill")
    uid = user_id_for(sub)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    phone = Phone(s3, bucket, uid)
    rnd = random.Random(32)
    for i in range(200):
        phone.take(body(rnd.randrange(20_000, 120_000), f"kill {i}"), "JPEG", 1_600_000_000 + i * 7_777)
    phone.publish()
    expected = phone.expected()
    folder = tmp_path / "Photolala"
    d = world.daemon(config={"mirror": {"folder": str(folder), **FAST, "download_limit": "3MiB/s"}})
    assert world.login(d, sub=sub) == uid

    def check_disk() -> set[str]:
        """No partial file under a final name, no duplicate: every file there is whole."""
        found = files_under(folder)
        seen = {}
        for rel, p in found.items():
            assert rel in expected, f"{rel}: not a name the mirror gives"
            assert p.read_bytes() == expected[rel][0], f"{rel}: not the object's bytes (a partial file under a final name)"
            md5 = md5_hex(expected[rel][0])
            assert md5 not in seen, f"{md5} twice: {seen[md5]} and {rel}"
            seen[md5] = rel
        return set(found)

    kills = 0
    for _ in range(6):
        time.sleep(rnd.uniform(0.3, 2.5))
        d.kill9()
        kills += 1
        check_disk()
        d.start()
    d.wait_for(lambda s: mirror(s)["present"] == 200, timeout=240, what="every photo after the kills")
    assert check_disk() == set(expected)
    for rel, (_, mtime) in expected.items():
        assert os.stat(folder / rel).st_mtime_ns == mtime * 10**9
    leftovers = [p for p in folder.rglob(".plmirror-*")]
    m = mirror(d.status())
    assert m["copied"] + m["adopted"] == 200 and m["refused"] == 0, m
    print(f"\n{kills} kills during the pull; {len(leftovers)} temporary files left for the next full pass to remove")


# ---- a small filesystem fills up ------------------------------------------------------------

def test_a_small_filesystem_fills_then_the_mirror_resumes_when_space_is_freed(world, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs with a size needs root")
    hook = Receiver("json").start()
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m,mode=0755", "tmpfs", str(mount)], check=True)
    try:
        sub = apple_subject("mirror-full")
        uid = user_id_for(sub)
        phone = Phone(world.moto.s3_admin(), world.moto.bucket, uid)
        # 4 MB of photos on a 6 MiB volume where 3 MiB are taken: they fit only once space is freed.
        for i in range(10):
            phone.take(body(400_000 + i, f"big {i}"), "JPEG", 1_640_000_000 + i * 60)
        phone.publish()
        expected = phone.expected()
        # Something else of the owner's takes room on the volume.
        ballast = mount / "ballast.bin"
        ballast.write_bytes(b"\0" * (3 << 20))
        folder = mount / "Photolala"
        d = world.daemon(config={"mirror": {"folder": str(folder), "check_interval": "10s", "list_interval": "1h", "min_free": "512KiB"},
                                 "notify": {"webhook": hook.url("/t"), "repeat": "1h"}},
                         env={"PHOTOLALAD_NOTIFY_CLEAR_AFTER": "1s"})
        assert world.login(d, sub=sub) == uid
        d.wait_for(lambda s: mirror(s)["state"] == "paused" and mirror(s)["pauseReason"] == "diskFull", timeout=120,
                   what="the mirror waiting for space")
        s = d.status()
        assert any(a["reason"] == "mirrorDiskFull" for a in s["attention"]), s["attention"]
        present = mirror(s)["present"]
        assert 0 < present < 10
        for rel, p in files_under(folder).items():
            assert p.read_bytes() == expected[rel][0], f"{rel} is not whole"
        time.sleep(15)
        problems = [e for e in hook.events() if e["event"] == "problem" and e["reason"] == "mirrorDiskFull"]
        assert len(problems) == 1, hook.events()
        # The owner frees space: the mirror goes on by itself.
        ballast.unlink()
        d.wait_for(lambda s: mirror(s)["present"] == 10 and mirror(s)["state"] == "idle", timeout=120, what="every photo once space was freed")
        assert set(files_under(folder)) == set(expected)
        time.sleep(3)
        assert len([e for e in hook.events() if e["event"] == "problem" and e["reason"] == "mirrorDiskFull"]) == 1, "notified once"
        d.stop()
    finally:
        hook.stop()
        for daemon in world.daemons:
            daemon.stop()
        subprocess.run(["umount", "-l", str(mount)], check=False)


# ---- the app unstars ------------------------------------------------------------------------

@pytest.mark.parametrize("rule", ["keep", "trash"])
def test_an_unstar_keeps_or_trashes_the_copy_and_nothing_is_deleted(world, tmp_path, rule):
    sub = apple_subject(f"mirror-unstar-{rule}")
    uid = user_id_for(sub)
    phone = Phone(world.moto.s3_admin(), world.moto.bucket, uid)
    kept = [phone.take(body(5000 + i, f"unstar {rule} {i}"), "JPEG", 1_630_000_000 + i) for i in range(3)]
    phone.publish()
    folder = tmp_path / "Photolala"
    d = world.daemon(config={"mirror": {"folder": str(folder), **FAST, "on_cloud_delete": rule}})
    assert world.login(d, sub=sub) == uid
    d.wait_for(lambda s: mirror(s)["present"] == 3, timeout=90, what="three copies")
    expected = phone.expected()
    gone = kept[0]
    rel = next(r for r in expected if md5_hex(expected[r][0]) == gone)
    inode = os.stat(folder / rel).st_ino
    phone.unstar(gone)
    if rule == "keep":
        d.wait_for(lambda s: mirror(s)["onlyHere"] == 1, timeout=60, what="the copy counted as only on this NAS")
        assert (folder / rel).read_bytes() == expected[rel][0] and os.stat(folder / rel).st_ino == inode
        m = mirror(d.status())
        assert m["present"] == 3 and m["trashed"] == 0
    else:
        d.wait_for(lambda s: mirror(s)["trashed"] == 1, timeout=60, what="the copy moved into .trash/")
        assert not (folder / rel).exists()
        assert (folder / ".trash" / rel).read_bytes() == expected[rel][0] and os.stat(folder / ".trash" / rel).st_ino == inode
        trail = json.loads(d.ctl("audit", "--json", check=True).stdout)["records"]
        assert [r["details"]["count"] for r in trail if r["event"] == "mirror.trash"] == [1]
    listing = json.loads(d.ctl("mirror", "--json", check=True).stdout)
    assert [i["md5"] for i in listing["onlyHere"]] == ([gone] if rule == "keep" else [])
    # Nothing is fetched again, nothing deleted.
    assert {md5_hex(p.read_bytes()) for p in files_under(folder).values()} == set(kept) - ({gone} if rule == "trash" else set())


# ---- untrusted bodies ------------------------------------------------------------------------

def test_a_body_whose_md5_is_not_its_key_and_one_longer_than_listed_are_refused(world, tmp_path):
    sub = apple_subject("mirror-forged")
    uid = user_id_for(sub)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    phone = Phone(s3, bucket, uid)
    good = phone.take(body(4000, "good"), "JPEG", 1_620_000_000)
    forged_key = md5_hex(b"what the key says")
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{forged_key}.dat", Body=body(4000, "other bytes"), ContentType="image/jpeg")
    # Listed at its size, replaced by a longer body before the GET (held by the proxy).
    grows = phone.take(body(6000, "grows"), "JPEG", 1_620_000_100)
    phone.publish()
    world.proxy.set_faults(match=rf"^GET [^?]*/{grows}\.dat", latency=4.0)
    folder = tmp_path / "Photolala"
    d = world.daemon(config={"mirror": {"folder": str(folder), **FAST}})
    since = time.time()
    assert world.login(d, sub=sub) == uid
    # The GET has arrived at the proxy and waits there: its object changes under it, after
    # the listing that sent it (a new listing would learn the new size and rightly take it
    # for another object, refused for its MD5).
    deadline = time.time() + 60
    while not [h for h in world.proxy.stats()["held"] if h["time"] >= since and h["method"] == "GET" and grows in h["path"]]:
        assert time.time() < deadline, "no GET of the object that grows"
        time.sleep(0.02)
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{grows}.dat", Body=body(6000, "grows") + b"and then some more")
    d.wait_for(lambda s: mirror(s)["refused"] == 2 and mirror(s)["present"] == 1, timeout=90, what="two refusals")
    world.proxy.clear_faults()
    found = files_under(folder)
    assert [md5_hex(p.read_bytes()) for p in found.values()] == [good], "nothing refused is under a final name"
    assert not list(folder.rglob(".plmirror-*")), "nor in a temporary file"
    refused = {i["md5"]: i for i in json.loads(d.ctl("mirror", "--json", check=True).stdout)["refused"]}
    assert set(refused) == {forged_key, grows}
    # Refused objects are tried again later; by then a listing knows the longer size, and
    # the longer bytes are refused for their MD5.
    assert "MD5" in refused[forged_key]["lastError"], refused
    assert "6018" in refused[grows]["lastError"] or "MD5" in refused[grows]["lastError"], refused
    trail = json.loads(d.ctl("audit", "--json", check=True).stdout)["records"]
    whys: dict[str, list[str]] = {}
    for r in trail:
        if r["event"] == "mirror.refused":
            whys.setdefault(r["details"]["key"], []).append(r["details"]["why"])
    assert set(whys) == {f"photos/{uid}/{forged_key}.dat", f"photos/{uid}/{grows}.dat"}, whys
    assert "6018" in whys[f"photos/{uid}/{grows}.dat"][0], "the first refusal names the size the answer said"
    assert parse(scrape_socket(d.socket))[("photolala_mirror_refused_total", frozenset())] >= 2


# ---- archive classes -------------------------------------------------------------------------

def test_an_archived_object_is_counted_then_asked_back_and_fetched(world, tmp_path):
    sub = apple_subject("mirror-glacier")
    uid = user_id_for(sub)
    phone = Phone(world.moto.s3_admin(), world.moto.bucket, uid)
    cold = phone.take(body(3000, "cold"), "JPEG", 1_610_000_000, storage_class="GLACIER")
    warm = phone.take(body(3100, "warm"), "JPEG", 1_610_000_100)
    phone.publish()
    folder = tmp_path / "Photolala"
    d = world.daemon(config={"mirror": {"folder": str(folder), **FAST}})
    since = time.time()
    assert world.login(d, sub=sub) == uid
    d.wait_for(lambda s: mirror(s)["present"] == 1 and mirror(s)["archived"] == 1, timeout=60, what="one copied, one archived")
    ops = world.s3_ops(since=since)
    assert not [r for r in ops if r["method"] == "POST" and "restore" in r["path"]], "not asked back without thaw_archived"
    assert not [r for r in ops if r["op"] == "GetObject" and cold in r["path"]], "never a GET that would fail"
    assert "1 in an archive class" in d.ctl("status", check=True).stdout
    # thaw_archived: asked back (Bulk), then fetched once readable (the proxy holds it a few seconds).
    world.proxy.set_faults(archive_delay=5.0)
    d.sections["mirror"]["thaw_archived"] = True
    d.write_config()
    d.signal(signal.SIGHUP)
    d.ctl("mirror", "--pass", check=True)
    d.wait_for(lambda s: mirror(s)["present"] == 2, timeout=120, what="the archived photo fetched once thawed")
    asks = [r for r in world.s3_ops(since=since) if r["method"] == "POST" and "restore" in r["path"]]
    assert len(asks) == 1, asks
    assert {md5_hex(p.read_bytes()) for p in files_under(folder).values()} == {cold, warm}


# ---- known by MD5: renames, moves, deletes, refill, adoption -------------------------------

def test_renamed_moved_and_deleted_copies_are_not_fetched_again_until_refill(world, tmp_path):
    sub = apple_subject("mirror-moves")
    uid = user_id_for(sub)
    phone = Phone(world.moto.s3_admin(), world.moto.bucket, uid)
    md5s = [phone.take(body(7000 + i, f"moves {i}"), "JPEG", 1_625_000_000 + i * 100) for i in range(5)]
    phone.publish()
    expected = phone.expected()
    d = world.daemon()
    assert world.login(d, sub=sub) == uid
    # First, an export by date into the folder (every NAS lost, say): the mirror adopts it.
    folder = tmp_path / "Photolala"
    r = d.ctl("restore", "--by-date", "--to", str(folder), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(files_under(folder)) == set(expected)
    since = time.time()
    d.sections["mirror"] = {"folder": str(folder), **FAST}
    d.write_config()
    d.signal(signal.SIGHUP)
    d.wait_for(lambda s: mirror(s)["adopted"] == 5 and mirror(s)["state"] == "idle", timeout=90, what="the export adopted")
    gets = lambda: [r for r in world.s3_ops(since=since) if r["op"] == "GetObject" and f"/photos/{uid}/" in r["path"]]
    assert gets() == [], "adopted without one GET of a photo"

    names = {md5_hex(v[0]): k for k, v in expected.items()}
    os.rename(folder / names[md5s[0]], folder / names[md5s[0]].replace(".jpg", " renamed.jpg"))
    (folder / "Album").mkdir()
    os.rename(folder / names[md5s[1]], folder / "Album" / "moved.jpg")
    os.unlink(folder / names[md5s[2]])
    elsewhere = tmp_path / "elsewhere.jpg"
    os.rename(folder / names[md5s[3]], elsewhere)
    d.ctl("mirror", "--pass", check=True)
    d.wait_for(lambda s: mirror(s)["removedHere"] == 2 and mirror(s)["state"] == "idle", timeout=60,
               what="the deleted and moved-away copies seen as removed here")
    time.sleep(2)
    assert gets() == [], "nothing fetched again"
    assert mirror(d.status())["present"] == 3
    r = d.ctl("mirror", "--refill", user="nobody", groups="users")
    assert r.returncode == 4, "a member of the group may not refill"
    r = d.ctl("mirror", "--refill", check=True)
    assert "2 copies" in r.stdout, r.stdout
    d.wait_for(lambda s: mirror(s)["present"] == 5 and mirror(s)["removedHere"] == 0, timeout=60, what="the refill")
    assert len(gets()) == 2
    assert (folder / names[md5s[2]]).read_bytes() == expected[names[md5s[2]]][0]
    trail = json.loads(d.ctl("audit", "--json", check=True).stdout)["records"]
    assert [r["details"]["count"] for r in trail if r["event"] == "mirror.refill"] == [2]


# ---- the idle mirror ---------------------------------------------------------------------------

def test_an_unchanged_pointer_costs_one_request_per_check(world, tmp_path):
    sub = apple_subject("mirror-idle")
    uid = user_id_for(sub)
    phone = Phone(world.moto.s3_admin(), world.moto.bucket, uid)
    phone.take(body(3000, "idle"), "JPEG", 1_615_000_000)
    phone.publish()
    folder = tmp_path / "Photolala"
    d = world.daemon(config={"mirror": {"folder": str(folder), "check_interval": "10s", "list_interval": "1h"},
                             "catalog": {"check_interval": "1h", "publish_interval": "1h"}, "upload": {"inventory_interval": "1h"}})
    assert world.login(d, sub=sub) == uid
    d.wait_for(lambda s: mirror(s)["present"] == 1 and mirror(s)["state"] == "idle", timeout=60, what="the first pass")
    time.sleep(12)
    since = time.time()
    time.sleep(61)
    ops = [r for r in world.s3_ops(since=since) if r["time"] < since + 60]
    pointer = [r for r in ops if r["op"] == "GetObject" and r["path"].endswith("/.photolala.md5")]
    others = [r for r in ops if r not in pointer]
    assert others == [], [(r["op"], r["path"]) for r in others]
    assert 5 <= len(pointer) <= 7, len(pointer)
