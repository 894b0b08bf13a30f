"""Uploading, end to end: the real photolalad against moto (auth enforced) with real STS
credentials from the fake backend, every S3 request passing through the fault proxy so
it can be counted (and, where a test says so, broken). Every object is read back and its
body's MD5 checked against its key; every daemon log line is checked for secrets.

Tests parametrized with `scheme` run twice: over plain HTTP, and over HTTPS end to end
(backend, proxy and moto with a test CA's certificate, the daemon given that CA as
`tls.ca_file`), where bodies must go with `UNSIGNED-PAYLOAD` signatures."""
from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections import Counter
from urllib.parse import parse_qs, urlsplit

import pytest

from support.fake_backend import user_id_for
from support.world import LISTING, apple_subject, part_number, settled, write_photo

MiB = 1 << 20
# The photos' HEADs alone: a fault counted on every request would also be used up by
# the key service's, the catalog's or the manifest's requests, which `s3_ops` leaves out.
PHOTO_HEAD = r"^HEAD /[^/?]+/photos/"
# Small multipart settings keep the large files small (S3's minimum part is 5 MiB).
SMALL_MULTIPART = {"upload": {"multipart_threshold": "5MiB", "part_size": "5MiB"}}


def parse_ts(s: str) -> float:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def ops(world, **where) -> list[dict]:
    return [r for r in world.s3_ops() if all(r.get(k) == v for k, v in where.items())]


BOTH = pytest.mark.parametrize("scheme", ["http", "https"])


def assert_payload_signing(world, scheme: str):
    """Over HTTPS every body goes unsigned (Content-MD5 guards it, s3-layout.md); over
    plain HTTP the body's SHA-256 is signed."""
    bodies = [r for r in world.s3_ops() if r["op"] in ("PutObject", "UploadPart")]
    assert bodies
    want = "UNSIGNED-PAYLOAD" if scheme == "https" else "sha256"
    assert {r["payload"] for r in bodies} == {want}, {r["payload"] for r in bodies}


# ---- a mixed folder -------------------------------------------------------------------

