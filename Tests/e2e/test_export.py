"""Every photo of the account, by date (privacy.md "Export every photo of the account"):
`photolalactl restore --by-date --to DIR` on a NAS that does not hold the recovery key
writes every object under photos/{userId}/ — a phone's (objects and catalog rows written
straight into the bucket, as the apps do, plus a video and a photo with no row) and
another NAS's (backed up through the whole daemon: upload, thumbnails, catalog) — once,
named `YYYY/MM/YYYY-MM-DD HH.MM.SS <md5[:8]>.<ext>`, dated (name and mtime) by the
catalog's photo_date, else by the object's time; a second run writes nothing; keys in the
bucket that are not a photo's object are reported and nothing is written outside DIR.
Against moto (auth enforced) through the fault proxy, credentials from the fake backend."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import time
from pathlib import Path

from support import images
from support.app_catalog import fake_body, fake_row, md5_hex, publish_as_app, read_catalog
from support.daemon import binary
from support.fake_backend import user_id_for
from support.world import apple_subject

CATALOG = {"catalog": {"publish_interval": "1s", "check_interval": "1h"}}


def name(date: int, md5: str, ext: str, whole: bool = False) -> str:
    """privacy.md's name, in UTC."""
    t = time.gmtime(date)
    return time.strftime("%Y/%m/%Y-%m-%d %H.%M.%S", t) + f" {md5 if whole else md5[:8]}.{ext}"


