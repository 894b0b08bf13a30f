"""Manifest format 2 end to end (issue 23 items 2 and 3, privacy.md, docs/manifest.md):
after a backup of a tree whose names carry a marker, nothing under `metadata/` reads as
plaintext (no marker, folder, device or host name in any object or key) while the
independent reader (support/manifest_reader.py, Python's `cryptography`) opens it all
from the recovery key alone; a new NAS of the account needs the key to restore, then
gets the tree back with names, mtimes, owners, groups and modes, and its own manifest
is sealed too; a forged manifest (a segment copied from another device, a byte flipped,
another device's record) is refused and the summary says why; a state and bucket of the
format-1 release (PHOTOLALAD_FORMAT1_BIN, else built from this clone's history by
support/format1.py) end sealed with no plaintext object left, also after a kill -9
between the sealed snapshot and the deletion. Each test has its own
world (tmp paths, its own backend, dynamic ports): safe beside any other."""
from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import uuid
from pathlib import Path

import pytest

from support import format1, manifest_reader, vault
from support.fake_backend import user_id_for
from support.world import apple_subject, settled, write_photo

ENTER = "sudo photolalactl recovery-key --enter"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="owners and groups are given back when root restores")


def login(world, d, sub: str):
    token = world.backend.mint_identity_token(sub)
    r = d.ctl("login", "--identity-token", "-", "--authorization-code", "-",
              input=f"{token}\nac_{os.urandom(8).hex()}\n", timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r


def recovery_key(d) -> str:
    r = d.ctl("recovery-key", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)["recoveryKey"]


def manifest_idle(files: int):
    def check(s: dict) -> bool:
        m = s.get("manifest") or {}
        return m.get("state") == "idle" and m.get("files") == files and m.get("format") == 2
    return check


def device_id(d) -> str:
    return d.status()["manifest"]["deviceId"]


def bucket_objects(world, prefix: str = "") -> dict[str, bytes]:
    s3 = world.moto.s3_admin()
    return {k: s3.get_object(Bucket=world.moto.bucket, Key=k)["Body"].read()
            for k in manifest_reader.list_keys(s3, world.moto.bucket, prefix)}


def owned(path: Path, uid: int, gid: int, mode: int):
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def a_tree(d, marker: str) -> dict[str, bytes]:
    """Photos in folders named with the marker, owned by two users and groups."""
    album = d.photos / f"{marker} album"
    private = album / f"{marker} private"
    bodies = {
        f"{marker} album/{marker} one.jpg": write_photo(album / f"{marker} one.jpg", 30_000),
        f"{marker} album/two.jpg": write_photo(album / "two.jpg", 31_000),
        f"{marker} album/{marker} private/three.jpg": write_photo(private / "three.jpg", 32_000),
    }
    owned(album / f"{marker} one.jpg", 1, 100, 0o640)          # daemon:users
    owned(album / "two.jpg", 65534, 65534, 0o600)               # nobody:nogroup
    owned(private / "three.jpg", 2, 2, 0o644)                   # bin:bin
    owned(private, 65534, 100, 0o750)
    owned(album, 1, 1, 0o755)
    os.utime(album / "two.jpg", ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    return bodies


# A needle this long is found in random bytes by chance about once in 2^64 places.
CHANCE_FREE = 8


def no_plaintext_anywhere(world, uid: str, secrets: list[str]):
    """Every object under metadata/{uid}/devices/ is sealed (format 2's magic), and no key
    or byte of any object under metadata/ holds any of `secrets`."""
    objects = bucket_objects(world, "metadata/")
    assert objects, "nothing under metadata/"
    for key, body in objects.items():
        assert key.startswith(f"metadata/{uid}/"), key
        if key.startswith(f"metadata/{uid}/devices/"):
            # Segments are sealed objects; a record (this release's) a sealed record.
            want = vault.RECORD_MAGIC if key.endswith("/device.json") else vault.SEALED_MAGIC
            assert body[:8] == want, f"{key} is not sealed"
            assert key.endswith((".pls", "/device.json")), key
        # Past its 8-byte magic a sealed object or the key object is a nonce and AES-GCM
        # output: random bytes, where a short secret turns up by chance (a host called `vm`,
        # 2 bytes, in about one 360-byte object in 180). Such a secret is looked for in the
        # magic alone; a plaintext leak would be an unsealed object, which fails above.
        opaque = body[:8] in (vault.SEALED_MAGIC, vault.RECORD_MAGIC, vault.KEY_MAGIC, vault.KEY_MAGIC_V2)
        for s in secrets:
            assert s not in key, f"{s!r} in the key {key}"
            for needle, how in ((s.encode(), ""), (s.encode("utf-16-le"), " (UTF-16)")):
                searched = body[:8] if opaque and len(needle) < CHANCE_FREE else body
                assert needle not in searched, f"{s!r}{how} in the bytes of {key}"


@as_root
def test_nothing_readable_and_a_new_nas_restores_with_the_recovery_key(world, tmp_path):
    marker = "MARK" + uuid.uuid4().hex[:10]
    sub = apple_subject("sealed")
    uid = user_id_for(sub)
    a = world.daemon("a", config={"account": {"device_name": f"{marker}-nas"}})
    bodies = a_tree(a, marker)
    login(world, a, sub)
    a.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="the account key made")
    a.wait_for(settled(3), timeout=60, what="three photos uploaded")
    a.wait_for(manifest_idle(3), timeout=90, what="the manifest written, sealed")
    old = device_id(a)

    # Nothing readable: the marker (in every name), the folder, the device's and host's names.
    no_plaintext_anywhere(world, uid, [marker, str(a.photos), str(a.root), socket.gethostname(), f"{marker}-nas"])

    # The independent reader opens it all from the recovery key and the bucket alone.
    key = recovery_key(a)
    s3 = world.moto.s3_admin()
    account = manifest_reader.account_key(s3, world.moto.bucket, uid, key)
    m = manifest_reader.read(s3, world.moto.bucket, uid, old, key=account)
    assert m["format"] == 2 and m["record"]["name"] == f"{marker}-nas" and m["record"]["folders"] == [str(a.photos)]
    assert m["record"]["counter"] >= 1 and m["record"]["head"]["seq"] >= 1
    files = manifest_reader.replay(m["records"])
    assert {p.decode() for (_f, p) in files} == set(bodies)
    for (_f, p), r in files.items():
        assert r["sha256"] == hashlib.sha256(bodies[p.decode()]).hexdigest()
        assert r["md5"] == hashlib.md5(bodies[p.decode()]).hexdigest()
    one = files[(str(a.photos), f"{marker} album/{marker} one.jpg".encode())]["owner"]
    assert one == {"uid": 1, "gid": 100, "mode": 0o640, "user": "daemon", "group": "users"}, one
    folders = manifest_reader.folders(m["records"])
    private = folders[(str(a.photos), f"{marker} album/{marker} private".encode())]["owner"]
    assert (private["uid"], private["gid"], private["mode"], private["user"]) == (65534, 100, 0o750, "nobody"), private

    # A new NAS of the account: photos go on, the restore asks for the key first.
    b = world.daemon("b")
    login(world, b, sub)
    b.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=30, what="recovery.state needed")
    own = write_photo(b.photos / f"{marker} b.jpg", 20_000)
    b.wait_for(settled(1), timeout=60, what="a photo of the new NAS uploaded while the key is needed")
    to = tmp_path / "restored"
    to.mkdir()
    early = b.ctl("restore", "--device", old, "--to", str(to), timeout=90)
    assert early.returncode == 1, (early.stdout, early.stderr)
    assert ENTER in early.stdout + early.stderr, (early.stdout, early.stderr)
    assert list(to.iterdir()) == []
    wrong = b.ctl("recovery-key", "--enter", input=vault.format_key(os.urandom(16)) + "\n")
    assert wrong.returncode == 1, (wrong.stdout, wrong.stderr)
    ok = b.ctl("recovery-key", "--enter", input=key + "\n")
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    b.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="the key entered")

    r = b.ctl("restore", "--device", old, "--to", str(to), "--json", timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    summary = json.loads(r.stdout)
    assert summary["restored"] == 3 and summary["problems"] == [], summary
    base = to / a.photos.name
    for rel, body in bodies.items():
        assert (base / rel).read_bytes() == body, rel
    def look(rel: str) -> tuple[int, int, int]:
        st = os.lstat(base / rel)
        return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)
    assert look(f"{marker} album/{marker} one.jpg") == (1, 100, 0o640)
    assert look(f"{marker} album/two.jpg") == (65534, 65534, 0o600)
    assert look(f"{marker} album/{marker} private/three.jpg") == (2, 2, 0o644)
    assert look(f"{marker} album/{marker} private") == (65534, 100, 0o750)
    assert look(f"{marker} album") == (1, 1, 0o755)
    assert os.lstat(base / f"{marker} album/two.jpg").st_mtime_ns == 1_600_000_000_123_456_789

    # The new NAS's own manifest: written once the key is there, sealed like the first.
    b.wait_for(manifest_idle(1), timeout=90, what="the new NAS's manifest written, sealed")
    mine = device_id(b)
    assert mine != old
    mb = manifest_reader.read(s3, world.moto.bucket, uid, mine, key=account)
    assert [p for (_f, p) in manifest_reader.replay(mb["records"])] == [f"{marker} b.jpg".encode()]
    assert world.key(uid, own) in world.objects(uid)
    no_plaintext_anywhere(world, uid, [marker, str(a.photos), str(b.photos), socket.gethostname(), f"{marker}-nas"])