@BOTH
def test_mixed_folder_small_photos_and_a_multipart_file(world, scheme):
    # A bandwidth limit keeps the large file on the wire long enough to see it in status.
    d = world.daemon(config={"upload": {"multipart_threshold": "5MiB", "part_size": "5MiB", "bandwidth_limit": "8MiB/s"}})
    uid = world.login(d)
    files = {
        "2024/a.jpg": 40_000, "2024/b.JPG": 1, "2024/trip/c.heic": 250_000, "d.png": 7_777,
        "e.mov": 300_000, "raw/f.dng": 123_456, "g.webp": 5 * MiB,   # exactly the threshold: one PUT
        "big.mp4": 3 * 5 * MiB + 12_345,                             # 4 parts, the last one small
    }
    bodies = {name: write_photo(d.photos / name, size) for name, size in files.items()}
    write_photo(d.photos / "notes.txt", 1000)       # not a photo extension: never uploaded
    write_photo(d.photos / ".hidden.jpg", 1000)     # hidden: never uploaded

    seen_uploading = 0
    deadline = time.monotonic() + 60
    while True:
        s = d.status()
        seen_uploading = max(seen_uploading, s["queue"]["uploading"])
        if settled(len(files))(s):
            break
        assert time.monotonic() < deadline, json.dumps(s, indent=1)
        assert s["queue"]["failed"] == 0, s
        time.sleep(0.1)

    # Read back: exactly one object per file, each body's MD5 equal to its key.
    objects = world.objects(uid)
    assert set(objects) == {world.key(uid, b) for b in bodies.values()}
    for name, body in bodies.items():
        assert objects[world.key(uid, body)]["body"] == body, name

    # Content type and original format (shared/spec/s3-layout.md) by extension.
    want = {"2024/a.jpg": ("image/jpeg", "JPEG"), "2024/b.JPG": ("image/jpeg", "JPEG"),
            "2024/trip/c.heic": ("image/heif", "HEIF"), "d.png": ("image/png", "PNG"),
            "e.mov": ("video/quicktime", "MOV"), "raw/f.dng": ("image/x-adobe-dng", "RAW-DNG"),
            "g.webp": ("image/webp", "WEBP"), "big.mp4": ("video/mp4", "MP4")}
    for name, (ctype, fmt) in want.items():
        head = objects[world.key(uid, bodies[name])]["head"]
        assert (head["ContentType"], head["Metadata"].get("original-format")) == (ctype, fmt), name

    # One PUT per small file; the large one as a multipart upload of exactly 4 parts.
    put = ops(world, op="PutObject", status=200)
    assert len(put) == len(files) - 1
    assert len(ops(world, op="CreateMultipartUpload", status=200)) == 1
    parts = ops(world, op="UploadPart", status=200)
    assert sorted(part_number(r["path"]) for r in parts) == [1, 2, 3, 4]
    assert sorted(r["bytes"] for r in parts)[0] == 12_345
    assert ops(world, op="AbortMultipartUpload") == []
    # Nothing outside the user's own prefix was ever addressed, nor listed.
    for r in world.s3_ops():
        if r["op"] == "ListObjectsV2":
            prefix = parse_qs(urlsplit(r["path"]).query)["prefix"][0]
            assert prefix in (f"photos/{uid}/", f"thumbnails/{uid}/"), r
        else:
            assert r["path"].startswith(f"/{world.moto.bucket}/photos/{uid}/"), r
    assert_payload_signing(world, scheme)
    # Kept alive: a handful of connections for all the requests (a few per worker).
    assert world.proxy.stats()["connections"] <= 8, world.proxy.stats()["connections"]

    # Status: the stable fields of shared/spec/cli.md.
    s = d.status()
    assert s["state"] == "running" and s["pauseReason"] is None
    assert s["account"] == {"signedIn": True, "userId": uid}
    q = s["queue"]
    assert (q["uploading"], q["failed"], q["uploaded"], q["pendingBytes"]) == (0, 0, len(files), 0)
    assert q["uploadedBytes"] == sum(files.values())
    assert seen_uploading >= 1, "status never showed an upload under way"
    assert s["credentials"]["state"] == "valid"
    sessions = world.backend.sts_sessions()
    assert abs(parse_ts(s["credentials"]["expiresAt"]) - sessions[-1]["expiration"]) < 1.0
    human = d.ctl("status", check=True).stdout
    assert f"All {len(files)} files backed up" in human


def test_complete_multipart_answer_is_understood(world):
    # moto 5 answers <CompleteMultipartUploadResponse> (S3: ...Result); the client must not
    # take that for a malformed answer, retry after a backoff and find the object by HEAD.
    d = world.daemon(config=SMALL_MULTIPART)
    uid = world.login(d)
    body = write_photo(d.photos / "big.mov", 5 * MiB + 1)
    d.wait_for(settled(1), timeout=30, what="the multipart upload")
    assert world.key(uid, body) in world.objects(uid)
    assert len(ops(world, op="CompleteMultipartUpload")) == 1
    assert "expected CompleteMultipartUploadResult" not in d.log()
    assert "upload will be retried" not in d.log()


# ---- dedup and already present ----------------------------------------------------------

def test_same_bytes_in_two_paths_is_one_put(world):
    d = world.daemon()
    uid = world.login(d)
    same = os.urandom(200_000)
    write_photo(d.photos / "phone" / "IMG_0001.jpg", 0, same)
    write_photo(d.photos / "backup" / "copy of IMG_0001.jpg", 0, same)
    other = write_photo(d.photos / "other.jpg", 50_000)
    d.wait_for(settled(3), timeout=30, what="3 files backed up")

    assert set(world.objects(uid)) == {world.key(uid, same), world.key(uid, other)}
    puts = ops(world, op="PutObject")
    assert len(puts) == 2, puts
    assert Counter(r["path"].split("?")[0] for r in puts)[f"/{world.moto.bucket}/{world.key(uid, same)}"] == 1
    q = d.status()["queue"]
    assert (q["uploaded"], q["failed"]) == (3, 0)   # files, not objects


