#!/usr/bin/env python3
"""Restore benchmark (issue 16), every figure from one run:

1. restore: N photos of 2-8 MB backed up into moto by photolalad, then brought back with
   `photolalactl restore --to DIR` (every file MD5-checked against its key, its mtime set,
   synced, renamed into place) and exported with `photolalactl restore --by-date --to DIR`
   (the bucket listed afresh, the apps' catalog read — one row per photo, published as
   the apps do — each file named by its date, MD5-checked, synced, renamed) against
   `aws s3 cp --recursive` of the same objects from the same bucket, in rotating order;
   the daemon's peak RSS while restoring (VmHWM reset just before). All read with STS
   credentials of the same user.
2. manifest, new photos: bytes written under metadata/ (segments and device.json, counted
   at the fault proxy) for 1,000 new photos dropped at once, and for photos arriving one
   at a time (each its own segment).
3. manifest, a big library: a queue database seeded with N uploaded files (default
   1,000,000, realistic camera names in date folders), then signed in: every byte the
   daemon writes to build the manifest, and the compacted manifest's size per photo.

Usage: scripts/bench restore [--photos 500] [--rounds 3] [--library 1000000] [--bin PATH]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))
sys.path.insert(0, str(REPO / "scripts"))

from bench_upload import make_photos, proc_cpu_s, release_binary, timed, vm_hwm_kib  # noqa: E402
from support.app_catalog import publish_as_app  # noqa: E402
from support.daemon import connectable, raw_request  # noqa: E402
from support.fake_backend import FakeBackend, user_id_for  # noqa: E402
from support.fault_proxy import FaultProxy  # noqa: E402
from support.stack import MotoServer  # noqa: E402


RUNNING: list["Nas"] = []


class Nas:
    """One photolalad with a watched folder, signed in."""

    def __init__(self, binary: str, root: Path, backend: FakeBackend, sub: str, folder: Path | None = None,
                 env: dict | None = None, sign_in: bool = True):
        self.root, self.binary = root, binary
        root.mkdir(parents=True, exist_ok=True)
        self.watched = folder or root / "watched"
        if folder is None:
            self.watched.mkdir(parents=True, exist_ok=True)
        self.socket = str(root / "d.sock")
        self.state = root / "state"
        (root / "d.toml").write_text(f"""
