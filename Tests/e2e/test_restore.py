"""Getting it all back (issue 16): a NAS backs up a tree, is lost with its state
directory, and a new NAS signed in with the same Apple ID lists it (`devices`) and
restores it (`restore`) with names, folders and modification times exact; `--as-of`,
PATH filters, `--dry-run`, permissions, an object changed in the bucket, archived
objects, kill -9 of the command and of the daemon mid-restore, kill -9 while a manifest
segment is written. Everything runs against moto (SigV4 and session tokens enforced)
through the fault proxy, with the fake backend vending real STS credentials; every file
restored is read back and compared byte for byte, and the manifest is read with an
independent reader (support/manifest_reader.py)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from support import manifest_reader
from support.daemon import Daemon, binary, raw_request
from support.fake_backend import FakeBackend, user_id_for
from support.fault_proxy import FaultProxy
from support.world import PairingLogin, apple_subject, assert_no_secrets_in_logs

# One lost NAS for the module (on the worker's session moto, whose bucket no other test
# may empty meanwhile): one xdist worker runs the module whole, in file order.
pytestmark = pytest.mark.xdist_group("restore")

MiB = 1 << 20


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def iso_ms(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def walk_files(root: Path) -> dict[bytes, Path]:
    """Every file below `root`, keyed by its path's exact bytes relative to `root`."""
    out = {}
    base = os.fsencode(root)
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, base)] = Path(os.fsdecode(full))
    return out


def leftovers(root: Path) -> list[bytes]:
    return [p for p in walk_files(root) if os.path.basename(p).startswith(b".plrestore-")]


# The old NAS's tree: nested folders with spaces, NFC and NFD twins, a 255-byte name, a
# multipart video, two files with the same bytes, every file with its own nanosecond mtime.
NFC = "Caf\u00e9.jpg".encode()
NFD = "Cafe\u0301.jpg".encode()
LONG = b"x" * 251 + b".jpg"
TREE = {
    b"2023/Summer trip/IMG 0001.jpg": 300_000,
    b"2023/Summer trip/copy of IMG 0001.jpg": "dup",
    b"2023/Summer trip/Day 2/IMG 0002.heic": 200_001,
    b"2023/Summer trip/Day 2/Evening/IMG 0003.jpg": 150_002,
    b"2024/Paris/" + NFC: 120_003,
    b"2024/Paris/" + NFD: 120_004,
    b"long names/" + LONG: 90_005,
    b"videos/holiday clip.mov": 20 * MiB + 123,
    b"2022/deleted later.jpg": 80_006,
    b"2021/Filter me/a.jpg": 70_007,
    b"2021/Filter me/b.jpg": 70_008,
    b"changed behind/bad.jpg": 60_009,
    b"changed behind/good.jpg": 60_010,
    b"archive/cold.jpg": 50_011,
}
DELETED = b"2022/deleted later.jpg"
# Enough small files that a restore takes a few seconds behind the proxy's latency.
for i in range(24):
    TREE[b"bulk/%02d/photo %02d.jpg" % (i % 4, i)] = 100_000 + i


class Old:
    """What the lost NAS left: its bucket, its device id, what its tree held."""