def test_object_already_in_s3_is_not_sent_again(world):
    sub = apple_subject("present")
    uid = user_id_for(sub)
    small, large = os.urandom(70_000), os.urandom(6 * MiB)
    s3 = world.moto.s3_admin()
    for body in (small, large):   # as the phone app would have stored them
        s3.put_object(Bucket=world.moto.bucket, Key=world.key(uid, body), Body=body, ContentType="image/jpeg",
                      Metadata={"original-format": "JPEG"})
    d = world.daemon(config=SMALL_MULTIPART)
    world.login(d, sub=sub)
    write_photo(d.photos / "small.jpg", 0, small)
    write_photo(d.photos / "large.jpg", 0, large)
    fresh = write_photo(d.photos / "new.jpg", 10_000)
    d.wait_for(settled(3), timeout=30, what="3 files backed up")

    # The listing after the sign-in found both: not even a HEAD was sent for them.
    assert ops(world, op="HeadObject") == []
    assert [r["status"] for r in ops(world, op="ListObjectsV2")] == [200, 200]   # photos/, thumbnails/
    # Only the new file was written, once and only if the key was free; nothing at all for
    # the two already present.
    writes = [r for r in world.s3_ops() if r["method"] in ("PUT", "POST", "DELETE")]
    assert [(r["op"], r["path"], r["ifNoneMatch"]) for r in writes] == [
        ("PutObject", f"/{world.moto.bucket}/{world.key(uid, fresh)}", "*")]
    assert len(world.objects(uid)) == 3


# ---- credentials that expire while uploading ---------------------------------------------

@BOTH
def test_short_sts_credentials_are_refreshed_while_uploads_go_on(world, scheme):
    world.backend.configure(sts_expires_in=15)
    # The proxy answers ExpiredToken to any request signed with keys past the expiration the
    # backend reported (moto itself would accept them): stale credentials cannot slip by.
    world.proxy.expiry_lookup = world.backend.credential_expiry
    d = world.daemon(config={"credentials": {"refresh_before_expiry": "5s"}})
    uid = world.login(d)

    bodies, states, expiries = [], Counter(), set()
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < 32:
        bodies.append(write_photo(d.photos / f"drip/{i:03d}.jpg", 20_000 + 997 * i))
        i += 1
        for _ in range(4):
            s = d.status()
            if states or s["credentials"]["state"] == "valid":   # from the first fetch on
                states[s["credentials"]["state"]] += 1
            if s["credentials"]["expiresAt"]:
                expiries.add(s["credentials"]["expiresAt"])
            assert s["queue"]["failed"] == 0, s
            time.sleep(0.25)
    d.wait_for(settled(len(bodies)), timeout=30, what="every file backed up")

    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    sts = world.backend.stats()["calls"]["sts-token"]
    assert all(code == 200 for code in sts["statuses"]), sts["statuses"]
    # Fetched once, then refreshed 5 s (plus at most 10% jitter) before each 15 s expiry.
    assert len(sts["times"]) >= 4, sts
    gaps = [b - a for a, b in zip(sts["times"], sts["times"][1:])]
    assert all(8.5 <= g <= 11.5 for g in gaps), gaps
    assert len(expiries) >= 3, expiries
    assert set(states) <= {"valid", "refreshing"}, states
    # No request went out with expired keys, and nothing had to be retried.
    faults = world.proxy.stats()["faults"]
    assert faults["expired_enforced"] == 0, faults
    assert "upload will be retried" not in d.log()
    assert d.status()["queue"]["failed"] == 0


def test_expired_access_token_is_refreshed_with_the_refresh_token(world):
    world.backend.configure(sts_expires_in=12)
    d = world.daemon(config={"credentials": {"refresh_before_expiry": "5s"}})
    uid = world.login(d)
    first = write_photo(d.photos / "first.jpg", 30_000)
    d.wait_for(settled(1), timeout=20)
    saved_before = json.loads((d.state_dir / "account.json").read_text())

    # The access token dies; the next STS refresh (about 7 s after the first fetch) is
    # refused with 401 invalid_token and must go through /api/auth/refresh.
    assert world.backend.expire_access_tokens() >= 1
    calls = lambda: world.backend.stats()["calls"]
    deadline = time.monotonic() + 20
    while calls()["refresh"]["count"] == 0 or calls()["sts-token"]["statuses"][-1] != 200 \
            or 401 not in calls()["sts-token"]["statuses"]:
        assert time.monotonic() < deadline, calls()
        time.sleep(0.2)
    second = write_photo(d.photos / "second.jpg", 30_000)
    d.wait_for(settled(2), timeout=20)

    c = calls()
    assert c["refresh"]["statuses"] == [200] * c["refresh"]["count"]
    seq = c["sts-token"]["statuses"]
    assert seq[0] == 200 and 401 in seq and seq[seq.index(401) + 1] == 200, seq
    s = d.status()
    assert s["state"] == "running" and s["account"]["signedIn"] and s["queue"]["failed"] == 0
    # The rotated refresh token was saved (the old one is dead at the backend).
    saved_after = json.loads((d.state_dir / "account.json").read_text())
    assert saved_after["refreshToken"] != saved_before["refreshToken"]
    assert saved_after["refreshToken"] == world.backend.secrets()["refreshTokens"][-1]
    assert set(world.objects(uid)) == {world.key(uid, first), world.key(uid, second)}