def test_a_forged_sealed_manifest_is_refused_and_the_summary_says_why(world, tmp_path):
    sub = apple_subject("forged2")
    uid = user_id_for(sub)
    a = world.daemon("a")
    first = write_photo(a.photos / "first.jpg", 20_000)
    login(world, a, sub)
    a.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="the account key made")
    a.wait_for(manifest_idle(1), timeout=90, what="log 1 of a")
    write_photo(a.photos / "second.jpg", 21_000)
    a.wait_for(manifest_idle(2), timeout=90, what="log 2 of a")
    old = device_id(a)
    key = recovery_key(a)

    b = world.daemon("b")
    login(world, b, sub)
    b.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=30, what="recovery.state needed")
    assert b.ctl("recovery-key", "--enter", input=key + "\n").returncode == 0
    write_photo(b.photos / "b.jpg", 22_000)
    b.wait_for(manifest_idle(1), timeout=90, what="b's own manifest")
    mine = device_id(b)

    s3 = world.moto.s3_admin()
    bucket = world.moto.bucket
    pa, pb = manifest_reader.device_prefix(uid, old), manifest_reader.device_prefix(uid, mine)
    get = lambda k: s3.get_object(Bucket=bucket, Key=k)["Body"].read()
    put = lambda k, body: s3.put_object(Bucket=bucket, Key=k, Body=body)

    def restore(device: str, name: str):
        to = tmp_path / name
        to.mkdir()
        r = b.ctl("restore", "--device", device, "--to", str(to), "--json", timeout=120)
        written = sorted(str(p.relative_to(to)) for p in to.rglob("*") if p.is_file())
        return r, written

    # A byte flipped in a's log 2 (authentic otherwise): read up to segment 1, and said so.
    log2 = pa + "log/000000000002.pls"
    original = get(log2)
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0x01
    put(log2, bytes(flipped))
    r, written = restore(old, "flipped")
    assert r.returncode == 1, (r.stdout, r.stderr)
    summary = json.loads(r.stdout)
    said = [p["message"] for p in summary["problems"] if p["kind"] == "manifest"]
    assert any(log2 in p and "does not authenticate" in p for p in said), summary["problems"]
    assert written == [f"{a.photos.name}/first.jpg"], written
    assert (tmp_path / "flipped" / a.photos.name / "first.jpg").read_bytes() == first
    put(log2, original)

    # a's log 1, copied where b's log 1 is: sealed for another key, it does not open there.
    log1 = pb + "log/000000000001.pls"
    mine1 = get(log1)
    put(log1, get(pa + "log/000000000001.pls"))
    r, written = restore(mine, "copied")
    assert r.returncode == 1 and written == [], (r.stdout, r.stderr, written)
    assert f"{log1} cannot be trusted" in r.stdout + r.stderr and "does not authenticate" in r.stdout + r.stderr, (r.stdout, r.stderr)
    put(log1, mine1)

    # a's device record over b's: it does not open under b's key, so nothing of b is believed.
    put(pb + "device.json", get(pa + "device.json"))
    r, written = restore(mine, "record")
    assert r.returncode == 1 and written == [], (r.stdout, r.stderr, written)
    assert "not readable with this account's key" in r.stdout + r.stderr, (r.stdout, r.stderr)