@pytest.fixture(scope="module")
def lost(moto_http, tmp_path_factory):
    moto = moto_http   # a module's NAS: the session's plain-HTTP moto, whatever the tests' scheme
    moto.empty_bucket()
    root = tmp_path_factory.mktemp("restore")
    backend = FakeBackend(moto).start()
    proxy = FaultProxy(moto.endpoint).start()
    backend.configure(sts_endpoint=proxy.url)
    old = Old()
    old.root, old.moto, old.backend, old.proxy = root, moto, backend, proxy
    old.sub = apple_subject("restore")
    old.user_id = user_id_for(old.sub)
    daemons: list[Daemon] = []
    try:
        a = Daemon(root / "a", name="a", env={"PHOTOLALAD_MANIFEST_COMPACT_SEGMENTS": "2"},
                   config={"account": {"api_url": backend.url, "device_name": "nas-old"},
                           "upload": {"multipart_threshold": "5MiB", "part_size": "5MiB"}})
        daemons.append(a)
        a.start()
        login(a, backend, old.sub)
        # Built aside, then moved in at once: each file is read once, with its final mtime.
        staging = root / "staging"
        expected = {}
        first = None
        for i, (rel, size) in enumerate(TREE.items()):
            data = first if size == "dup" else os.urandom(size)
            first = first or data
            path = os.path.join(os.fsencode(staging), rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
            mtime = 1_650_000_000_000_000_000 + i * 86_400_000_000_007 + 123_456_789
            os.utime(path, ns=(mtime, mtime))
            expected[rel] = {"md5": md5(data), "size": len(data), "mtime": mtime}
        for top in os.listdir(staging):
            os.rename(staging / top, a.photos / top)
        a.wait_for(lambda s: s["queue"]["uploaded"] == len(TREE) and manifest_idle(s, len(TREE)), timeout=120,
                   what="the tree uploaded and in the manifest")
        old.t_before_delete = time.time()
        time.sleep(1.1)
        os.unlink(os.path.join(os.fsencode(a.photos), DELETED))
        s = a.wait_for(lambda s: manifest_idle(s, len(TREE) - 1) and s["manifest"]["snapshot"] >= 2, timeout=60,
                       what="the deletion in the manifest, compacted")
        time.sleep(1.1)
        old.t_after_delete = time.time()
        old.device_id = s["manifest"]["deviceId"]
        old.folder = str(a.photos)
        old.expected = expected
        old.headers = backend.stats()["deviceHeaders"]
        old.body_ids = backend.stats()["bodyDeviceIds"]
        old.a_log = a.log()
        old.device_file = a.state_dir / "device-id"
        old.device_file_mode = stat.S_IMODE(os.stat(old.device_file).st_mode)
        # Format 2: the manifest is sealed; the reader opens it from the recovery key alone.
        r = a.ctl("recovery-key", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        old.recovery_key = json.loads(r.stdout)["recoveryKey"]
        old.account_key = manifest_reader.account_key(moto.s3_admin(), moto.bucket, old.user_id, old.recovery_key)
        old.manifest = manifest_reader.read(moto.s3_admin(), moto.bucket, old.user_id, old.device_id, key=old.account_key)
        old.manifest_bytes = [moto.s3_admin().get_object(Bucket=moto.bucket, Key=k)["Body"].read()
                              for k in manifest_reader.list_keys(moto.s3_admin(), moto.bucket,
                                                                 manifest_reader.device_prefix(old.user_id, old.device_id))]
        # The NAS is lost: daemon stopped, its state directory and its photos gone.
        assert a.stop() == 0
        shutil.rmtree(a.state_dir)
        shutil.rmtree(a.photos)
        b = Daemon(root / "b", name="b", config={"account": {"api_url": backend.url, "device_name": "nas-new"}})
        daemons.append(b)
        b.start()
        login(b, backend, old.sub)
        enter_key(b, old.recovery_key)
        old.b = b
        old.daemons = daemons
        yield old
    finally:
        for d in daemons:
            try:
                d.stop()
            except Exception:
                d.kill9()
        logs = [d.log() for d in daemons]
        proxy.stop()
        backend.stop()
        assert_no_secrets_in_logs(backend, logs)


def login(d: Daemon, backend, sub: str):
    token = backend.mint_identity_token(sub)
    r = d.ctl("login", "--identity-token", token, "--authorization-code", "ac_" + os.urandom(8).hex())
    assert r.returncode == 0, r.stdout + r.stderr


def enter_key(d: Daemon, key: str):
    """A new NAS of the account holds no key: the old NAS's recovery key, entered."""
    d.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=30, what="recovery.state needed")
    r = d.ctl("recovery-key", "--enter", input=key + "\n")
    assert r.returncode == 0, r.stdout + r.stderr
    d.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="the recovery key entered")