# ---- a hostile network ----------------------------------------------------------------

@BOTH
def test_uploads_survive_slowdowns_resets_and_expired_tokens(world, scheme):
    d = world.daemon(config=SMALL_MULTIPART)
    uid = world.login(d)
    world.proxy.set_faults(slowdown_rate=0.25, reset_rate=0.05, expired_token_count=2, seed=20261125)
    bodies = [write_photo(d.photos / f"roll/{i:02d}.jpg", 30_000 + 1013 * i) for i in range(20)]
    bodies.append(write_photo(d.photos / "clip.mov", 2 * 5 * MiB + 4321))
    t0 = time.monotonic()
    d.wait_for(lambda s: settled(len(bodies))(s) or s["queue"]["failed"] > 0, timeout=150,
               interval=0.5, what="every file backed up through the faults")
    elapsed = time.monotonic() - t0
    world.proxy.clear_faults()

    s = d.status()
    assert s["queue"]["failed"] == 0 and s["queue"]["uploaded"] == len(bodies), s["queue"]
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    st = world.proxy.stats()
    faults = st["faults"]
    assert faults["expired_token"] == 2 and faults["slowdown"] > 0 and faults["reset"] > 0, faults
    # Bounded: without faults this is 2 listings (photos/, thumbnails/), a PUT a small file
    # and about 6 requests for the multipart one. Each request fails ~30% of the time, so
    # ~1.5 tries each are expected; a tight retry loop would show as hundreds.
    minimal = 2 + 20 + 6
    assert st["total"] <= 3 * minimal, (st["total"], Counter(r["op"] for r in world.s3_ops()))
    # No tight loop in time either: a failed request is tried again only after a pause
    # (at least 0.1 s), unless S3 refused its credentials (new ones are fetched first), and
    # no single request is tried more than a handful of times.
    last: dict[tuple, tuple[float, int | None]] = {}
    for r in world.s3_ops():
        k = (r["op"], r["path"])
        if k in last and r["op"] not in ("HeadObject", "ListParts") and last[k][1] != 400:
            assert r["time"] - last[k][0] >= 0.1, (k, r["time"] - last[k][0])
        last[k] = (r["time"], r["status"])
    tries = Counter((r["op"], r["path"]) for r in world.s3_ops() if r["op"] in ("PutObject", "UploadPart"))
    assert max(tries.values()) <= 6, tries.most_common(3)
    # The credentials were renewed after the ExpiredToken answers.
    assert world.backend.stats()["calls"]["sts-token"]["count"] >= 2
    print(f"faulty upload: {elapsed:.1f}s, {st['total']} requests, faults {faults}")


