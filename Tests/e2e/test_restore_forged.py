"""A restore that cannot be steered (issue 23, privacy.md "A restore that trusts nothing"):
anyone who can write the account's prefix in the bucket (another device, the storage
operator, a leaked STS credential) forges a manifest for a device — a format-1 segment
with its SHA-256 recomputed, and a device.json — naming `../` paths, a folder `/x/..`,
`/etc`, `/`, a folder outside the ones this NAS watches, with photo objects of their own
choosing; a symbolic link and a FIFO are planted in the tree. `photolalactl restore` runs
as root with and without `--to`: not a byte is written outside the target or this NAS's
watched folder (the filesystem around them is compared before and after), and the
summary says why each file was refused. A plaintext (format-1) manifest is refused
outright unless `--allow-unencrypted` is given, and then only under `--to` (in place only
a dry run); the forged format-2 manifests (a copied
segment, a flipped byte, another device's record) are in test_manifest_sealed.py."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import stat
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from support import manifest_reader
from support.daemon import Daemon
from support.fake_backend import FakeBackend, user_id_for
from support.fault_proxy import FaultProxy
from support.world import apple_subject, assert_no_secrets_in_logs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the attack matters when root restores: run as root")

MARK = "PWNED-" + uuid.uuid4().hex[:12]


# ---- a forger's format-1 segment, from docs/manifest.md ---------------------------------

def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def svarint(n: int) -> bytes:
    return uvarint((n << 1) ^ (n >> 63))


def forge_segment(device: str, folders: list[str], records: list[tuple[int, bytes, bytes]]) -> bytes:
    """A log segment 1 of `device`: records (folder index, path, body) as `appeared`, with
    the SHA-256 recomputed so it checks out like any other."""
    now = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000) - 60_000
    body, prev_path, prev_time = b"", b"", 0
    for folder, path, data in records:
        shared = 0
        while shared < min(len(prev_path), len(path)) and prev_path[shared] == path[shared]:
            shared += 1
        body += uvarint(folder) + uvarint(shared) + uvarint(len(path) - shared) + path[shared:] + b"\x01"
        body += svarint(now - prev_time) + uvarint(len(data)) + hashlib.md5(data).digest() + svarint(1_700_000_000) + uvarint(0)
        prev_path, prev_time = path, now
    header = json.dumps({"format": 1, "kind": "log", "device": device, "seq": 1, "entries": len(records), "folders": folders,
                         "createdAt": "2026-11-22T07:00:00Z"}).encode()
    rest = len(header).to_bytes(4, "big") + header + body
    return manifest_reader.MAGIC + hashlib.sha256(rest).digest() + rest


# ---- what the filesystem around the restore holds ---------------------------------------

def tree(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple]:
    """Every entry below `root` (links not followed): type, size, mode, owner, mtime."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(dirpath, d) not in skip]
        for name in dirs + files:
            p = Path(dirpath, name)
            if p in skip:
                continue
            st = os.lstat(p)
            out[str(p)] = (stat.S_IFMT(st.st_mode), st.st_size if not stat.S_ISDIR(st.st_mode) else 0, st.st_mode, st.st_uid,
                           st.st_mtime_ns if not stat.S_ISDIR(st.st_mode) else 0)
    return out


def marked(roots: list[Path], depth_one: list[Path]) -> list[str]:
    """Every name holding the marker, or a restore's temporary name, in these places."""
    found = []
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            found += [os.path.join(dirpath, n) for n in dirs + files if MARK in n or n.startswith(".plrestore-")]
    for d in depth_one:
        found += [str(d / n) for n in os.listdir(d) if MARK in n or n.startswith(".plrestore-")]
    return found


