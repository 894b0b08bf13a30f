"""Knowing what the bucket holds, end to end (issue 14): the real photolalad against moto
(signatures and session tokens enforced) with real STS credentials from the fake backend,
every S3 request through the fault proxy, which counts them (and, where a test says so,
breaks them). Objects the daemon sent are read back and their MD5 checked against their
keys; every daemon log line is checked for secrets."""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support.fake_backend import user_id_for
from support.world import LISTING, apple_subject, md5_hex, settled, write_photo

MiB = 1 << 20
SMALL_MULTIPART = {"upload": {"multipart_threshold": "5MiB", "part_size": "5MiB"}}


def ops(world, since: float = 0.0) -> Counter:
    return Counter(r["op"] for r in world.s3_ops(since))


def seed(world, uid: str, bodies: list[bytes]) -> None:
    """Another client (a phone, with its own STS credentials for the same user) uploaded
    these before this NAS ever saw them."""
    credentials = world.backend._vend(uid)["credentials"]
    s3 = world.moto.s3_with(credentials)

    def put(body: bytes):
        s3.put_object(Bucket=world.moto.bucket, Key=world.key(uid, body), Body=body, ContentType="image/jpeg")
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, bodies))


def verify(d, *args, **kw) -> tuple[int, dict]:
    r = d.ctl("verify", "--json", *args, timeout=120, **kw)
    assert r.stdout.strip(), r.stderr
    return r.returncode, json.loads(r.stdout)


# ---- already there: nothing sent, nothing asked ---------------------------------------------

def test_photos_already_in_the_bucket_cost_no_put_and_no_head(world):
    sub = apple_subject("inventory")
    uid = user_id_for(sub)
    bodies = [os.urandom(2000 + i) for i in range(1100)]
    seed(world, uid, bodies)
    world.proxy.reset_stats()

    d = world.daemon()
    # Most are on disk (and hashed) before the sign-in, as on a NAS set up before pairing…
    for i, body in enumerate(bodies[:1050]):
        write_photo(d.photos / f"roll/{i:04d}.jpg", 0, body)
    d.wait_for(lambda s: s["queue"]["pending"] == 1050 and s["queue"]["hashing"] == 0, timeout=60, what="1050 hashed")
    world.login(d, sub=sub)
    d.wait_for(settled(1050), timeout=60, what="marked uploaded from the listing")
    # …the rest arrive after the listing, and are found in the inventory.
    for i, body in enumerate(bodies[1050:]):
        write_photo(d.photos / f"later/{i:04d}.jpg", 0, body)
    fresh = write_photo(d.photos / "new.jpg", 4321)
    s = d.wait_for(settled(len(bodies) + 1), timeout=60, what="every file backed up")

    counted = ops(world)
    assert counted["HeadObject"] == 0, counted
    # One PUT, for the one photo the bucket did not have, and only if the key was free.
    puts = [r for r in world.s3_ops() if r["op"] == "PutObject"]
    assert [(r["path"], r["ifNoneMatch"]) for r in puts] == [(f"/{world.moto.bucket}/{world.key(uid, fresh)}", "*")]
    # photos/: 2 pages of 1,000; thumbnails/: 1 empty page.
    n = len(bodies)
    assert counted["ListObjectsV2"] <= math.ceil(n / 1000) + 1, counted
    assert set(counted) == {"ListObjectsV2", "PutObject"}, counted
    assert s["inventory"]["state"] == "ok" and s["inventory"]["objects"] == n
    assert s["inventory"]["uploadsCheck"] == "inventory"
    # The bucket holds exactly what it did, plus the new photo, each body's MD5 its key.
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies + [fresh]}
    print(f"{n} photos already there: requests {dict(counted)}")

    # Put there by the phone after the listing: the conditional PUT is refused with 412,
    # which means backed up; what the phone stored stays.
    late = os.urandom(5555)
    seed(world, uid, [late])
    t = time.time()
    write_photo(d.photos / "late.jpg", 0, late)
    d.wait_for(settled(len(bodies) + 2), timeout=30, what="the late photo backed up")
    assert [(r["op"], r["status"], r["ifNoneMatch"]) for r in world.s3_ops(t)] == [("PutObject", 412, "*")]
    assert "already backed up" in d.log()