def manifest_idle(s: dict, files: int) -> bool:
    m = s.get("manifest") or {}
    return m.get("state") == "idle" and m.get("files") == files


def restore(old: Old, *args, user=None, groups=None, timeout=120):
    return old.b.ctl("restore", "--device", old.device_id, *args, user=user, groups=groups, timeout=timeout)


def assert_tree(old: Old, root: Path, rels=None):
    """`root` holds exactly `rels` (default: the tree less the deleted file), byte for
    byte, names exact, mtimes to the nanosecond, and no temporary file."""
    rels = set(rels if rels is not None else (r for r in TREE if r != DELETED))
    found = walk_files(root)
    assert set(found) == rels, (sorted(set(found) - rels)[:5], sorted(rels - set(found))[:5])
    for rel, path in found.items():
        e = old.expected[rel]
        data = path.read_bytes()
        assert len(data) == e["size"] and md5(data) == e["md5"], rel
        assert os.stat(path).st_mtime_ns == e["mtime"], (rel, os.stat(path).st_mtime_ns, e["mtime"])


def assert_no_partial(old: Old, root: Path):
    """Every file at a final path is whole and right (temporary names excepted)."""
    for rel, path in walk_files(root).items():
        if os.path.basename(rel).startswith(b".plrestore-"):
            continue
        e = old.expected[rel]
        data = path.read_bytes()
        assert len(data) == e["size"] and md5(data) == e["md5"], f"partial or wrong file at a final path: {rel!r}"


# ---- the tests ---------------------------------------------------------------------------

def test_the_manifest_and_the_device_id(lost):
    """The lost NAS's manifest: compacted into a snapshot that kept the deletion's history,
    readable by an independent reader, and free of secrets; its device id was a UUID in
    the state directory (0600), sent in the sign-in body and on every backend call."""
    m = lost.manifest
    # Compacted at segment 2 at the latest (PHOTOLALAD_MANIFEST_COMPACT_SEGMENTS=2); what
    # the snapshot covers was deleted once it was there.
    assert m["snapshot"] >= 2 and m["covered"] == [], m
    latest = manifest_reader.replay(m["records"])
    assert {p for (_f, p) in latest} == set(TREE) - {DELETED}
    assert all(f == lost.folder for (f, _p) in latest)
    history = manifest_reader.replay(m["records"], int(lost.t_before_delete * 1000))
    assert DELETED in {p for (_f, p) in history}
    video = latest[(lost.folder, b"videos/holiday clip.mov")]
    assert video["size"] == 20 * MiB + 123 and video["mtime_nsec"] == lost.expected[b"videos/holiday clip.mov"]["mtime"] % 10**9
    for data in lost.manifest_bytes:
        for secret in lost.backend.all_secrets():
            assert secret.encode() not in data
    assert lost.device_file_mode == 0o600
    uuid_like = lost.device_id
    assert len(uuid_like) == 36 and uuid_like == uuid_like.lower()
    assert {e["deviceId"] for e in lost.body_ids} >= {lost.device_id}
    sent = [h for calls in lost.headers.values() for h in calls]
    assert sent and set(sent) <= {lost.device_id, None}
    assert all(h == lost.device_id for name in ("sts-token", "credential-state") for h in lost.headers[name])


def test_pairing_sends_the_device_id(lost):
    """A NAS signed in by pairing sends its id in the pairing body and on every poll."""
    lost.backend.configure(pairing_interval=1)
    p = Daemon(lost.root / "p", name="p", config={"account": {"api_url": lost.backend.url}})
    lost.daemons.append(p)
    p.start()
    login = PairingLogin(p)
    try:
        lost.backend.approve_pairing(login.code(), apple_subject("paired"))
        rc, out, err = login.wait(30)
    finally:
        login.kill()
    assert rc == 0, (out, err)
    device = (p.state_dir / "device-id").read_text().strip()
    stats = lost.backend.stats()
    assert {"endpoint": "device", "deviceId": device} in stats["bodyDeviceIds"]
    assert device in stats["deviceHeaders"]["device-token"]
    assert p.stop() == 0