[account]
api_url = "{backend.url}"
device_name = "bench-nas"
[watch]
folders = ["{self.watched}"]
settle = "1s"
[daemon]
state_dir = "{self.state}"
socket = "{self.socket}"
socket_group = "users"
log_level = "warning"
""")
        self.log = open(root / "d.log", "ab")
        self.proc = subprocess.Popen([binary, "--config", str(root / "d.toml")], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})))
        RUNNING.append(self)
        for _ in range(400):
            if connectable(self.socket):
                break
            time.sleep(0.05)
        if sign_in:
            self.ctl("login", "--identity-token", backend.mint_identity_token(sub))

    def ctl(self, *args, check=True):
        return subprocess.run([self.binary, "ctl", *args, "--socket", self.socket], capture_output=True, text=True, check=check)

    def status(self) -> dict:
        raw = raw_request(self.socket, b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        return json.loads(raw.split(b"\r\n\r\n", 1)[1])

    def wait(self, predicate, timeout: float, what: str):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            s = self.status()
            if predicate(s):
                return time.monotonic() - t0
            time.sleep(0.1)
        raise TimeoutError(f"{what}: last status {json.dumps(self.status())[:2000]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)
        self.log.close()
        if self in RUNNING:
            RUNNING.remove(self)


def manifest_idle(s: dict, files: int) -> bool:
    m = s.get("manifest") or {}
    return m.get("state") == "idle" and m.get("files") == files


def check_tree(src: Path, dst: Path) -> int:
    """Same names, bytes and mtimes; returns the files compared."""
    n = 0
    for p in src.rglob("*"):
        if p.is_file():
            q = dst / p.relative_to(src)
            assert q.read_bytes() == p.read_bytes(), q
            assert q.stat().st_mtime_ns == p.stat().st_mtime_ns, q
            n += 1
    return n


def check_export(src: Path, out: Path, dates: dict[str, int]) -> int:
    """Every photo once, at YYYY/MM/YYYY-MM-DD HH.MM.SS <md5[:8]>.jpg with its catalog
    date as mtime and its bytes; nothing else."""
    found = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    want = set()
    for p in src.iterdir():
        data = p.read_bytes()
        md5 = hashlib.md5(data).hexdigest()
        rel = time.strftime("%Y/%m/%Y-%m-%d %H.%M.%S", time.gmtime(dates[md5])) + f" {md5[:8]}.jpg"
        want.add(rel)
        assert (out / rel).read_bytes() == data, rel
        assert (out / rel).stat().st_mtime_ns == dates[md5] * 10**9, rel
    assert found == want, (sorted(found - want)[:3], sorted(want - found)[:3])
    return len(want)


def bench_restore(args, binary: str, work: Path, moto: MotoServer, backend: FakeBackend):
    sub = "bench-restore-subject"
    user = user_id_for(sub)
    staging = work / "staging"
    total = make_photos(staging, args.photos)
    mb = total / 1e6
    nas = Nas(binary, work / "nas", backend, sub)
    os.rename(staging, nas.watched / "photos")
    nas.wait(lambda s: s["queue"]["uploaded"] == args.photos and manifest_idle(s, args.photos), 1800, "upload")
    # The apps' catalog, as a phone would have published it: one row per photo, dated.
    rows = []
    dates = {}
    for i, p in enumerate(sorted((nas.watched / "photos").iterdir())):
        data = p.read_bytes()
        md5 = hashlib.md5(data).hexdigest()
        dates[md5] = 1_500_000_000 + i * 3_607
        rows.append(f"{hashlib.md5(data[:4096]).hexdigest()},{len(data)},{md5},{dates[md5]},JPEG")
    publish_as_app(moto.s3_admin(), moto.bucket, user, rows)
    print(f"restore: {args.photos} photos, {mb:.0f} MB, backed up into moto at {moto.endpoint}; {args.rounds} round(s); "
          f"load average {os.getloadavg()[0]:.2f} at the start")

    def run_aws(r: int) -> float:
        c = backend._vend(user)["credentials"]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=c["accessKeyId"], AWS_SECRET_ACCESS_KEY=c["secretAccessKey"],
                   AWS_SESSION_TOKEN=c["sessionToken"], AWS_DEFAULT_REGION=moto.region)
        out = work / f"aws-{r}"
        t = timed(["aws", "--endpoint-url", moto.endpoint, "s3", "cp", "--recursive", "--only-show-errors",
                   f"s3://{moto.bucket}/photos/{user}/", str(out)], env=env)
        assert sum(1 for _ in out.iterdir()) == args.photos
        shutil.rmtree(out)
        return t

    peaks: list[float] = []
    cpus: list[float] = []

    def run_photolalad(r: int) -> float:
        out = work / f"restored-{r}"
        Path(f"/proc/{nas.proc.pid}/clear_refs").write_text("5")  # VmHWM from here
        cpu0 = proc_cpu_s(nas.proc.pid)
        t = timed([binary, "ctl", "restore", "--to", str(out), "--socket", nas.socket])
        peaks.append(vm_hwm_kib(nas.proc.pid) / 1024)
        cpus.append(proc_cpu_s(nas.proc.pid) - cpu0)
        if r == 0:
            print(f"  restored tree checked: {check_tree(nas.watched, out / nas.watched.name)} files, names, bytes and mtimes equal")
        shutil.rmtree(out)
        return t

    export_peaks: list[float] = []
    export_cpus: list[float] = []

    def run_export(r: int) -> float:
        out = work / f"exported-{r}"
        Path(f"/proc/{nas.proc.pid}/clear_refs").write_text("5")
        cpu0 = proc_cpu_s(nas.proc.pid)
        t = timed([binary, "ctl", "restore", "--by-date", "--to", str(out), "--socket", nas.socket])
        export_peaks.append(vm_hwm_kib(nas.proc.pid) / 1024)
        export_cpus.append(proc_cpu_s(nas.proc.pid) - cpu0)
        if r == 0:
            print(f"  exported tree checked: {check_export(nas.watched / 'photos', out, dates)} files, names, bytes and mtimes as privacy.md says")
        shutil.rmtree(out)
        return t

    tools = {"aws s3 cp --recursive": run_aws, "photolalactl restore": run_photolalad, "restore --by-date": run_export}
    names = list(tools)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            subprocess.run(["sync"])
            t = tools[name](r)
            times[name].append(t)
            print(f"  round {r + 1}  {name:<24} {t:7.2f} s  {mb / t:6.1f} MB/s", flush=True)
    med = {n: statistics.median(times[n]) for n in names}
    print("medians:")
    for n in names:
        print(f"  {n:<24} {med[n]:7.2f} s  {mb / med[n]:6.1f} MB/s  (runs: {', '.join(f'{t:.2f}' for t in times[n])})")
    print(f"  ratio photolalactl restore / aws s3 cp = {med['photolalactl restore'] / med['aws s3 cp --recursive']:.2f} (target <= 1.0)")
    print(f"  ratio photolalactl restore --by-date / aws s3 cp = {med['restore --by-date'] / med['aws s3 cp --recursive']:.2f} (target <= 1.0)")
    print(f"  daemon: peak RSS while restoring {max(peaks):.1f} MB (target <= 64 MB), CPU {statistics.median(cpus):.2f} s a restore")
    print(f"  daemon: peak RSS while exporting {max(export_peaks):.1f} MB, CPU {statistics.median(export_cpus):.2f} s an export")
    nas.stop()
    moto.empty_bucket()


def manifest_writes(proxy: FaultProxy, since: float) -> tuple[int, int]:
    """(requests, body bytes) written under metadata/ since `since`."""
    reqs = [r for r in proxy.stats()["requests"] if r["time"] >= since and r["method"] == "PUT" and "/metadata/" in r["path"]]
    return len(reqs), sum(r["bytes"] for r in reqs)


def bench_new_photos(args, binary: str, work: Path, moto: MotoServer, backend: FakeBackend, proxy: FaultProxy):
    backend.configure(sts_endpoint=proxy.url)
    sub = "bench-manifest-subject"
    nas = Nas(binary, work / "manifest-nas", backend, sub)
    staging = work / "small"
    staging.mkdir()
    for i in range(1000):
        d = staging / f"2026/2026-11-{1 + i // 40:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"IMG_20261101_{100000 + i}.jpg").write_bytes(os.urandom(2048))
    since = time.time()
    os.rename(staging / "2026", nas.watched / "2026")
    nas.wait(lambda s: manifest_idle(s, 1000), 600, "1,000 photos in the manifest")
    n, b = manifest_writes(proxy, since)
    print(f"manifest: 1,000 new photos at once: {b:,} bytes in {n} PUTs ({b / 1000:.1f} bytes a photo, segment and device record)")
    since = time.time()
    trickle = 20
    for i in range(trickle):
        (nas.watched / f"one-{i}.jpg").write_bytes(os.urandom(2048))
        nas.wait(lambda s, k=i: manifest_idle(s, 1001 + k), 120, "one photo in the manifest")
    n, b = manifest_writes(proxy, since)
    print(f"manifest: {trickle} photos arriving one at a time: {b:,} bytes in {n} PUTs ({b / trickle:.0f} bytes a photo: "
          f"one segment and one device record each) -> {b / trickle * 1000:,.0f} bytes per 1,000 such photos")
    nas.stop()
    backend.configure(sts_endpoint=None)


def bench_library(args, binary: str, work: Path, moto: MotoServer, backend: FakeBackend, proxy: FaultProxy):
    """A library of `--library` uploaded files, seeded straight into the queue database."""
    backend.configure(sts_endpoint=proxy.url)
    sub = "bench-library-subject"
    user = user_id_for(sub)
    root = work / "library-nas"
    folder = root / "not-mounted"   # missing: the daemon waits for it and never sweeps its files away
    nas = Nas(binary, root, backend, sub, folder=folder, sign_in=False)
    nas.stop()
    rng = random.Random(16)
    db = sqlite3.connect(root / "state" / "queue.db")
    day = 1_400_000_000
    rows, objects = [], []
    t0 = time.monotonic()
    for i in range(args.library):
        if i % rng.randint(20, 60) == 0:
            day += 86_400 * rng.randint(1, 4)
        stamp = time.gmtime(day)
        taken = day + rng.randint(0, 86_399)
        name = time.strftime("IMG_%Y%m%d_%H%M%S", time.gmtime(taken)) + f"_{i % 1000:03d}.jpg"
        path = f"{folder}/{time.strftime('%Y/%Y-%m-%d', stamp)}/{name}"
        md5 = hashlib.md5(i.to_bytes(8, "little")).hexdigest()
        size = rng.randint(2_000_000, 8_000_000)
        rows.append((path, path.rsplit("/", 1)[0], i + 1, size, taken, rng.randint(0, 999_999_999), md5))
        objects.append((md5, size))
        if len(rows) == 50_000 or i == args.library - 1:
            with db:
                db.executemany("INSERT INTO object(md5, size, state, updatedAt) VALUES (?, ?, 'uploaded', 1800000000)", objects)
                db.executemany("INSERT INTO file(path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, state, updatedAt) "
                               "VALUES (?, ?, 1, ?, ?, ?, ?, ?, 'uploaded', 1800000000)", rows)
            rows, objects = [], []
    db.close()
    print(f"manifest: a library of {args.library:,} uploaded files seeded in {time.monotonic() - t0:.0f} s")
    since = time.time()
    nas = Nas(binary, root, backend, sub, folder=folder)
    t = nas.wait(lambda s: manifest_idle(s, args.library), 7200, "the library's manifest")
    n, b = manifest_writes(proxy, since)
    built = t
    print(f"manifest: {args.library:,} files written in {built:.0f} s: {b:,} bytes in {n} PUTs while building it "
          f"({b / args.library:.1f} bytes a photo, compactions included); daemon peak RSS {vm_hwm_kib(nas.proc.pid) / 1024:.1f} MB")
    nas.stop()
    # One more file, and a compaction after the very next segment: the manifest as a
    # snapshot of the whole library.
    db = sqlite3.connect(root / "state" / "queue.db")
    with db:
        db.execute("INSERT INTO object(md5, size, state, updatedAt) VALUES ('ffffffffffffffffffffffffffffffff', 5, 'uploaded', 1800000001)")
        db.execute("INSERT INTO file(path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, state, updatedAt) VALUES "
                   "(?, ?, 1, 0, 5, 1800000001, 0, 'ffffffffffffffffffffffffffffffff', 'uploaded', 1800000001)",
                   (f"{folder}/one-more.jpg", str(folder)))
    db.close()
    nas = Nas(binary, root, backend, sub, folder=folder, env={"PHOTOLALAD_MANIFEST_COMPACT_SEGMENTS": "1"})
    nas.wait(lambda s: manifest_idle(s, args.library + 1) and s["manifest"]["snapshot"] == s["manifest"]["segments"], 3600,
             "the compacted manifest")
    s3 = moto.s3_admin()
    keys = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=moto.bucket, Prefix=f"metadata/{user}/"):
        for o in page.get("Contents", []):
            keys[o["Key"]] = o["Size"]
    snapshot = sum(size for k, size in keys.items() if "/snapshot/" in k)
    print(f"manifest: after compaction the manifest of {args.library + 1:,} files is {snapshot:,} bytes in "
          f"{sum(1 for k in keys if '/snapshot/' in k)} objects = {snapshot / (args.library + 1):.1f} bytes a photo; "
          f"daemon peak RSS while compacting {vm_hwm_kib(nas.proc.pid) / 1024:.1f} MB")
    nas.stop()
    backend.configure(sts_endpoint=None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--library", type=int, default=1_000_000, help="files in the big-library manifest run (0 skips it)")
    ap.add_argument("--bin", help="a photolalad binary (default: build the release one)")
    ap.add_argument("--only", choices=["restore", "new", "library"], help="run one section")
    args = ap.parse_args()
    binary = args.bin or release_binary()
    work = Path(tempfile.mkdtemp(prefix="photolala-bench-restore-", dir="/var/tmp"))
    moto = MotoServer().start()
    backend = FakeBackend(moto).start()
    proxy = FaultProxy(moto.endpoint).start()
    try:
        if args.only in (None, "restore"):
            bench_restore(args, binary, work, moto, backend)
        if args.only in (None, "new"):
            bench_new_photos(args, binary, work, moto, backend, proxy)
        if args.only in (None, "library") and args.library > 0:
            bench_library(args, binary, work, moto, backend, proxy)
    finally:
        for nas in list(RUNNING):
            nas.stop()
        proxy.stop()
        backend.stop()
        moto.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