def files_under(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def last_modified(s3, bucket: str, key: str) -> int:
    return int(s3.head_object(Bucket=bucket, Key=key)["LastModified"].timestamp())


def test_every_photo_of_the_account_by_date_without_the_key(world, tmp_path):
    sub = apple_subject("export")
    uid = user_id_for(sub)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    expected: dict[str, tuple[bytes, int]] = {}   # name under DIR -> (bytes, mtime)

    # ---- a phone: objects and catalog rows straight into the bucket, as the apps write them
    phone = [fake_row(f"phone {i}", 1_650_000_000 + i * 86_400 + 3_661, fmt, size=3000 + i)
             for i, fmt in enumerate(["HEIF", "JPEG", "PNG", "RAW-DNG"])]
    types = {"HEIF": "image/heif", "JPEG": "image/jpeg", "PNG": "image/png", "RAW-DNG": "image/x-adobe-dng"}
    exts = {"HEIF": "heic", "JPEG": "jpg", "PNG": "png", "RAW-DNG": "dng"}
    for r in phone:
        s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{r.md5}.dat", Body=fake_body(r.seed, r.size),
                      ContentType=types[r.format], Metadata={"original-format": r.format})
        expected[name(r.date, r.md5, exts[r.format])] = (fake_body(r.seed, r.size), r.date)
    # A row dated outside 1970–2099 (the catalog is app-writable): its object's time.
    odd = fake_row("phone odd date", 5_000_000_000, "JPEG", size=2500)
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{odd.md5}.dat", Body=fake_body(odd.seed, odd.size), ContentType="image/jpeg")
    # A video: no row; its content type names it.
    video = images.mp4_header() + os.urandom(50_000)
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{md5_hex(video)}.dat", Body=video, ContentType="video/mp4",
                  Metadata={"original-format": "MP4"})
    # A photo with no row and nothing in its headers: its first bytes say PNG.
    bare = images.png_declaring(64, 48) + os.urandom(1000)
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{md5_hex(bare)}.dat", Body=bare)
    publish_as_app(s3, bucket, uid, [r.line for r in phone] + [odd.line])
    for body, ext in ((fake_body(odd.seed, odd.size), "jpg"), (video, "mp4"), (bare, "png")):
        t = last_modified(s3, bucket, f"photos/{uid}/{md5_hex(body)}.dat")
        expected[name(t, md5_hex(body), ext)] = (body, t)

    # ---- a NAS: real photos through the whole daemon, its rows merged into the catalog
    a = world.daemon("a", config=CATALOG)
    assert world.login(a, sub=sub) == uid
    pattern = images.upright_pattern(640, 480)
    ours = {
        "2021/dated.jpg": images.encode(pattern, "JPEG", exif=images.exif("2021:05:06 07:08:09", "+09:00")),
        "2019/other.jpg": images.encode(pattern, "JPEG", quality=60, exif=images.exif("2019:12:31 23:30:00", "+00:00")),
        "clips/clip.mp4": images.mp4_header() + os.urandom(20_000),
    }
    staging = tmp_path / "staging"
    for rel, body in ours.items():
        p = staging / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body)
        os.utime(p, (1_555_555_555, 1_555_555_555))
    for top in os.listdir(staging):
        os.rename(staging / top, a.photos / top)
    a.wait_for(lambda s: s["queue"]["uploaded"] == len(ours) and s["catalog"]["state"] == "published" and s["catalog"]["rows"] == 2
               and s["thumbnails"]["pending"] == 0, timeout=120, what="the NAS's photos uploaded and in the catalog")
    rows = {r.md5: r for r in read_catalog(s3, bucket, uid).rows}
    assert rows[md5_hex(ours["2021/dated.jpg"])].date == 1_620_252_489
    for rel, body in ours.items():
        m = md5_hex(body)
        if m in rows:
            expected[name(rows[m].date, m, "jpg")] = (body, rows[m].date)
        else:
            t = last_modified(s3, bucket, f"photos/{uid}/{m}.dat")
            expected[name(t, m, "mp4")] = (body, t)

    # ---- a second NAS of the account, without the recovery key
    b = world.daemon("b")
    assert world.login(b, sub=sub) == uid
    # The account key was made by NAS a: b has no recovery key and cannot read any manifest.
    b.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=60, what="b without the account's key")
    out = tmp_path / "export"

    # A member of the socket's group may look, not write.
    r = b.ctl("restore", "--by-date", "--to", str(out), "--dry-run", "--json", user="nobody", groups="users")
    assert r.returncode == 0, r.stdout + r.stderr
    dry = json.loads(r.stdout)
    assert dry["byDate"] and dry["files"] == len(expected) and {i["action"] for i in dry["items"]} == {"restore"}
    r = b.ctl("restore", "--by-date", "--to", str(out), user="nobody", groups="users")
    assert r.returncode == 4 and "--dry-run" in r.stderr, r.stdout + r.stderr
    assert not out.exists()

    r = b.ctl("restore", "--by-date", "--to", str(out), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Exported {len(expected)} files of {len(expected)}" in r.stdout, r.stdout
    found = files_under(out)
    assert set(found) == set(expected), (sorted(set(found) - set(expected)), sorted(set(expected) - set(found)))
    for rel, (body, mtime) in expected.items():
        assert found[rel].read_bytes() == body, rel
        assert os.stat(found[rel]).st_mtime_ns == mtime * 10**9, (rel, os.stat(found[rel]).st_mtime_ns)
    stamps = {rel: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for rel, p in found.items()}

    # ---- a second run writes nothing
    since = time.time()
    r = b.ctl("restore", "--by-date", "--to", str(out), "--json", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    again = json.loads(r.stdout)
    assert again["restored"] == 0 and again["alreadyThere"] == len(expected) and again["problems"] == [], again
    assert again["dated"] == {"catalog": len(phone) + 2, "object": 4, "none": 0}, again["dated"]
    assert {rel: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for rel, p in files_under(out).items()} == stamps
    # No object read again: only the first bytes of the one whose headers say nothing.
    reads = [q["path"] for q in world.proxy.stats()["requests"] if q["time"] >= since and q["method"] == "GET"
             and f"/photos/{uid}/" in q["path"] and "list-type" not in q["path"]]
    assert all(md5_hex(bare) in p for p in reads), reads[:3]

    # ---- keys that are not a photo's object: reported, nothing written outside DIR
    hostile = [f"photos/{uid}/../x.dat", f"photos/{uid}/{md5_hex(b'evil').upper()}.dat", f"photos/{uid}/sub/{md5_hex(b'evil')}.dat",
               f"photos/{uid}/{md5_hex(b'evil')}.dat.jpg", f"photos/{uid}/x/../../../../etc/evil.dat"]
    for key in hostile:
        s3.put_object(Bucket=bucket, Key=key, Body=b"evil")
    listed = {o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"photos/{uid}/")
              for o in page.get("Contents", [])}
    hostile = [k for k in hostile if k in listed]
    assert f"photos/{uid}/../x.dat" in hostile, listed
    before = sorted(os.listdir(tmp_path))
    r = b.ctl("restore", "--by-date", "--to", str(out), "--json", timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["skipped"] == len(hostile) and report["restored"] == 0 and report["alreadyThere"] == len(expected)
    assert {p["path"] for p in report["problems"] if p["kind"] == "skipped"} == set(hostile)
    assert set(files_under(out)) == set(expected)
    assert sorted(os.listdir(tmp_path)) == before
    assert not Path("/etc/evil.dat").exists()
    human = b.ctl("restore", "--by-date", "--to", str(out), timeout=120)
    assert human.returncode == 1 and "../x.dat" in human.stdout and "left alone" in human.stdout, human.stdout

    # ---- the trail: who exported, where to, how many
    r = b.ctl("audit", "--json", check=True)
    exports = [rec for rec in json.loads(r.stdout)["records"] if rec["event"] == "restore" and rec["details"].get("byDate")]
    finished = [rec for rec in exports if rec["details"]["step"] == "finished"]
    assert len(finished) == 4 and all(rec["details"]["to"] == str(out) for rec in exports)
    assert finished[0]["details"]["written"] == len(expected) and finished[0]["outcome"] == "ok"
    assert finished[0]["actor"]["uid"] == 0


def test_without_a_catalog_every_file_is_dated_by_its_object(world, tmp_path):
    """An account the apps never catalogued (only objects): every file by its object's
    time; a catalog pointer naming a snapshot that is not there changes nothing."""
    sub = apple_subject("export-bare")
    uid = user_id_for(sub)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    bodies = {"jpg": b"\xff\xd8\xff\xe0" + os.urandom(3000), "heic": struct.pack(">I", 24) + b"ftypheic" + os.urandom(2000),
              "bin": b"nothing known" + os.urandom(1500)}
    for body in bodies.values():
        s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{md5_hex(body)}.dat", Body=body)
    d = world.daemon("d")
    assert world.login(d, sub=sub) == uid
    out = tmp_path / "out"
    for pointer in (None, "0" * 32):
        if pointer:
            s3.put_object(Bucket=bucket, Key=f"catalogs/{uid}/.photolala.md5", Body=pointer.encode())
        r = d.ctl("restore", "--by-date", "--to", str(out), "--json", timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        s = json.loads(r.stdout)
        assert s["catalog"]["state"] == ("unreadable" if pointer else "none") and s["dated"]["object"] == len(bodies)
    for ext, body in bodies.items():
        m = md5_hex(body)
        rel = name(last_modified(s3, bucket, f"photos/{uid}/{m}.dat"), m, ext)
        assert (out / rel).read_bytes() == body, rel


def test_killed_mid_export_it_resumes_archive_first_and_a_name_collision(world, tmp_path):
    """kill -9 of the command mid-export: no partial file at a final name, and the next run
    completes without reading again any object whose file was complete. An object in
    DEEP_ARCHIVE is asked back (RestoreObject, which moto answers) before any photo's bytes
    are read. Two photos whose names would collide (same second, same first 8 hex digits)
    both come back, the later in key order under its whole MD5."""
    sub = apple_subject("export-kill")
    uid = user_id_for(sub)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    expected: dict[str, bytes] = {}
    rows = []
    for i in range(40):
        r = fake_row(f"kill {i}", 1_600_000_000 + i * 3_600, "JPEG", size=60_000 + i)
        s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{r.md5}.dat", Body=fake_body(r.seed, r.size), ContentType="image/jpeg")
        rows.append(r.line)
        expected[name(r.date, r.md5, "jpg")] = fake_body(r.seed, r.size)
    # Their MD5s share 508efc84; the catalog dates both 2022-04-15 05.20.00.
    early, late = b"collide 57155", b"collide 165688"
    assert md5_hex(early)[:8] == md5_hex(late)[:8] and md5_hex(early) < md5_hex(late)
    for body in (late, early):
        s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{md5_hex(body)}.dat", Body=body, ContentType="image/jpeg")
        rows.append(f"{md5_hex(body)},{len(body)},{md5_hex(body)},1650000000,JPEG")
    expected[name(1_650_000_000, md5_hex(early), "jpg")] = early
    expected[name(1_650_000_000, md5_hex(late), "jpg", whole=True)] = late
    cold = b"\xff\xd8\xff\xe0 cold" + os.urandom(5000)
    cold_key = f"photos/{uid}/{md5_hex(cold)}.dat"
    s3.put_object(Bucket=bucket, Key=cold_key, Body=cold, ContentType="image/jpeg", StorageClass="DEEP_ARCHIVE")
    rows.append(f"{md5_hex(cold)},{len(cold)},{md5_hex(cold)},1700000000,JPEG")
    expected[name(1_700_000_000, md5_hex(cold), "jpg")] = cold
    publish_as_app(s3, bucket, uid, rows)

    d = world.daemon("k")
    assert world.login(d, sub=sub) == uid
    out = tmp_path / "out"

    def complete() -> dict[str, Path]:
        return {rel: p for rel, p in files_under(out).items() if not os.path.basename(rel).startswith(".plrestore-")} if out.exists() else {}

    def photo_reads(since: float) -> list[str]:
        return [q["path"] for q in world.proxy.stats()["requests"] if q["time"] >= since and q["method"] == "GET"
                and f"/photos/{uid}/" in q["path"] and "list-type" not in q["path"]]

    since = time.time()
    world.proxy.set_faults(latency=1.0, match=f"^GET [^?]*/photos/{uid}/")
    try:
        cli = subprocess.Popen([binary(), "ctl", "restore", "--by-date", "--to", str(out), "--socket", d.socket],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while len(complete()) < 5:
            assert cli.poll() is None, cli.communicate()
            assert time.monotonic() < deadline, "fewer than 5 files after 60 s"
            time.sleep(0.05)
        cli.kill()
        cli.wait(10)
    finally:
        world.proxy.clear_faults()
    done = complete()
    assert 5 <= len(done) < len(expected), "the command was not killed mid-export"
    for rel, p in done.items():
        assert rel in expected and p.read_bytes() == expected[rel], rel
    # Asked back before any photo's bytes were read, once.
    requests = [q for q in world.proxy.stats()["requests"] if q["time"] >= since]
    asked = [i for i, q in enumerate(requests) if q["method"] == "POST" and "restore" in q["path"]]
    first_read = next(i for i, q in enumerate(requests) if q["method"] == "GET" and f"/photos/{uid}/" in q["path"]
                      and "list-type" not in q["path"])
    assert len(asked) == 1 and cold_key in requests[asked[0]]["path"] and asked[0] < first_read, requests[:5]

    # The proxy records a request when it is answered: the killed run's reads still held
    # by the latency end first, so the second run's are told apart.
    quiet_since = give_up = time.monotonic()
    seen = world.proxy.stats()["total"]
    while time.monotonic() - quiet_since < 2.0 and time.monotonic() - give_up < 30:
        time.sleep(0.1)
        if world.proxy.stats()["total"] != seen:
            seen, quiet_since = world.proxy.stats()["total"], time.monotonic()
    since = time.time()
    r = d.ctl("restore", "--by-date", "--to", str(out), "--json", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads(r.stdout)
    assert summary["restored"] == len(expected) - len(done) and summary["alreadyThere"] == len(done), summary
    found = files_under(out)
    assert set(found) == set(expected), (sorted(set(found) - set(expected)), sorted(set(expected) - set(found)))
    for rel, body in expected.items():
        assert found[rel].read_bytes() == body, rel
    # Nothing complete was read again.
    done_md5s = {md5 for md5 in (md5_hex(expected[rel]) for rel in done)}
    again = photo_reads(since)
    assert not [p for p in again if any(m in p for m in done_md5s)], again
    assert len(again) == len(expected) - len(done), again