@pytest.fixture(scope="module")
def forged(moto_http, tmp_path_factory):
    moto = moto_http
    moto.empty_bucket()
    root = tmp_path_factory.mktemp("forged")
    backend = FakeBackend(moto).start()
    proxy = FaultProxy(moto.endpoint).start()
    backend.configure(sts_endpoint=proxy.url)
    d = Daemon(root / "nas", name="nas", config={"account": {"api_url": backend.url}})
    try:
        d.start()
        sub = apple_subject("forged")
        token = backend.mint_identity_token(sub)
        r = d.ctl("login", "--identity-token", token, "--authorization-code", "ac_" + os.urandom(8).hex())
        assert r.returncode == 0, r.stdout + r.stderr
        # The NAS's own backup: one photo, in the manifest.
        (d.photos / "mine.jpg").write_bytes(os.urandom(40_000))
        d.wait_for(lambda s: (s.get("manifest") or {}).get("state") == "idle" and (s.get("manifest") or {}).get("files") == 1,
                   timeout=90, what="the NAS's photo backed up and in its manifest")
        user = user_id_for(sub)
        outside = root / "outside"          # a folder no restore may write in
        outside.mkdir()
        watched = str(d.photos)
        # The forger's device: folders and paths of their choosing, objects of their choosing.
        device = str(uuid.uuid4())
        folders = ["/x/..", "/etc", str(outside), watched, "/"]
        bodies = {}

        def rec(folder: str, path: str) -> tuple[int, bytes, bytes]:
            data = f"{MARK} {folder} {path}\n".encode()
            bodies[path] = data
            return folders.index(folder), path.encode(), data

        records = [
            rec("/x/..", f"{MARK}-root.txt"),
            rec("/etc", f"{MARK}-etc.txt"),
            rec("/etc", f"cron.d/{MARK}-cron"),
            rec(str(outside), f"{MARK}-outside.txt"),
            rec("/", f"tmp/{MARK}-slash.txt"),
            rec(watched, f"{MARK}-ok.txt"),
            rec(watched, f"../{MARK}-dotdot.txt"),
            rec(watched, f"sub/../../{MARK}-sub.txt"),
            rec(watched, f"linked/{MARK}-link.txt"),
            rec(watched, f"{MARK}-fifo.txt"),
        ]
        s3 = moto.s3_admin()
        prefix = manifest_reader.device_prefix(user, device)
        segment = forge_segment(device, folders, records)
        manifest_reader.decode_segment(segment)   # it checks out, as the daemon will find
        s3.put_object(Bucket=moto.bucket, Key=prefix + "log/000000000001.plm", Body=segment)
        s3.put_object(Bucket=moto.bucket, Key=prefix + "device.json", Body=json.dumps({
            "format": 1, "deviceId": device, "name": "forged", "folders": folders, "lastBackupAt": "2026-11-22T07:00:00Z",
            "files": len(records), "bytes": sum(len(b) for b in bodies.values()), "logSeq": 1, "snapshotSeq": 0,
            "updatedAt": "2026-11-22T07:00:00Z", "software": "forger"}).encode())
        for data in bodies.values():
            s3.put_object(Bucket=moto.bucket, Key=f"photos/{user}/{hashlib.md5(data).hexdigest()}.dat", Body=data)
        # Planted in this NAS's own watched folder: a link out of it, a FIFO at a file's name.
        (outside / "linked-target").mkdir()
        os.symlink(outside / "linked-target", d.photos / "linked")
        os.mkfifo(d.photos / f"{MARK}-fifo.txt")
        yield SimpleNamespace(root=root, d=d, device=device, outside=outside, watched=d.photos, bodies=bodies, user=user)
    finally:
        try:
            d.stop()
        except Exception:
            d.kill9()
        logs = [d.log()]
        proxy.stop()
        backend.stop()
        assert_no_secrets_in_logs(backend, logs)


def restore(f, *args):
    # A format-1 forgery: the restore refuses it outright unless the user allows the old
    # plaintext format; allowed, every rule below must still hold.
    return f.d.ctl("restore", "--device", f.device, "--allow-unencrypted", *args, timeout=90)


def test_a_plaintext_manifest_needs_allow_unencrypted(forged):
    f = forged
    r = f.d.ctl("restore", "--device", f.device, "--to", str(f.root / "never"), timeout=90)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "old plaintext format" in r.stderr and "--allow-unencrypted" in r.stderr, r.stdout + r.stderr
    assert not (f.root / "never").exists() or list((f.root / "never").iterdir()) == []


def problems(stdout: str) -> list[str]:
    return [line.strip() for line in stdout.splitlines() if line.startswith("  ")]