def test_expired_token_on_head_is_not_a_failure(world):
    # HEAD answers have no body: S3's 400 ExpiredToken arrives as a bare 400. Twice in a
    # row here (before and after fresh credentials): the file must still go up. HEADs are
    # sent only where listing is refused: the proxy answers the daemon's listing 403, as S3
    # does for a policy without s3:ListBucket (moto does not enforce session policies).
    world.proxy.set_faults(access_denied=True, match=LISTING)
    d = world.daemon()
    uid = world.login(d)
    d.wait_for(lambda s: s["inventory"]["state"] == "refused", timeout=20, what="the listing refused")
    world.proxy.clear_faults()
    world.proxy.reset_stats()
    world.proxy.set_faults(expired_token_count=2, match=PHOTO_HEAD)
    body = write_photo(d.photos / "x.jpg", 33_333)
    d.wait_for(lambda s: settled(1)(s) or s["queue"]["failed"] > 0, timeout=20)
    assert d.status()["queue"]["failed"] == 0
    assert [r["op"] for r in world.s3_ops()] == ["HeadObject", "HeadObject", "PutObject"]
    assert [r["status"] for r in world.s3_ops()] == [400, 400, 200]
    assert world.backend.stats()["calls"]["sts-token"]["count"] == 2   # fresh keys after the first 400
    assert set(world.objects(uid)) == {world.key(uid, body)}


@BOTH
def test_kill9_mid_multipart_resumes_without_resending_finished_parts(world, scheme):
    cfg = {"upload": {"multipart_threshold": "5MiB", "part_size": "5MiB", "bandwidth_limit": "5MiB/s"}}
    d = world.daemon(config=cfg)
    uid = world.login(d)
    body = write_photo(d.photos / "long.mov", 7 * 5 * MiB + 999)   # 8 parts
    ok_parts = lambda: [r for r in world.s3_ops() if r["op"] == "UploadPart" and r["status"] == 200]
    deadline = time.monotonic() + 30
    while len(ok_parts()) < 3:
        assert time.monotonic() < deadline, world.s3_ops()
        time.sleep(0.05)
    d.kill9()
    done_before = sorted(part_number(r["path"]) for r in ok_parts())
    assert len(done_before) < 8, "the upload finished before it could be interrupted"
    assert ops(world, op="CompleteMultipartUpload") == []
    n_before = len(world.s3_ops())

    d.sections["upload"].pop("bandwidth_limit")
    d.write_config()
    d.start()
    d.wait_for(settled(1), timeout=60, what="the resumed upload")

    after = world.s3_ops()[n_before:]
    assert [r for r in after if r["op"] == "CreateMultipartUpload"] == [], "started over instead of resuming"
    assert any(r["op"] == "ListParts" and r["status"] == 200 for r in after)
    resent = [part_number(r["path"]) for r in after if r["op"] == "UploadPart" and part_number(r["path"]) in done_before]
    assert resent == [], f"finished parts {resent} were sent again"
    sent = Counter(part_number(r["path"]) for r in world.s3_ops() if r["op"] == "UploadPart")
    assert set(sent) == set(range(1, 9))
    # At most one part (the one on the wire at the kill) was sent twice.
    assert sum(n - 1 for n in sent.values()) <= 1, sent
    assert len(ops(world, op="CreateMultipartUpload")) == 1
    assert set(world.objects(uid)) == {world.key(uid, body)}
    assert d.status()["queue"]["failed"] == 0
    assert_payload_signing(world, scheme)


# ---- quota -----------------------------------------------------------------------------

def test_quota_exceeded_pauses_and_resume_uploads_once_lifted(world):
    d = world.daemon()
    # Before the sign-in: its first listing asks for credentials at once, and a fault
    # set after it raced that request (and lost whenever the daemon was quicker).
    world.backend.fail("sts-token", status=403, error="quota_exceeded", message="storage full")
    uid = world.login(d)
    bodies = [write_photo(d.photos / f"q{i}.jpg", 25_000 + i) for i in range(3)]
    s = d.wait_for(lambda s: s["state"] == "paused", timeout=20, what="the quota pause")
    assert s["pauseReason"] == "quotaExceeded"
    assert s["credentials"]["state"] == "failed" and s["credentials"]["expiresAt"] is None
    human = d.ctl("status", check=True).stdout
    assert "Paused (quotaExceeded)" in human
    assert "storage is full" in human and "photolalactl resume" in human
    time.sleep(2)
    assert world.proxy.stats()["writes_forwarded"] == 0
    assert d.status()["queue"]["uploaded"] == 0

    world.backend.clear_faults("sts-token")
    r = d.ctl("resume", check=True)
    assert "resumed" in r.stdout.lower()
    d.wait_for(lambda s: settled(3)(s) and s["state"] == "running", timeout=30, what="uploads after the quota")
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    assert d.status()["pauseReason"] is None
