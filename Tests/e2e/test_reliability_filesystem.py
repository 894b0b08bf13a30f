"""Reliability, filesystem adversity (issue 7, suite 4): what users' trees and other
programs do to files under a backup daemon.

- A hostile tree, present at start and created again while the daemon runs: FIFOs,
  sockets and device nodes named like photos (reading /dev/zero's twin would never end),
  symlink loops (file and directory, with `follow_symlinks` on), a followed symlink to a
  photo outside the tree, 100-level nesting, names with newlines, 255-byte names,
  canonically equivalent names (NFC and NFD spellings of one name, side by side),
  names that are not valid UTF-8, zero-length files.
- Files deleted, renamed, truncated, rewritten or swapped for a FIFO while being hashed
  and while being uploaded.
- Permission denied (the daemon without CAP_DAC_OVERRIDE): unreadable files and folders
  are reported, and backed up once readable.
- A sparse 6 GiB file: a multipart upload within 10,000 parts, never a single PUT, memory
  flat (the whole upload in the long variant).
- 100,000 files dropped at once: all queued with their MD5 (and in the long variant all
  uploaded), memory and descriptors bounded, status answering throughout.

Every object read back has MD5 = key; every log is scanned for secrets."""
from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import os
import socket
import sqlite3
import stat
import threading
import time
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from support.world import LISTING, settled, write_photo

MiB = 1 << 20
GiB = 1 << 30
SMALL_MULTIPART = {"multipart_threshold": "5MiB", "part_size": "5MiB"}


def idle(s: dict) -> bool:
    q = s["queue"]
    return q["pending"] == 0 and q["hashing"] == 0 and q["uploading"] == 0 and not s["watch"]["scanning"]


def bucket_keys(world) -> set[str]:
    s3 = world.moto.s3_admin()
    keys = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=world.moto.bucket):
        keys |= {o["Key"] for o in page.get("Contents", [])}
    return keys


def wait_backed_up(world, d, uid: str, bodies, timeout: float, what: str) -> dict:
    """Until every body is in S3 and the queue is idle (files may be counted under more
    than one path when links lead to them, so objects, not file counts, decide)."""
    want = {world.key(uid, b) for b in bodies}
    deadline = time.monotonic() + timeout
    while True:
        s = d.status()
        if idle(s) and want <= bucket_keys(world):
            return s
        if time.monotonic() > deadline:
            missing = want - bucket_keys(world)
            items = json.loads(d.ctl("queue", "--json", "--limit", "50").stdout)["items"]
            raise AssertionError(f"{what}: {len(missing)} objects missing; status {json.dumps(s['queue'])}; "
                                 f"queue {json.dumps(items, ensure_ascii=False)[:3000]}\nlog tail:\n{d.log()[-3000:]}")
        time.sleep(0.5)


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (kB) and Threads of a process."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM", "Threads"):
            out[k] = int(v.split()[0])
    return out


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_open(pid: int, path: Path, timeout: float = 30.0) -> bool:
    """Spins until process `pid` has `path` open."""
    path = str(path)
    deadline = time.monotonic() + timeout
    fd_dir = f"/proc/{pid}/fd"
    while time.monotonic() < deadline:
        for fd in os.listdir(fd_dir):
            try:
                if os.readlink(f"{fd_dir}/{fd}") == path:
                    return True
            except OSError:
                pass
        time.sleep(0.001)
    return False


def bpath(p) -> bytes:
    return os.fsencode(p)


# ---- a hostile tree ---------------------------------------------------------------------------