def test_listing_refused_falls_back_to_head_and_everything_is_uploaded(world):
    # A stricter backend leaves s3:ListBucket out of the session policy. moto does not
    # enforce session policies, so the fault proxy answers the daemon's listings 403
    # AccessDenied exactly as S3 would under that policy.
    world.backend.configure(list_bucket=False)
    world.proxy.set_faults(access_denied=True, match=LISTING)
    sub = apple_subject("nolist")
    uid = user_id_for(sub)
    there = os.urandom(30_000)
    seed(world, uid, [there])
    d = world.daemon(config=SMALL_MULTIPART)
    world.login(d, sub=sub)
    assert not [st for st in world.backend.sts_sessions()[-1]["policy"]["Statement"] if st["Action"] == "s3:ListBucket"]
    s = d.wait_for(lambda s: s["inventory"]["state"] == "refused", timeout=30, what="the listing refused")
    assert "403" in (s["inventory"]["lastError"] or "")
    write_photo(d.photos / "there.jpg", 0, there)
    bodies = [write_photo(d.photos / f"p{i}.jpg", 20_000 + i) for i in range(5)]
    bodies.append(write_photo(d.photos / "clip.mov", 2 * 5 * MiB + 77))
    s = d.wait_for(settled(len(bodies) + 1), timeout=60, what="everything uploaded with HEAD first")
    assert s["inventory"]["uploadsCheck"] == "head"
    counted = ops(world)
    assert counted["HeadObject"] == len(bodies) + 1, counted
    # The one already there was found by its HEAD and not sent again.
    assert not [r for r in world.s3_ops() if r["method"] in ("PUT", "POST") and world.key(uid, there) in r["path"]]
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies + [there]}
    human = d.ctl("status", check=True).stdout
    assert "listing refused (403)" in human
    # verify needs a listing; it says so in one line and what to do instead.
    r = d.ctl("verify")
    assert r.returncode == 1 and "--deep" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# ---- verify --------------------------------------------------------------------------------

def test_verify_proves_objects_from_etags_and_lost_ones_are_sent_again(world):
    # inventory_interval: the shortest allowed, so the periodic listing comes within a minute.
    d = world.daemon(config={**SMALL_MULTIPART, "upload": {**SMALL_MULTIPART["upload"], "inventory_interval": "1m"}})
    uid = world.login(d)
    a = write_photo(d.photos / "a.jpg", 40_000)
    b = write_photo(d.photos / "b.jpg", 50_000)
    m = write_photo(d.photos / "m.mov", 2 * 5 * MiB + 4321)       # 3 parts
    d.wait_for(settled(3), timeout=60, what="3 files backed up")
    s3 = world.moto.s3_admin()
    bucket = world.moto.bucket
    multipart_etag = s3.head_object(Bucket=bucket, Key=world.key(uid, m))["ETag"].strip('"')
    assert multipart_etag.endswith("-3")

    # Everything is there: proved from a listing, nothing downloaded.
    t = time.time()
    code, result = verify(d)
    assert code == 0, result
    assert (result["checked"], result["missing"], result["mismatched"], result["unproven"]) == (3, 0, 0, 0), result
    assert result["checkedAt"] and not result["running"]
    assert ops(world, t)["GetObject"] == 0 and ops(world, t)["HeadObject"] == 0

    # The multipart object's bytes replaced (same size, one PUT by another tool): its ETag
    # is no longer the MD5 of the part MD5s recorded when it was sent. Still no download.
    s3.put_object(Bucket=bucket, Key=world.key(uid, m), Body=os.urandom(len(m)))
    t = time.time()
    code, result = verify(d)
    assert code == 1 and (result["wrongETag"], result["mismatched"], result["requeued"]) == (1, 1, 1), result
    assert ops(world, t)["GetObject"] == 0
    d.wait_for(settled(3), timeout=60, what="the multipart object sent again")
    resent = [r for r in world.s3_ops(t) if r["op"] == "CreateMultipartUpload"]
    assert len(resent) == 1 and resent[0]["ifNoneMatch"] is None

    # An object deleted behind the daemon's back: verify finds it missing, it goes up again.
    s3.delete_object(Bucket=bucket, Key=world.key(uid, a))
    r = d.ctl("verify", timeout=120)
    assert r.returncode == 1 and "missing             1" in r.stdout and "queued to be sent again" in r.stdout, r.stdout
    d.wait_for(lambda s: settled(3)(s) and world.key(uid, a) in world.objects(uid), timeout=60, what="a sent again")
    s = d.status()
    assert s["verify"]["missing"] == 1 and s["verify"]["checkedAt"]
    assert "Verified" in d.ctl("status", check=True).stdout

    # Another deleted: the next periodic listing (a minute after the last) finds it.
    listed_before = s["inventory"]["listedAt"]
    s3.delete_object(Bucket=bucket, Key=world.key(uid, b))
    d.wait_for(lambda s: s["inventory"]["listedAt"] != listed_before and settled(3)(s)
               and world.key(uid, b) in {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])},
               timeout=100, interval=1.0, what="the periodic listing and b sent again")
    assert "the bucket lacks objects this NAS backed up" in d.log()
    assert set(world.objects(uid)) == {world.key(uid, x) for x in (a, b, m)}
    code, result = verify(d)
    assert code == 0 and result["missing"] == result["mismatched"] == 0, result