@pytest.fixture
def format1_bin() -> str:
    """The photolalad of the release before (support/format1.py): PHOTOLALAD_FORMAT1_BIN,
    or built from this clone's history (in the background since the run started; waited
    for here). Skipped with the reason when the clone lacks the commit (a shallow one)."""
    try:
        return str(format1.built_format1())
    except format1.Unavailable as e:
        pytest.skip(str(e))
    except (RuntimeError, TimeoutError, FileNotFoundError) as e:
        failed = str(e)   # the build's log tail: failed outside the handler, said once
    pytest.fail(failed, pytrace=False)


def format1_state(world, format1_bin: str, tag: str):
    """A NAS of the release before, backed up and stopped: its state directory and a
    plaintext (format-1) manifest in the bucket, with the marker in it."""
    marker = "MARK" + uuid.uuid4().hex[:10]
    sub = apple_subject(tag)
    uid = user_id_for(sub)
    d = world.daemon("a", start=False, config={"account": {"device_name": f"{marker}-nas"}})
    d.binary = format1_bin
    # The release before knows no [web] section (it refuses an unknown one, by name).
    web = d.sections.pop("web", None)
    d.write_config()
    d.start()
    bodies = {f"{marker} album/{i}.jpg": write_photo(d.photos / f"{marker} album" / f"{i}.jpg", 20_000 + i) for i in range(3)}
    login(world, d, sub)
    s = d.wait_for(lambda s: (s.get("manifest") or {}).get("state") == "idle" and s["manifest"]["files"] == 3, timeout=90,
                   what="the format-1 manifest written")
    device = s["manifest"]["deviceId"]
    prefix = manifest_reader.device_prefix(uid, device)
    before = bucket_objects(world, prefix)
    assert any(k.endswith(".plm") for k in before) and before[prefix + "device.json"][:1] == b"{", sorted(before)
    assert any(marker.encode() in body for body in before.values()), "the release before wrote no plaintext to upgrade"
    assert d.stop() == 0
    d.binary = None
    if web is not None:
        d.sections["web"] = web
        d.write_config()
    return d, marker, uid, device, prefix, bodies