def test_a_new_nas_lists_the_old_one(lost):
    r = lost.b.ctl("devices", "--json", check=True)
    devices = {d["id"]: d for d in json.loads(r.stdout)["devices"]}
    assert lost.device_id in devices, devices
    old = devices[lost.device_id]
    assert old["name"] == "nas-old" and not old["current"]
    assert old["files"] == len(TREE) - 1
    assert old["bytes"] == sum(e["size"] for rel, e in lost.expected.items() if rel != DELETED)
    assert old["folders"] == [lost.folder] and old["lastBackupAt"]
    # The new NAS has a device id of its own, kept across logout and sign-in.
    new_id = (lost.b.state_dir / "device-id").read_text().strip()
    assert new_id != lost.device_id
    assert lost.b.ctl("logout").returncode == 0
    assert (lost.b.state_dir / "device-id").read_text().strip() == new_id
    login(lost.b, lost.backend, lost.sub)
    enter_key(lost.b, lost.recovery_key)   # signing out erased it
    human = lost.b.ctl("devices", check=True).stdout
    assert "nas-old" in human and lost.device_id in human


def test_losing_the_nas_rebuilds_the_tree_byte_for_byte(lost):
    to = lost.root / "rebuilt"
    since = time.time()
    r = restore(lost, "--to", str(to))
    assert r.returncode == 0, r.stdout + r.stderr
    assert_tree(lost, to / "photos")
    # The whole device: the objects were found in one listing, not asked after one by one.
    ops = [q for q in lost.proxy.stats()["requests"] if q["time"] >= since]
    assert not [q for q in ops if q["method"] == "HEAD"], "a HEAD per object instead of a listing"
    assert [q for q in ops if q["method"] == "GET" and "list-type=2" in q["path"] and "prefix=photos" in q["path"]]
    # The video (over 16 MiB) was read as 8 MiB ranges, several at once; the rest whole.
    video = lost.expected[b"videos/holiday clip.mov"]["md5"]
    assert len([q for q in ops if q["method"] == "GET" and video in q["path"]]) == 3
    assert f"Restored {len(TREE) - 1} files" in r.stdout
    r = restore(lost, "--to", str(to), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    again = json.loads(r.stdout)
    assert again["restored"] == 0 and again["alreadyThere"] == len(TREE) - 1 and again["problems"] == []
    assert_tree(lost, to / "photos")


def test_as_of_before_a_deletion_brings_the_file_back(lost):
    folder = f"{lost.folder}/2022"
    to = lost.root / "as-of-before"
    r = restore(lost, "--to", str(to), "--as-of", iso_ms(lost.t_before_delete), folder)
    assert r.returncode == 0, r.stdout + r.stderr
    assert_tree(lost, to / "photos", [DELETED])
    r = restore(lost, "--to", str(lost.root / "as-of-after"), "--as-of", iso_ms(lost.t_after_delete), "--dry-run", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    items = {i["path"] for i in json.loads(r.stdout)["items"]}
    assert len(items) == len(TREE) - 1 and not any("deleted later" in p for p in items)
    # Before the tree was backed up, nothing was there.
    r = restore(lost, "--to", str(lost.root / "as-of-never"), "--as-of", "2001-01-01")
    assert r.returncode == 0 and "Restoring 0 files" in r.stdout, r.stdout + r.stderr


def test_a_path_filter_restores_just_that_folder(lost):
    to = lost.root / "filtered"
    r = restore(lost, "--to", str(to), f"{lost.folder}/2021/Filter me/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert_tree(lost, to / "photos", [b"2021/Filter me/a.jpg", b"2021/Filter me/b.jpg"])
    r = restore(lost, "--to", str(to), f"{lost.folder}/2021/Filter")
    assert r.returncode == 1 and "no file under it" in r.stdout, r.stdout + r.stderr


def test_dry_run_writes_nothing_and_only_root_may_restore(lost):
    to = lost.root / "dry"
    r = restore(lost, "--to", str(to), "--dry-run", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["dryRun"] and len(out["items"]) == len(TREE) - 1
    assert {i["action"] for i in out["items"]} == {"restore"}
    assert not to.exists()
    # A member of the socket's group may look but not write; a non-member may do neither.
    # Another device's manifest (its names and folders) is not a member's to look at
    # (privacy.md "No side doors", issue 31): it may dry-run this NAS's own, filtered
    # (test_names_for_members.py).
    r = restore(lost, "--to", str(to), "--dry-run", user="nobody", groups="users")
    assert r.returncode == 4 and "root and the daemon's user" in r.stderr, r.stdout + r.stderr
    assert "Filter me" not in r.stdout + r.stderr and "Summer trip" not in r.stdout + r.stderr
    r = restore(lost, "--to", str(to), user="nobody", groups="users")
    assert r.returncode == 4 and "--dry-run" in r.stderr, r.stdout + r.stderr
    for args in (["--dry-run"], []):
        r = restore(lost, "--to", str(to), *args, user="nobody")
        assert r.returncode == 4, r.stdout + r.stderr
    assert not to.exists()


def test_a_read_cut_short_is_resumed(lost):
    """S3's answer breaks off mid-object: the daemon asks for the rest with a Range and
    the command gets the whole object (here read straight from the socket)."""
    e = lost.expected[b"2023/Summer trip/IMG 0001.jpg"]
    lost.proxy.set_faults(truncate_count=1)
    since = time.time()
    try:
        reply = raw_request(lost.b.socket, f"GET /v1/restore/object?md5={e['md5']}&size={e['size']} HTTP/1.1\r\n"
                                           f"Host: x\r\n\r\n".encode(), timeout=60)
    finally:
        lost.proxy.clear_faults()
    head, body = reply.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and f"content-length: {e['size']}".encode() in head.lower(), head
    assert md5(body) == e["md5"] and len(body) == e["size"]
    gets = [q for q in lost.proxy.stats()["requests"] if q["time"] >= since and e["md5"] in q["path"]]
    assert [q["fault"] for q in gets] == ["truncated", None], gets


def test_an_object_changed_in_the_bucket_is_refused(lost):
    s3, bucket = lost.moto.s3_admin(), lost.moto.bucket
    key = f"photos/{lost.user_id}/{lost.expected[b'changed behind/bad.jpg']['md5']}.dat"
    original = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.put_object(Bucket=bucket, Key=key, Body=os.urandom(len(original)))
    try:
        to = lost.root / "changed"
        r = restore(lost, "--to", str(to), f"{lost.folder}/changed behind")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "bad.jpg" in r.stdout and "changed in the bucket" in r.stdout
        assert_tree(lost, to / "photos", [b"changed behind/good.jpg"])
    finally:
        s3.put_object(Bucket=bucket, Key=key, Body=original)


def test_kill9_of_the_command_then_of_the_daemon_mid_restore(lost):
    """No partial file at a final path, ever; each time, running it again completes."""
    lost.proxy.set_faults(latency=0.4)
    to = lost.root / "killed"
    try:
        cmd = [binary(), "ctl", "restore", "--device", lost.device_id, "--to", str(to), "--socket", lost.b.socket]
        cli = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        dest = to / "photos"
        seen_status = wait_files(lost, dest, 4, cli, need_status=True)
        assert seen_status and seen_status["filesTotal"] == len(TREE) - 1 and seen_status["device"] == "nas-old", seen_status
        cli.kill()
        cli.wait(10)
        assert_no_partial(lost, dest)
        assert len(walk_files(dest)) < len(TREE) - 1, "the command was not killed mid-restore"
        # Now the daemon, mid-way through the next run.
        shutil.rmtree(dest / "bulk", ignore_errors=True)
        cli = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_files(lost, dest, len(walk_files(dest)) + 2, cli)
        lost.b.kill9()
        out, _ = cli.communicate(timeout=60)
        assert cli.returncode == 1, out
        assert_no_partial(lost, dest)
        assert len([p for p in walk_files(dest) if b".plrestore-" not in p]) < len(TREE) - 1, "the daemon was not killed mid-restore"
        lost.b.start()
    finally:
        lost.proxy.clear_faults()
    r = restore(lost, "--to", str(to))
    assert r.returncode == 0, r.stdout + r.stderr
    assert_tree(lost, to / "photos")
    assert leftovers(to) == []


def wait_files(lost, to: Path, count: int, cli, timeout: float = 60, need_status: bool = False):
    """Waits until `count` files (temporary ones included) exist under `to`, checking the
    final ones as they come; returns the restore in `status` if it was seen."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        if to.exists():
            assert_no_partial(lost, to)
            if len(walk_files(to)) >= count and (seen or not need_status):
                return seen
        if need_status and not seen:
            r = (lost.b.status().get("restore") or {})
            seen = r if r.get("filesTotal") else None
        assert cli.poll() is None, cli.communicate()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} files under {to} after {timeout}s")


def test_restored_files_are_not_uploaded_again(lost):
    """Into the new NAS's own watched folder: found in the bucket, no photo is sent again."""
    since = time.time()
    r = restore(lost, "--to", str(lost.b.root), f"{lost.folder}/2023", f"{lost.folder}/videos")
    assert r.returncode == 0, r.stdout + r.stderr
    rels = [rel for rel in TREE if rel.startswith((b"2023/", b"videos/"))]
    assert_tree(lost, lost.b.photos, rels)
    lost.b.wait_for(lambda s: s["queue"]["uploaded"] == len(rels) and manifest_idle(s, len(rels)), timeout=60,
                    what="the restored files backed up (found in the bucket) and in the new NAS's manifest")
    sent = [q for q in lost.proxy.stats()["requests"] if q["time"] >= since and q["method"] in ("PUT", "POST")
            and q["path"].startswith(f"/{lost.moto.bucket}/photos/")]
    assert sent == [], sent[:3]


def test_an_object_in_deep_archive_is_restored_after_the_wait(lost):
    s3, bucket = lost.moto.s3_admin(), lost.moto.bucket
    rel = b"archive/cold.jpg"
    key = f"photos/{lost.user_id}/{lost.expected[rel]['md5']}.dat"
    s3.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": key}, StorageClass="DEEP_ARCHIVE")
    assert s3.head_object(Bucket=bucket, Key=key)["StorageClass"] == "DEEP_ARCHIVE"
    lost.proxy.set_faults(archive_delay=4.0)
    since = time.time()
    to = lost.root / "thawed"
    try:
        dry = restore(lost, "--to", str(to), "--dry-run", "--json", f"{lost.folder}/archive")
        assert json.loads(dry.stdout)["waitingArchived"] == 1, dry.stdout
        cmd = [binary(), "ctl", "restore", "--device", lost.device_id, "--to", str(to), f"{lost.folder}/archive",
               "--socket", lost.b.socket]
        cli = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        waiting = lost.b.wait_for(lambda s: (s.get("restore") or {}).get("waitingArchived") == 1, timeout=20,
                                  what="status showing the wait")
        assert waiting["restore"]["archiveClass"] == "DEEP_ARCHIVE" and "12 hours" in waiting["restore"]["archiveWait"]
        assert "DEEP_ARCHIVE" in lost.b.ctl("status", check=True).stdout
        out, err = cli.communicate(timeout=60)
    finally:
        lost.proxy.clear_faults()
    assert cli.returncode == 0, out + err
    assert "DEEP_ARCHIVE" in out and "12 hours" in out
    assert time.time() - since >= 4.0
    asked = [q for q in lost.proxy.stats()["requests"] if q["time"] >= since and q["method"] == "POST" and "restore" in q["path"]]
    assert len(asked) == 1, asked
    assert_tree(lost, to / "photos", [rel])


def test_kill9_while_a_manifest_segment_is_written(lost):
    """Killed right after the bucket took a segment (so it was never recorded), then with
    a segment still on its way: the manifest always reads whole up to its last segment,
    and the restarted daemon takes the segment back instead of writing it twice."""
    sub = apple_subject("segments")
    user = user_id_for(sub)
    c = Daemon(lost.root / "c", name="c", config={"account": {"api_url": lost.backend.url}})
    lost.daemons.append(c)
    c.start()
    login(c, lost.backend, sub)
    files = {}

    def add(name: str):
        data = os.urandom(50_000)
        (c.photos / name).write_bytes(data)
        files[name.encode()] = md5(data)

    for n in ("one.jpg", "two.jpg"):
        add(n)
    s = c.wait_for(lambda s: manifest_idle(s, 2), timeout=60, what="segment 1")
    device = s["manifest"]["deviceId"]
    s3 = lost.moto.s3_admin()
    r = c.ctl("recovery-key", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    key = manifest_reader.account_key(s3, lost.moto.bucket, user, json.loads(r.stdout)["recoveryKey"])

    def check(expect_files: int | None = None) -> dict:
        m = manifest_reader.read(s3, lost.moto.bucket, user, device, key=key)
        latest = manifest_reader.replay(m["records"])
        assert all(rec["md5"] == files[p] for (_f, p), rec in latest.items())
        if expect_files is not None:
            assert len(latest) == expect_files
        paths = [r["path"] for r in m["records"]]
        assert len(paths) == len(set(paths)), "an entry was written twice"
        return m

    # The bucket takes segment 2 but its answer never arrives whole; the daemon is killed
    # before it tries again (its backoff is at least a second).
    add("three.jpg")
    c.wait_for(lambda s: s["queue"]["uploaded"] == 3, timeout=60, what="three.jpg uploaded")
    # Only a segment's PUT: the stage HEADs the key object first (issue 31).
    lost.proxy.set_faults(truncate_count=1, match=r"^PUT .*/log/")
    deadline = time.monotonic() + 30
    while not any(q["fault"] == "truncated" and "/log/" in q["path"] for q in lost.proxy.stats()["requests"]):
        assert time.monotonic() < deadline, "no manifest segment was written"
        time.sleep(0.01)
    c.kill9()
    lost.proxy.clear_faults()
    m = check(3)
    assert m["logs"] == [1, 2]
    c.start()
    s = c.wait_for(lambda s: manifest_idle(s, 3) and s["manifest"]["segments"] == 2, timeout=60, what="segment 2 taken back")
    assert "took back a manifest segment" in c.log()
    assert "took back a manifest segment" in c.log()
    check(3)
    # Now killed while a segment is on its way (held in the proxy).
    lost.proxy.set_faults(latency=2.0)
    add("four.jpg")
    c.wait_for(lambda s: s["queue"]["uploaded"] == 4, timeout=60, what="four.jpg uploaded")
    time.sleep(3.0)
    c.kill9()
    lost.proxy.clear_faults()
    time.sleep(2.5)
    check()
    c.start()
    c.wait_for(lambda s: manifest_idle(s, 4), timeout=60, what="the manifest whole again")
    m = check(4)
    assert m["logs"] == list(range(1, len(m["logs"]) + 1)) and len(m["logs"]) in (3, 4)
    assert c.stop() == 0