def make_hostile_tree(root: Path, outside: Path, tag: str) -> tuple[dict[str, bytes], dict[str, int]]:
    """Builds the tree under root/tag; returns the photos that must be backed up
    (path -> bytes) and how many of each hostile thing it holds."""
    base = root / tag
    base.mkdir(parents=True)
    want: dict[str, bytes] = {}
    made = Counter()

    def photo(rel: str | bytes, size: int, data: bytes | None = None) -> None:
        p = os.path.join(bpath(base), bpath(rel)) if isinstance(rel, bytes) else str(base / rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        body = data if data is not None else os.urandom(size)
        with open(p, "wb") as f:
            f.write(body)
        if isinstance(p, str):
            want[p] = body

    photo("plain.jpg", 40_000)
    photo("empty.jpg", 0, b"")
    made["zero-length files"] += 1
    photo("new\nline.jpg", 12_345)
    photo("trailing space .jpg", 2_345)
    photo("tab\tand\rreturn.heic", 3_456)
    made["names with control characters"] += 3
    photo("n" * 251 + ".jpg", 5_000)
    photo("deep255/" + "d" * 255 + "/" + "p" * 250 + ".JPEG", 6_000)
    made["255-byte names"] += 2
    # One name in two Unicode spellings (a Mac client writes NFD, others NFC), side by
    # side, as files and as directories: four different photos.
    nfc, nfd = unicodedata.normalize("NFC", "Café"), unicodedata.normalize("NFD", "Café")
    assert nfc != nfd and nfc.encode() != nfd.encode()
    photo(f"{nfc}.jpg", 7_001)
    photo(f"{nfd}.jpg", 7_002)
    photo(f"{nfc}/inside.jpg", 7_003)
    photo(f"{nfd}/inside.jpg", 7_004)
    made["canonically equivalent names"] += 4
    photo("写真/東京 2024 🌸.heic", 8_000)
    # 100 levels.
    deep = "/".join(f"level{i:03d}" for i in range(100))
    photo(f"{deep}/bottom.jpg", 9_000)
    made["100-level nesting"] += 1
    # Deeper than PATH_MAX (4096 bytes) in all: no path names it, only openat(2) reaches it.
    # Made with relative steps; the daemon cannot carry it by path, so status must say so.
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(100):
            name = f"{'long' * 12}{i:03d}"     # 51 bytes: 100 levels are over 5,000 bytes
            os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        pfd = os.open("beyond-path-max.jpg", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(pfd, os.urandom(9_500))
        os.close(pfd)
    finally:
        os.close(fd)
    made["paths longer than PATH_MAX"] += 1
    # Not valid UTF-8 (Latin-1 from an old SMB share): a file and a directory of photos.
    photo(b"caf\xe9.jpg", 10_000)
    photo(b"F\xfcr Oma/bild.jpg", 10_001)
    made["invalid UTF-8 names"] += 2
    # Things that are not regular files, named like photos.
    os.mkfifo(base / "pipe.jpg")
    made["FIFOs"] += 1
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(base / "socket.jpg"))
    s.close()
    made["sockets"] += 1
    os.mknod(base / "zero.jpg", 0o644 | stat.S_IFCHR, os.makedev(1, 5))      # /dev/zero: endless
    os.mknod(base / "random.heic", 0o644 | stat.S_IFCHR, os.makedev(1, 8))   # /dev/random
    os.mknod(base / "disk.mov", 0o644 | stat.S_IFBLK, os.makedev(7, 200))    # a loop device
    made["device nodes"] += 3
    # Symlinks: a file loop, a directory loop up the tree, one to itself, one dangling,
    # and one to a real photo outside the tree (followed: backed up).
    os.symlink("loop-b.jpg", base / "loop-a.jpg")
    os.symlink("loop-a.jpg", base / "loop-b.jpg")
    os.symlink("self.jpg", base / "self.jpg")
    (base / "sub").mkdir()
    os.symlink("..", base / "sub" / "up")
    os.symlink(".", base / "sub" / "here")
    os.symlink(str(root), base / "sub" / "root")
    os.symlink("/nonexistent/photo.jpg", base / "dangling.jpg")
    made["symlink loops"] += 6
    made["dangling symlinks"] += 1
    outside.mkdir(parents=True, exist_ok=True)
    target = outside / f"{tag}-real.jpg"
    body = os.urandom(11_111)
    target.write_bytes(body)
    os.symlink(target, base / "linked.jpg")
    want[str(base / "linked.jpg")] = body
    made["symlinks to photos outside"] += 1
    return want, made


@pytest.mark.reliability("filesystem")
def test_hostile_tree_at_start_and_while_running(world, reliability):
    d = world.daemon(config={"watch": {"follow_symlinks": True}}, start=False)
    outside = world.tmp_path / "outside"
    want, made = make_hostile_tree(d.photos, outside, "at-start")
    d.start()
    uid = world.login(d)
    more, made2 = make_hostile_tree(d.photos, outside, "while-running")
    want |= more
    t0 = time.monotonic()
    s = wait_backed_up(world, d, uid, want.values(), timeout=90, what="every photo in the hostile tree")
    elapsed = time.monotonic() - t0
    assert d.proc.poll() is None
    assert s["queue"]["failed"] == 0, d.ctl("queue", "--failed").stdout
    objects = world.objects(uid)
    assert set(objects) == {world.key(uid, b) for b in want.values()}
    # Nothing but regular files was read: no device node, FIFO or socket is open, and the
    # hashers are not stuck (status answered, the scan finished).
    fds = []
    for fd in os.listdir(f"/proc/{d.proc.pid}/fd"):
        try:
            fds.append(os.readlink(f"/proc/{d.proc.pid}/fd/{fd}"))
        except FileNotFoundError:
            pass   # closed between the listing and the look (the daemon is running)
    assert not [f for f in fds if f.endswith((".jpg", ".heic", ".mov"))], fds
    # The directory count is finite (loops followed once) and includes the 100 levels.
    assert 200 <= s["watch"]["directories"] < 400, s["watch"]
    # Links back into the tree were not followed: every photo is queued under one path.
    assert s["queue"]["uploaded"] == len(want), (s["queue"], len(want))
    # The names the daemon cannot carry are not silently lost: status says so.
    problems = " ".join(s["problems"])
    assert "4 files or folders are not backed up: the names are not valid UTF-8" in problems, s["problems"]
    assert "File name too long" in problems, s["problems"]
    for k, v in made2.items():
        made[k] += v
    reliability.describe(
        injected="a tree built before start and again while running (follow_symlinks on): "
                 + ", ".join(f"{k} ×{v}" for k, v in sorted(made.items())),
        times=f"{len(want)} photos among {sum(made.values())} hostile entries",
        checked="every regular photo (and the followed link) uploaded with MD5 = key, NFC and NFD twins both; nothing "
                "failed; each photo queued under one path (links back into the tree not followed); no device, FIFO or socket "
                "opened; loops entered once; invalid UTF-8 names and folders beyond PATH_MAX reported in status")
    reliability.figure("photos", len(want))
    reliability.figure("seconds to back up", round(elapsed, 1))


# ---- files changing under the daemon -----------------------------------------------------------

class Hooks:
    """Runs an action (once) in the proxy's thread right after S3's answer to a chosen
    request was handed to the daemon: the daemon has not read the next part yet."""

    def __init__(self, proxy):
        self.actions: dict[tuple, callable] = {}
        self.fired: list[str] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        proxy.on_response = self

    def on(self, method: str, key: str, part: int | None, action, name: str):
        self.actions[(method, key, part)] = (action, name)

    def __call__(self, entry: dict):
        path, _, query = entry["path"].partition("?")
        part = None
        for kv in query.split("&"):
            if kv.startswith("partNumber="):
                part = int(kv.split("=", 1)[1])
        with self.lock:
            hit = None
            for (method, key, p), (action, name) in list(self.actions.items()):
                if entry["method"] == method and path.endswith("/" + key) and p == part:
                    hit = (method, key, p), action, name
                    break
            if hit is None:
                return
            del self.actions[hit[0]]
        try:
            hit[1]()
            self.fired.append(hit[2])
        except Exception as e:  # noqa: BLE001 - asserted on by the test
            self.errors.append(f"{hit[2]}: {type(e).__name__}: {e}")


def sparse_body(size: int, seed: int) -> bytes:
    """Random head and tail around zeros: quick to make, every byte counts in the MD5."""
    head = hashlib.sha256(f"{seed}".encode()).digest() * (MiB // 32)
    return head + b"\0" * (size - 2 * len(head)) + head[::-1]


def rewrite_at(offset: int):
    def rewrite(p: Path):
        with open(p, "r+b") as f:
            f.seek(offset)
            f.write(os.urandom(64 << 10))
    return rewrite


def cut(p: Path, size: int):
    """Truncates through a descriptor, as editors and `truncate -s` do (its close is the
    event the watcher sees; truncate(2) by path raises none)."""
    with open(p, "r+b") as f:
        f.truncate(size)


def swap_for_fifo(p: Path):
    os.unlink(p)
    os.mkfifo(p)


@pytest.mark.reliability("filesystem")
def test_files_deleted_renamed_truncated_rewritten_or_swapped_mid_hash_and_mid_upload(world, reliability):
    # Single PUTs up to 64 MiB (one of 48 MiB is still being sent when it is cut), 5 MiB parts above.
    # Listing refused (403 from the proxy: moto does not enforce session policies), so the
    # uploader checks each object with a HEAD before its PUT: the window between that check
    # and the read is one of the moments below. With a listing there is no such request.
    world.proxy.set_faults(access_denied=True, match=LISTING)
    d = world.daemon(config={"upload": {"multipart_threshold": "64MiB", "part_size": "5MiB"}})
    uid = world.login(d)
    hooks = Hooks(world.proxy)
    must: set[bytes] = set()          # bodies that must end up in S3
    allowed: set[bytes] = set()       # bodies that may (uploaded before the change: still right)
    cases: list[str] = []

    # -- mid-hash: 96 MiB files, changed while the hasher has them open
    def hashed_while(name: str, change, expect_final: bool):
        p = d.photos / "hash" / name
        body = write_photo(p, 0, sparse_body(96 * MiB, len(cases)))
        allowed.add(body)
        assert wait_open(d.proc.pid, p), f"the daemon never opened {name}"
        final_path = change(p)
        cases.append(f"mid-hash {name}")
        if expect_final:
            must.add(final_path.read_bytes())

    def truncate(p):
        cut(p, MiB)
        return p

    def rewrite(p):
        with open(p, "r+b") as f:
            f.seek(50 * MiB)
            f.write(os.urandom(64 << 10))
        return p

    def rename(p):
        to = p.with_name("renamed-" + p.name)
        os.rename(p, to)
        return to

    hashed_while("deleted.mov", lambda p: p.unlink(), False)
    hashed_while("renamed.mov", rename, True)
    hashed_while("truncated.mov", truncate, True)
    hashed_while("rewritten.mov", rewrite, True)
    hashed_while("fifo.mov", swap_for_fifo, False)

    # -- mid-upload: after part 1 of a 4-part upload was accepted, or right after the
    #    HEAD that precedes a single PUT (between the check and the read), or while a
    #    single PUT's body is on the wire (the proxy holds it back 2 s).
    up = d.photos / "upload"
    up.mkdir()

    def later(p: Path, body: bytes, method: str, part: int | None, action, expect_final: bool, name: str):
        hooks.on(method, world.key(uid, body), part, lambda: action(p), name)
        cases.append(name)
        allowed.add(body)
        # Renamed: the photo lives on under its new name.
        finals.append((p.with_name("renamed-" + p.name) if action is rename else p, expect_final))

    finals: list[tuple[Path, bool]] = []
    specs = [
        ("mp-deleted.mov", 66 * MiB, "PUT", 1, lambda p: p.unlink(), False),
        ("mp-renamed.mov", 66 * MiB, "PUT", 1, rename, True),
        ("mp-truncated.mov", 66 * MiB, "PUT", 1, lambda p: cut(p, 6 * MiB), True),
        ("mp-rewritten.mov", 66 * MiB, "PUT", 1, rewrite_at(12 * MiB), True),
        ("mp-fifo.mov", 66 * MiB, "PUT", 1, swap_for_fifo, False),
        ("put-fifo.jpg", 3 * MiB, "HEAD", None, swap_for_fifo, False),
        ("put-devzero.jpg", 3 * MiB, "HEAD", None, lambda p: (p.unlink(), os.symlink("/dev/zero", p)), False),
        ("put-truncated.jpg", 3 * MiB, "HEAD", None, lambda p: cut(p, 100_000), True),
    ]
    bodies = {}
    for name, size, method, part, action, final in specs:
        bodies[name] = os.urandom(size)
        later(up / name, bodies[name], method, part, action, final, f"mid-upload {name}")

    # While the body of this 48 MiB PUT is held back by the proxy (more than the socket
    # buffers hold), it is cut to 2 MiB.
    on_wire = up / "put-cut-on-the-wire.jpg"
    bodies[on_wire.name] = os.urandom(48 * MiB)

    def hold_and_cut():
        world.proxy.set_faults(latency=3.0)

        def later():
            time.sleep(1.0)
            cut(on_wire, 2 * MiB)
            time.sleep(4.0)
            world.proxy.set_faults(latency=0.0)
        threading.Thread(target=later, daemon=True).start()
    hooks.on("HEAD", world.key(uid, bodies[on_wire.name]), None, hold_and_cut, "cut on the wire")
    cases.append("mid-upload put-cut-on-the-wire.jpg")
    allowed.add(bodies[on_wire.name])
    finals.append((on_wire, True))

    for name in bodies:
        write_photo(up / name, 0, bodies[name])

    # Photos that arrive afterwards must still go up: no worker may be stuck.
    time.sleep(5)
    after = [write_photo(d.photos / "after" / f"a{i}.jpg", 50_000 + i) for i in range(8)]
    must |= set(after)
    deadline = time.monotonic() + 300   # a wait: ~100 MB re-read and re-sent on a loaded machine
    while True:
        s = d.status()
        done = idle(s) and not hooks.actions
        if done:
            for p, final in finals:
                if final:
                    must.add(p.read_bytes())
            missing = {world.key(uid, b) for b in must} - bucket_keys(world)
            if not missing:
                break
        assert time.monotonic() < deadline, (
            f"not done: status {json.dumps(s['queue'])}, hooks left {list(hooks.actions)}, fired {hooks.fired}\n"
            f"missing {[p.name for p, f in finals if f and world.key(uid, p.read_bytes()) in missing] if done else '?'}\n"
            f"{d.ctl('queue', '--json').stdout[:3000]}\nlog tail:\n{d.log()[-3000:]}")
        time.sleep(0.5)
    assert not hooks.errors, hooks.errors
    for p, final in finals:
        if final:
            assert p.exists(), p
    assert s["queue"]["failed"] == 0, d.ctl("queue", "--failed").stdout
    objects = world.objects(uid)
    keys = set(objects)
    assert {world.key(uid, b) for b in must} <= keys
    assert keys <= {world.key(uid, b) for b in must | allowed}, "an object of bytes no file ever held"
    # Abandoned multipart uploads were aborted.
    left = world.moto.s3_admin().list_multipart_uploads(Bucket=world.moto.bucket).get("Uploads", [])
    assert left == [], left
    # Nothing odd is held open.
    fds = [os.readlink(f"/proc/{d.proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{d.proc.pid}/fd")]
    assert not [f for f in fds if "/photos/" in f], fds
    reliability.describe(
        injected="while hashed (96 MiB files): deleted, renamed, truncated, rewritten in place, swapped for a FIFO; "
                 "after part 1 of a 14-part upload: deleted, renamed, truncated, rewritten, swapped for a FIFO; "
                 "between the HEAD and a single PUT: swapped for a FIFO, for a symlink to /dev/zero, truncated; "
                 "a 48 MiB PUT cut to 2 MiB while its body was on the wire",
        times=f"{len(cases)} files, one change each",
        checked="the final bytes of every surviving file in S3 (MD5 = key), no object of bytes no file held; nothing "
                "failed; no worker stuck (8 photos written afterwards uploaded); abandoned multipart uploads aborted; "
                "no photo left open")
    reliability.figure("changes", len(cases))


# ---- permission denied ----------------------------------------------------------------------------

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2


def without_dac_override():
    """preexec_fn: root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH after exec, so file
    modes apply to it as to the daemon's own user under the packaged unit."""
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.mark.reliability("filesystem")
def test_permission_denied_is_reported_and_backed_up_once_readable(world, reliability):
    d = world.daemon(start=False)
    d.popen_kwargs = {"preexec_fn": without_dac_override}
    bodies = {"ok.jpg": write_photo(d.photos / "ok.jpg", 21_000)}
    bodies["locked.jpg"] = write_photo(d.photos / "locked.jpg", 22_000)
    os.chmod(d.photos / "locked.jpg", 0)
    for name in ("p1.jpg", "deeper/p2.jpg"):
        bodies[f"private/{name}"] = write_photo(d.photos / "private" / name, 23_000 + len(name))
    os.chmod(d.photos / "private", 0)
    bodies["unlistable/u.jpg"] = write_photo(d.photos / "unlistable" / "u.jpg", 24_000)
    os.chmod(d.photos / "unlistable", 0o311)   # may be entered, not listed
    d.start()
    caps = [line for line in Path(f"/proc/{d.proc.pid}/status").read_text().splitlines() if line.startswith("CapEff")]
    assert int(caps[0].split()[1], 16) & (1 << CAP_DAC_OVERRIDE) == 0, caps
    # Paused before the sign-in: ok.jpg waits too (signed in first, it was seen uploaded
    # before the pause arrived).
    assert d.ctl("pause").returncode == 0
    uid = world.login(d)
    # Made unreadable after it was hashed, before its upload.
    bodies["later.jpg"] = write_photo(d.photos / "later.jpg", 25_000)
    d.wait_for(lambda s: s["queue"]["pending"] >= 2 and s["queue"]["hashing"] == 0 and not s["watch"]["scanning"],
               timeout=30, what="later.jpg hashed")
    os.chmod(d.photos / "later.jpg", 0)
    assert d.ctl("resume").returncode == 0

    s = d.wait_for(lambda s: idle(s) and s["queue"]["failed"] == 2 and s["queue"]["uploaded"] == 1, timeout=60,
                   what="the readable photo up, two failed")
    problems = " ".join(s["problems"])
    assert "private" in problems and "unlistable" in problems, s["problems"]
    failed = {Path(i["path"]).name: i["lastError"] for i in
              json.loads(d.ctl("queue", "--failed", "--json", check=True).stdout)["items"]}
    assert set(failed) == {"locked.jpg", "later.jpg"}, failed
    assert all("permission denied" in (why or "").lower() for why in failed.values()), failed
    human = d.ctl("status", check=True).stdout
    assert "2 failed" in human and "cannot be read" in human

    # Readable again: `retry` and `rescan`, as status says; nothing is lost.
    for p, mode in (("locked.jpg", 0o644), ("later.jpg", 0o644), ("private", 0o755), ("unlistable", 0o755)):
        os.chmod(d.photos / p, mode)
    assert d.ctl("retry").returncode == 0 and d.ctl("rescan").returncode == 0
    s = wait_backed_up(world, d, uid, bodies.values(), timeout=60, what="every photo once readable")
    assert s["queue"]["failed"] == 0 and not any("cannot be read" in p for p in s["problems"]), s
    # The folders that were unreadable are watched now: a new photo there needs no rescan.
    bodies["private/new.jpg"] = write_photo(d.photos / "private" / "new.jpg", 26_000)
    bodies["unlistable/new.jpg"] = write_photo(d.photos / "unlistable" / "new.jpg", 27_000)
    wait_backed_up(world, d, uid, bodies.values(), timeout=30, what="new photos in the once unreadable folders")
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies.values()}
    reliability.describe(
        injected="the daemon as root without CAP_DAC_OVERRIDE: a photo of mode 000, a folder of mode 000 (2 photos, "
                 "one deeper), a folder that can be entered but not listed, a photo made unreadable between its hash "
                 "and its upload",
        times="4 unreadable places",
        checked="the two folders named in status, the two photos `failed` with \"permission denied\" (queue --failed, "
                "human status); once readable, `retry` + `rescan` back up every photo and clear the problem; new photos "
                "in those folders then go up without another rescan")
    reliability.figure("photos", len(bodies))


# ---- a sparse 6 GiB file ---------------------------------------------------------------------------

def part_plan(size: int, configured: int) -> tuple[int, int]:
    """s3-layout.md: parts of `configured`, grown in whole MiB so no file needs more than
    10,000, never below 5 MiB. Returns (part size, part count)."""
    part = max(5 * MiB, configured)
    needed = -(-size // 10_000)
    if needed > part:
        part = -(-needed // MiB) * MiB
    return part, -(-size // part)


@pytest.mark.reliability("filesystem")
def test_sparse_six_gib_file_is_a_multipart_upload_within_ten_thousand_parts(world, reliability, long_run):
    # The threshold at its maximum (5 GiB): above it, and above what one PUT may carry.
    d = world.daemon(config={"upload": {"multipart_threshold": "5GiB", "part_size": "5MiB"}})
    uid = world.login(d)
    size = 6 * GiB
    big = d.photos / "sparse.mov"
    head, tail = os.urandom(MiB), os.urandom(MiB)
    with open(big, "wb") as f:
        f.write(head)
        f.seek(size - MiB)
        f.write(tail)
    assert os.path.getsize(big) == size and os.stat(big).st_blocks * 512 < 16 * MiB, "not sparse"
    digest = hashlib.md5()
    digest.update(head)
    zeros = bytes(64 * MiB)
    left = size - 2 * MiB
    while left:
        n = min(left, len(zeros))
        digest.update(zeros[:n])
        left -= n
    digest.update(tail)
    key = f"photos/{uid}/{digest.hexdigest()}.dat"
    part, count = part_plan(size, 5 * MiB)
    assert count <= 10_000

    t0 = time.monotonic()
    peak = {"VmHWM": 0}
    want_parts = count if long_run else 4
    deadline = time.monotonic() + (1800 if long_run else 240)
    while True:
        ops = [r for r in world.s3_ops() if r["path"].split("?")[0].endswith(key)]
        parts = [r for r in ops if r["op"] == "UploadPart" and r["status"] == 200]
        peak["VmHWM"] = proc_status(d.proc.pid)["VmHWM"]
        if len({r["path"] for r in parts}) >= want_parts:
            break
        assert time.monotonic() < deadline, (Counter(r["op"] for r in ops), d.status()["queue"])
        time.sleep(0.5)
    if long_run:
        d.wait_for(settled(1, scan_done=True), timeout=600, interval=2, what="the 6 GiB upload")
    elapsed = time.monotonic() - t0
    ops = [r for r in world.s3_ops() if r["path"].split("?")[0].endswith(key)]
    assert not [r for r in ops if r["op"] == "PutObject"], "a single PUT of more than 5 GiB"
    assert [r["op"] for r in ops].count("CreateMultipartUpload") == 1
    parts = [r for r in ops if r["op"] == "UploadPart" and r["status"] == 200]
    sizes = Counter(r["bytes"] for r in parts)
    full = [n for n in sizes if n == part]
    assert full and set(sizes) <= {part, size - (count - 1) * part}, (sizes, part)
    # Memory stays flat while 6 GiB are hashed and sent.
    assert peak["VmHWM"] < 200 * 1024, peak
    s3 = world.moto.s3_admin()
    if long_run:
        head_ = s3.head_object(Bucket=world.moto.bucket, Key=key)
        assert head_["ContentLength"] == size and head_["ETag"].strip('"').endswith(f"-{count}"), head_
        body = s3.get_object(Bucket=world.moto.bucket, Key=key)["Body"]
        check = hashlib.md5()
        for chunk in iter(lambda: body.read(16 * MiB), b""):
            check.update(chunk)
        assert check.hexdigest() == digest.hexdigest()
    else:
        assert d.stop() == 0
        for u in s3.list_multipart_uploads(Bucket=world.moto.bucket).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=world.moto.bucket, Key=u["Key"], UploadId=u["UploadId"])
    reliability.describe(
        injected="a sparse 6 GiB video (random first and last MiB) with multipart_threshold = 5 GiB, part_size = 5 MiB"
                 + ("" if long_run else "; the upload stopped after 4 parts (the whole upload in the long variant)"),
        times=1,
        checked=f"one CreateMultipartUpload, never a PutObject (over 5 GiB); parts of {part // MiB} MiB = {count} parts "
                "≤ 10,000; VmHWM < 200 MiB while hashing and sending"
                + ("; the object's size, its ETag's part count and its MD5 read back" if long_run else ""))
    reliability.figure("parts", count)
    reliability.figure("VmHWM kB", peak["VmHWM"])
    reliability.figure("seconds", round(elapsed, 1))


def hashed(d) -> int:
    con = sqlite3.connect(f"file:{d.state_dir / 'queue.db'}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute("SELECT count(*) FROM file WHERE md5 IS NOT NULL AND state != 'gone'").fetchone()[0]
    finally:
        con.close()


# ---- 100,000 files at once -----------------------------------------------------------------------

@pytest.mark.reliability("filesystem")
def test_hundred_thousand_files_dropped_at_once(world, reliability, long_run):
    n, per_dir = 100_000, 1000
    d = world.daemon()
    uid = world.login(d)
    if not long_run:
        # Short: the ingest of all of them (hashing, the queue); uploading 100,000 objects
        # through moto takes longer than CI allows and is the long variant's part.
        assert d.ctl("pause").returncode == 0
    base = proc_status(d.proc.pid)
    base["fds"] = len(os.listdir(f"/proc/{d.proc.pid}/fd"))
    expected: dict[str, str] = {}

    def write_dirs(top: Path, first: int, count: int, final_top: Path):
        for k in range(first, first + count):
            sub = top / f"d{k:03d}"
            sub.mkdir(parents=True)
            for i in range(per_dir):
                body = (k * per_dir + i).to_bytes(8, "little") + os.urandom(8)
                fd = os.open(sub / f"IMG_{i:04d}.jpg", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(fd, body)
                os.close(fd)
                expected[str(final_top / f"d{k:03d}" / f"IMG_{i:04d}.jpg")] = md5(body)

    # Half of them made beside the tree and moved in with one rename (a copied card, one
    # event), half written straight into it (200,000 events: the kernel queue overflows).
    dirs = n // per_dir
    staging = world.tmp_path / "staging"
    write_dirs(staging, 0, dirs // 2, d.photos / "moved-in")
    t0 = time.monotonic()
    os.rename(staging, d.photos / "moved-in")
    write_dirs(d.photos / "written", dirs // 2, dirs - dirs // 2, d.photos / "written")
    written = time.monotonic() - t0

    peak_rss, peak_fds, slowest = 0, 0, 0.0
    deadline = time.monotonic() + (1800 if long_run else 480)
    while True:
        t = time.monotonic()
        s = d.status()
        slowest = max(slowest, time.monotonic() - t)
        st = proc_status(d.proc.pid)
        peak_rss = max(peak_rss, st["VmRSS"])
        peak_fds = max(peak_fds, len(os.listdir(f"/proc/{d.proc.pid}/fd")))
        q = s["queue"]
        # `pending` counts files waiting to be hashed and hashed ones waiting to go up
        # alike: the queue itself says when every one has its MD5.
        done = q["uploaded"] == n if long_run else (q["pending"] == n and q["hashing"] == 0 and hashed(d) == n)
        if done:
            break
        assert q["failed"] == 0, q
        assert time.monotonic() < deadline, (q, s["watch"])
        time.sleep(1)
    elapsed = time.monotonic() - t0
    hwm = proc_status(d.proc.pid)["VmHWM"]
    assert d.stop() == 0

    # Every file in the queue once, with the MD5 of its bytes.
    con = sqlite3.connect(f"file:{d.state_dir / 'queue.db'}?mode=ro", uri=True)
    rows = con.execute("SELECT path, md5, state FROM file WHERE state != 'gone'").fetchall()
    con.close()
    got = {p: m for p, m, _ in rows}
    assert len(rows) == len(got) == n
    assert got == expected
    if long_run:
        assert bucket_keys(world) == {f"photos/{uid}/{m}.dat" for m in expected.values()}
    assert hwm < 300 * 1024, f"VmHWM {hwm} kB"
    assert peak_fds < base["fds"] + 64, (base["fds"], peak_fds)
    assert slowest < 5, f"status took {slowest:.1f} s"
    reliability.describe(
        injected=f"{n:,} photos in 100 folders of 1,000: half moved into the tree with one rename, half written "
                 "into it while the daemon ran"
                 + ("" if long_run else " (uploads paused: the ingest; all uploaded in the long variant)"),
        times=f"{n:,} files",
        checked="every file in the queue exactly once with the MD5 of its bytes"
                + (", every object in S3" if long_run else "")
                + "; VmHWM < 300 MiB; descriptors < baseline + 64; status answered within 5 s throughout; nothing failed")
    reliability.figure("seconds to queue" if not long_run else "seconds to upload", round(elapsed, 1))
    reliability.figure("seconds to write", round(written, 1))
    reliability.figure("VmHWM kB", hwm)
    reliability.figure("peak fds", peak_fds)