def test_verify_deep_reads_back_and_what_was_wrong_is_sent_again(world):
    d = world.daemon()
    uid = world.login(d)
    bodies = [write_photo(d.photos / f"d{i}.jpg", 30_000 + i) for i in range(6)]
    d.wait_for(settled(6), timeout=60, what="6 files backed up")
    s3 = world.moto.s3_admin()
    # x: its bytes replaced in the bucket, same size (the ETag shows it too);
    # y: stored right, but what comes back when it is read is not (only reading finds it).
    x, y = bodies[0], bodies[1]
    s3.put_object(Bucket=world.moto.bucket, Key=world.key(uid, x), Body=os.urandom(len(x)))
    world.proxy.set_faults(corrupt_body=True, match=rf"^GET /{world.moto.bucket}/{world.key(uid, y)}$")
    t = time.time()
    code, result = verify(d, "--deep", "100")
    assert code == 1, result
    assert result["deepPercent"] == 100 and result["readBack"] == 5, result      # x went back in the queue first
    assert (result["wrongETag"], result["readBackWrong"], result["mismatched"], result["requeued"]) == (1, 1, 2, 2), result
    gets = [r for r in world.s3_ops(t) if r["op"] == "GetObject"]
    assert len(gets) == 5 and world.proxy.stats()["faults"]["corrupted"] == 1
    world.proxy.clear_faults()
    d.wait_for(settled(6), timeout=60, what="x and y sent again")
    again = [r for r in world.s3_ops(t) if r["op"] == "PutObject"]
    assert sorted(r["path"] for r in again) == sorted(f"/{world.moto.bucket}/{world.key(uid, b)}" for b in (x, y))
    assert all(r["ifNoneMatch"] is None for r in again), "what the bucket holds wrong is replaced unconditionally"
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    # --deep 1 of 6 objects still reads one back; the one never read back before comes first.
    code, result = verify(d, "--deep", "1")
    assert code == 0 and result["readBack"] == 1 and result["mismatched"] == 0, result
    human = d.ctl("verify", "--deep", "50", timeout=120)
    assert human.returncode == 0 and "Read back 3 objects (--deep 50%): every one's MD5 matches its key." in human.stdout, human.stdout


# ---- files -----------------------------------------------------------------------------------