def test_in_place_only_into_this_nas_watched_folder(forged):
    f = forged
    skip = (f.d.state_dir, f.d.log_path)
    before = tree(f.root, skip)
    assert marked([Path("/etc")], [Path("/"), Path("/tmp"), f.root]) == []
    # A dry run in place says what every rule refuses, and writes nothing.
    dry = restore(f, "--dry-run")
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert tree(f.root, skip) == before, "a dry run wrote something"
    out = problems(dry.stdout)
    for folder in ("/x/..", "/etc", str(f.outside), "/"):
        lines = [p for p in out if p.startswith("refused") and f" {folder} " in p]
        assert len(lines) == 1 and "--to DIR" in lines[0], (folder, out)
    assert any("/x/.. is not an absolute, normalised folder" in p for p in out), out
    assert any("/etc is not one of this NAS's watched folders" in p and "(2 files)" in p for p in out), out
    for bad in (f"../{MARK}-dotdot.txt", f"sub/../../{MARK}-sub.txt"):
        assert any(p.startswith("refused") and bad in p and "unsafe path" in p for p in out), (bad, out)
    # Writing in place from a manifest nothing authenticates is not done at all (issue 31:
    # --allow-unencrypted goes with --to only), so not even the one file the rules allow.
    r = restore(f)
    assert r.returncode == 64 and "--allow-unencrypted needs --to DIR" in r.stderr, r.stdout + r.stderr
    assert tree(f.root, skip) == before
    assert os.listdir(f.outside / "linked-target") == []
    assert stat.S_ISFIFO(os.lstat(f.watched / f"{MARK}-fifo.txt").st_mode)
    assert marked([Path("/etc")], [Path("/"), Path("/tmp"), f.root]) == [], "a forged file outside the watched folder"
    assert sorted(p for p in marked([f.root], []) if "/nas/state/" not in p) == [str(f.watched / f"{MARK}-fifo.txt")]


def test_under_to_every_folder_is_one_safe_name_and_no_link_is_followed(forged):
    f = forged
    to = f.root / "restored"
    to.mkdir()
    # Planted where the watched folder's copy goes (its last name, "photos").
    (f.outside / "photos-target").mkdir()
    os.symlink(f.outside / "photos-target", to / "photos")
    skip = (f.d.state_dir, f.d.log_path, to)
    before = tree(f.root, skip)
    r = restore(f, "--to", str(to), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    summary = json.loads(r.stdout)
    by_path = {p["path"]: p for p in summary["problems"]}
    # /x/.. is folder-1 (its position in the device's list), / is folder-5; /etc and the
    # outside folder their last names: all inside DIR, which is where the user asked.
    written = {str(p.relative_to(to)): p.read_bytes() for p in to.rglob("*") if p.is_file() and not p.is_symlink()}
    assert written == {
        f"folder-1/{MARK}-root.txt": f.bodies[f"{MARK}-root.txt"],
        f"etc/{MARK}-etc.txt": f.bodies[f"{MARK}-etc.txt"],
        f"etc/cron.d/{MARK}-cron": f.bodies[f"cron.d/{MARK}-cron"],
        f"outside/{MARK}-outside.txt": f.bodies[f"{MARK}-outside.txt"],
        f"folder-5/tmp/{MARK}-slash.txt": f.bodies[f"tmp/{MARK}-slash.txt"],
    }, written
    assert summary["restored"] == 5 and summary["failed"] == 3, summary
    # The watched folder's copy would go through the planted link: refused, for every file.
    link_refusals = [p for p in summary["problems"] if "photos is a symbolic link where a folder should be" in p["message"]]
    assert len(link_refusals) == 3, summary["problems"]
    assert os.listdir(f.outside / "photos-target") == []
    for bad in (f"../{MARK}-dotdot.txt", f"sub/../../{MARK}-sub.txt"):
        assert any(bad in path and by_path[path]["kind"] == "refused" and "unsafe path" in by_path[path]["message"]
                   for path in by_path), (bad, summary["problems"])
    after = tree(f.root, skip)
    assert after == before, sorted(set(after) ^ set(before))
    assert marked([Path("/etc")], [Path("/"), Path("/tmp")]) == []
    assert os.path.islink(to / "photos")