def test_a_format1_manifest_is_rewritten_sealed_and_its_plaintext_deleted(format1_bin, world, tmp_path):
    """A state directory and bucket written by the release before (plaintext `.plm`
    segments, a plaintext device.json), then this release on the same state: the key is
    made, the manifest is written again sealed, and no plaintext object of the device is
    left; the tree restores from the sealed one."""
    d, marker, uid, device, prefix, bodies = format1_state(world, format1_bin, "upgrade")
    d.start()
    d.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="the account key made at the upgrade")
    d.wait_for(manifest_idle(3), timeout=120, what="the manifest rewritten in format 2")
    after = bucket_objects(world, prefix)
    assert not [k for k in after if k.endswith(".plm")], sorted(after)
    no_plaintext_anywhere(world, uid, [marker, str(d.photos), socket.gethostname(), f"{marker}-nas"])
    key = recovery_key(d)
    s3 = world.moto.s3_admin()
    m = manifest_reader.read(s3, world.moto.bucket, uid, device, key=manifest_reader.account_key(s3, world.moto.bucket, uid, key))
    assert m["format"] == 2 and m["snapshot"] is not None
    assert {p.decode() for (_f, p) in manifest_reader.replay(m["records"])} == set(bodies)
    # The next change goes on the sealed chain.
    write_photo(d.photos / "later.jpg", 23_000)
    d.wait_for(manifest_idle(4), timeout=90, what="a change after the upgrade")
    m = manifest_reader.read(s3, world.moto.bucket, uid, device, key=manifest_reader.account_key(s3, world.moto.bucket, uid, key))
    assert m["logs"] and len(manifest_reader.replay(m["records"])) == 4
    to = tmp_path / "back"
    to.mkdir()
    r = d.ctl("restore", "--device", device, "--to", str(to), "--json", timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    for rel, body in bodies.items():
        assert (to / d.photos.name / rel).read_bytes() == body


def test_an_upgrade_killed_before_the_plaintext_is_gone_finishes_at_the_next_start(format1_bin, world):
    """kill -9 once the sealed manifest is in the bucket but while the plaintext objects'
    deletion hangs: the account stays readable with the key shown, and the next start
    deletes what is left of the plaintext."""
    d, marker, uid, device, prefix, bodies = format1_state(world, format1_bin, "upgrade-kill")
    world.proxy.set_faults(blackhole=True, match=r"^DELETE [^ ]*\.plm")
    d.start()
    d.wait_for(lambda s: world.proxy.stats()["faults"]["blackhole"] >= 1, timeout=60, what="a plaintext object's deletion held")
    key = recovery_key(d)
    d.kill9()
    world.proxy.clear_faults()
    held = bucket_objects(world, prefix)
    assert [k for k in held if k.endswith(".plm")], "the plaintext was gone before the kill: nothing was cut short"
    assert held[prefix + "device.json"][:8] == vault.RECORD_MAGIC
    s3 = world.moto.s3_admin()
    account = manifest_reader.account_key(s3, world.moto.bucket, uid, key)
    m = manifest_reader.read(s3, world.moto.bucket, uid, device, key=account)
    assert {p.decode() for (_f, p) in manifest_reader.replay(m["records"])} == set(bodies)
    d.start()
    d.wait_for(manifest_idle(3), timeout=120, what="the upgrade finished after the restart")
    d.wait_for(lambda s: not [k for k in bucket_objects(world, prefix) if k.endswith(".plm")], timeout=60,
               what="the plaintext objects deleted at the next start")
    assert recovery_key(d) == key
    no_plaintext_anywhere(world, uid, [marker, str(d.photos), socket.gethostname(), f"{marker}-nas"])