@pytest.fixture
def listable():
    """A watched folder a member of the socket's group can list: since issue 31 (names only
    for those who may read them) `files` answers a member only there, and pytest's own
    temporary folders are root's alone."""
    base = Path(tempfile.mkdtemp(prefix="pl-files-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_files_answers_for_an_uploaded_a_pending_a_failed_file_and_a_folder(world, listable):
    d = world.daemon(config={"watch": {"folders": [str(listable)]}})
    uid = world.login(d)
    folder = listable / "2024"
    up = write_photo(folder / "up.jpg", 11_000)
    d.wait_for(settled(1), timeout=30)
    bad = os.urandom(12_000)
    # S3 refuses this one object for good (403 on its PUT): the file ends up failed.
    world.proxy.set_faults(access_denied=True, match=rf"^PUT /{world.moto.bucket}/{world.key(uid, bad)}")
    write_photo(folder / "bad.jpg", 0, bad)
    d.wait_for(lambda s: s["queue"]["failed"] == 1, timeout=30, what="the refused file failed")
    d.ctl("pause", check=True)
    write_photo(folder / "wait.jpg", 13_000)
    write_photo(folder / "notes.txt", 100)
    d.wait_for(lambda s: s["queue"]["pending"] == 1 and s["queue"]["hashing"] == 0, timeout=30, what="one pending")

    # One file by name, as a member of the socket's group (a read).
    r = d.ctl("files", str(folder / "up.jpg"), user="nobody", groups="users")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == [str(folder / "up.jpg"), "  state       uploaded — backed up"]
    assert f"  key         {world.key(uid, up)}" in r.stdout and f"  md5         {md5_hex(up)}" in r.stdout

    # The folder: one line a file, then the counts; a relative path works too.
    r = d.ctl("files", str(folder), check=True)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("STATE") and lines[-1] == "3 files: 1 uploaded, 1 pending, 1 failed", r.stdout
    by_name = {line.split()[-1] if " — " not in line else line.split(" — ")[0].split()[-1]: line for line in lines[1:-1]}
    assert by_name[str(folder / "up.jpg")].startswith("uploaded")
    assert by_name[str(folder / "wait.jpg")].startswith("pending")
    assert by_name[str(folder / "bad.jpg")].startswith("failed") and "403" in lines[1 + sorted(by_name).index(str(folder / "bad.jpg"))]

    r = d.ctl("files", "--json", str(folder), str(folder / "notes.txt"), check=True)
    out = json.loads(r.stdout)
    items = {i["path"].rsplit("/", 1)[1]: i for i in out["items"]}
    assert set(items) == {"up.jpg", "wait.jpg", "bad.jpg"}
    assert items["up.jpg"]["state"] == "uploaded" and items["up.jpg"]["key"] == world.key(uid, up) and items["up.jpg"]["uploadedAt"]
    assert items["wait.jpg"]["state"] == "pending" and items["wait.jpg"]["uploadedAt"] is None and items["wait.jpg"]["md5"]
    assert items["bad.jpg"]["state"] == "failed" and items["bad.jpg"]["md5"] == md5_hex(bad) and items["bad.jpg"]["lastError"]
    assert [n["path"] for n in out["notes"]] == [str(folder / "notes.txt")] and "not back" in out["notes"][0]["note"]

    # Outside every watched folder: one clear line, exit 1.
    r = d.ctl("files", "/etc/hostname")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "not under a watched folder" in r.stderr, r.stderr
    # verify changes things: a group member may not start one.
    assert d.ctl("verify", user="nobody", groups="users").returncode == 4
    d.ctl("resume", check=True)
    world.proxy.clear_faults()
    d.wait_for(lambda s: s["queue"]["uploaded"] == 2, timeout=30)
    assert set(world.objects(uid)) >= {world.key(uid, up)}


# ---- a big listing, one page cut -------------------------------------------------------------

def test_five_thousand_objects_listed_in_five_pages_with_one_page_cut(world):
    sub = apple_subject("pages")
    uid = user_id_for(sub)
    bodies = [os.urandom(16) + i.to_bytes(4, "big") for i in range(5000)]
    seed(world, uid, bodies)
    world.proxy.reset_stats()
    # The second page's answer is cut halfway (headers and half the XML, then the connection
    # closes); the daemon asks for that page again with the same continuation token.
    world.proxy.set_faults(truncate_count=1, match=r"^GET [^?]*\?.*continuation-token=")
    d = world.daemon()
    mine = bodies[::1000]    # five of them are on this NAS too
    for i, body in enumerate(mine):
        write_photo(d.photos / f"p{i}.jpg", 0, body)
    world.login(d, sub=sub)
    s = d.wait_for(lambda s: s["inventory"]["state"] == "ok" and settled(len(mine))(s), timeout=90, what="the listing")
    assert s["inventory"]["objects"] == 5000
    # thumbnails/ is listed after photos/: its one page may still be on its way.
    deadline = time.monotonic() + 30
    while len([r for r in world.s3_ops() if r["op"] == "ListObjectsV2"]) < 7 and time.monotonic() < deadline:
        time.sleep(0.2)
    lists = [r for r in world.s3_ops() if r["op"] == "ListObjectsV2"]
    photos = [r for r in lists if "photos%2F" in r["path"] or "photos/" in r["path"].split("prefix=")[-1]]
    assert world.proxy.stats()["faults"]["truncated"] == 1
    assert len(photos) == 5 + 1, [r["path"][:80] for r in photos]         # five pages and the cut one again
    assert len(lists) == 5 + 1 + 1                                        # and thumbnails/
    assert ops(world)["PutObject"] == 0 and ops(world)["HeadObject"] == 0
    assert "listed the bucket" in d.log()
    s3 = world.moto.s3_admin()
    for body in mine:
        assert md5_hex(s3.get_object(Bucket=world.moto.bucket, Key=world.key(uid, body))["Body"].read()) == md5_hex(body)
