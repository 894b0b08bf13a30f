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

With --format1-bin PATH (a photolalad of commit 9958bab, the release before manifest
format 2), sections 2 and 3 run first with it, then with this one, against the same moto,
each under its own account, and print the ratios format 2 / format 1: bytes a photo (a
burst of 1,000, one alone, the library while building and compacted) and the daemon's CPU
(utime + stime from /proc/PID/stat, every thread) from the sign-in to the library's
manifest written.

Usage: scripts/bench restore [--photos 500] [--rounds 3] [--library 1000000] [--bin PATH]
                             [--only restore|new|library] [--format1-bin PATH]
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

from bench_upload import children_cpu_s, make_photos, proc_cpu_s, release_binary, timed, vm_hwm_kib  # noqa: E402
from support.app_catalog import publish_as_app  # noqa: E402
from support.daemon import connectable, raw_request  # noqa: E402
from support.fake_backend import FakeBackend, user_id_for  # noqa: E402
from support.fault_proxy import FaultProxy  # noqa: E402
from support.stack import MotoServer  # noqa: E402


RUNNING: list["Nas"] = []


class Nas:
    """One photolalad with a watched folder, signed in."""

    def __init__(self, binary: str, root: Path, backend: FakeBackend, sub: str, folder: Path | None = None,
                 env: dict | None = None, sign_in: bool = True, catalog: bool = True):
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
[catalog]
enabled = {"true" if catalog else "false"}
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
            try:
                s = self.status()
            except TimeoutError:   # a debug build writing a big manifest can be slow to answer
                continue
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
    # Where the CPU goes, a run: the command itself (aws-cli, or photolalactl), the daemon, moto.
    spent: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            subprocess.run(["sync"])
            c0, d0, m0 = children_cpu_s(), proc_cpu_s(nas.proc.pid), proc_cpu_s(moto.proc.pid)
            t = tools[name](r)
            spent[name].append((children_cpu_s() - c0, proc_cpu_s(nas.proc.pid) - d0, proc_cpu_s(moto.proc.pid) - m0))
            times[name].append(t)
            print(f"  round {r + 1}  {name:<24} {t:7.2f} s  {mb / t:6.1f} MB/s", flush=True)
    med = {n: statistics.median(times[n]) for n in names}
    print("medians:")
    for n in names:
        print(f"  {n:<24} {med[n]:7.2f} s  {mb / med[n]:6.1f} MB/s  (runs: {', '.join(f'{t:.2f}' for t in times[n])})")
    print("CPU-seconds a run (medians): the command / the daemon / moto")
    for n in names:
        cmd, dmn, mto = (statistics.median(x[i] for x in spent[n]) for i in range(3))
        print(f"  {n:<24} {cmd:6.2f} / {dmn:6.2f} / {mto:6.2f}")
    print(f"  ratio photolalactl restore / aws s3 cp = {med['photolalactl restore'] / med['aws s3 cp --recursive']:.2f} (target <= 1.0)")
    print(f"  ratio photolalactl restore --by-date / aws s3 cp = {med['restore --by-date'] / med['aws s3 cp --recursive']:.2f} (target <= 1.0)")
    print(f"  daemon: peak RSS while restoring {max(peaks):.1f} MB (target <= 64 MB), CPU {statistics.median(cpus):.2f} s a restore")
    print(f"  daemon: peak RSS while exporting {max(export_peaks):.1f} MB, CPU {statistics.median(export_cpus):.2f} s an export")
    nas.stop()
    moto.empty_bucket()


def manifest_writes(proxy: FaultProxy, since: float, device_json: bool = False):
    """(requests, body bytes) written under metadata/ since `since`; with device_json, also
    the bytes of those that were device.json."""
    reqs = [r for r in proxy.stats()["requests"] if r["time"] >= since and r["method"] == "PUT" and "/metadata/" in r["path"]]
    total = (len(reqs), sum(r["bytes"] for r in reqs))
    if device_json:
        return total + (sum(r["bytes"] for r in reqs if r["path"].split("?")[0].endswith("/device.json")),)
    return total


def bench_new_photos(args, binary: str, work: Path, moto: MotoServer, backend: FakeBackend, proxy: FaultProxy,
                     tag: str = "") -> dict:
    backend.configure(sts_endpoint=proxy.url)
    sub = f"bench-manifest-subject{tag}"
    nas = Nas(binary, work / f"manifest-nas{tag}", backend, sub)
    staging = work / f"small{tag}"
    staging.mkdir()
    for i in range(1000):
        d = staging / f"2026/2026-11-{1 + i // 40:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"IMG_20261101_{100000 + i}.jpg").write_bytes(os.urandom(2048))
    since = time.time()
    os.rename(staging / "2026", nas.watched / "2026")
    nas.wait(lambda s: manifest_idle(s, 1000), 600, "1,000 photos in the manifest")
    n, b, dev = manifest_writes(proxy, since, device_json=True)
    burst = b / 1000
    print(f"manifest{tag}: 1,000 new photos at once: {b:,} bytes in {n} PUTs ({b / 1000:.1f} bytes a photo, segment and device record; "
          f"device.json {dev:,} of them)")
    since = time.time()
    trickle = 20
    for i in range(trickle):
        (nas.watched / f"one-{i}.jpg").write_bytes(os.urandom(2048))
        nas.wait(lambda s, k=i: manifest_idle(s, 1001 + k), 120, "one photo in the manifest")
    n, b, dev = manifest_writes(proxy, since, device_json=True)
    print(f"manifest{tag}: {trickle} photos arriving one at a time: {b:,} bytes in {n} PUTs ({b / trickle:.0f} bytes a photo: "
          f"one segment of {(b - dev) / trickle:.0f} and one device record of {dev / trickle:.0f} each) "
          f"-> {b / trickle * 1000:,.0f} bytes per 1,000 such photos")
    nas.stop()
    backend.configure(sts_endpoint=None)
    return {"burst": burst, "alone": b / trickle}


def bench_library(args, binary: str, work: Path, moto: MotoServer, backend: FakeBackend, proxy: FaultProxy,
                  tag: str = "") -> dict:
    """A library of `--library` uploaded files, seeded straight into the queue database."""
    backend.configure(sts_endpoint=proxy.url)
    sub = f"bench-library-subject{tag}"
    user = user_id_for(sub)
    root = work / f"library-nas{tag}"
    folder = root / "not-mounted"   # missing: the daemon waits for it and never sweeps its files away
    nas = Nas(binary, root, backend, sub, folder=folder, sign_in=False, catalog=args.library_catalog)
    nas.stop()
    rng = random.Random(16)
    db = sqlite3.connect(root / "state" / "queue.db")
    # A queue of manifest format 2 keeps each file's SHA-256 and owner, and its records
    # carry them: seeded as a NAS of this release would have them (root:root, 0644; the
    # SHA-256 made up like the MD5). Format 1 has neither.
    full = "sha256" in {r[1] for r in db.execute("PRAGMA table_info(file)")}
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
        row = (path, path.rsplit("/", 1)[0], i + 1, size, taken, rng.randint(0, 999_999_999), md5)
        rows.append(row + (hashlib.sha256(i.to_bytes(8, "little")).digest(), 0, 0, 0o100644) if full else row)
        objects.append((md5, size))
        if len(rows) == 50_000 or i == args.library - 1:
            with db:
                db.executemany("INSERT INTO object(md5, size, state, updatedAt) VALUES (?, ?, 'uploaded', 1800000000)", objects)
                if full:
                    db.executemany("INSERT INTO file(path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, sha256, uid, gid, mode, "
                                   "state, updatedAt) VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'uploaded', 1800000000)", rows)
                else:
                    db.executemany("INSERT INTO file(path, dir, device, inode, size, mtimeSec, mtimeNsec, md5, state, updatedAt) "
                                   "VALUES (?, ?, 1, ?, ?, ?, ?, ?, 'uploaded', 1800000000)", rows)
            rows, objects = [], []
    with db:
        # As if the photos prefix had just been listed whole: without it, the first listing
        # after the sign-in finds none of these objects in moto and queues them all again.
        now = time.time()
        db.execute("INSERT INTO inventory_listing(prefix, state, startedAt, listedAt, objects, seen, updatedAt) "
                   "VALUES (?, 'complete', ?, ?, ?, ?, ?)", (f"photos/{user}/", now, now, args.library, args.library, now))
    db.close()
    print(f"manifest{tag}: a library of {args.library:,} uploaded files seeded in {time.monotonic() - t0:.0f} s"
          f"{' with SHA-256s and owners' if full else ''}; catalog stage {'on' if args.library_catalog else 'off'}")
    since = time.time()
    # Signed in once started: the daemon's CPU (utime + stime, every thread) from the
    # sign-in to the manifest written, compactions along the way included.
    nas = Nas(binary, root, backend, sub, folder=folder, sign_in=False, catalog=args.library_catalog)
    cpu0 = proc_cpu_s(nas.proc.pid)
    nas.ctl("login", "--identity-token", backend.mint_identity_token(sub))
    t = nas.wait(lambda s: manifest_idle(s, args.library), 7200, "the library's manifest")
    cpu = proc_cpu_s(nas.proc.pid) - cpu0
    n, b = manifest_writes(proxy, since)
    built = t
    print(f"manifest{tag}: {args.library:,} files written in {built:.0f} s: {b:,} bytes in {n} PUTs while building it "
          f"({b / args.library:.1f} bytes a photo, compactions included); daemon CPU {cpu:.2f} s; "
          f"daemon peak RSS {vm_hwm_kib(nas.proc.pid) / 1024:.1f} MB")
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
    nas = Nas(binary, root, backend, sub, folder=folder, env={"PHOTOLALAD_MANIFEST_COMPACT_SEGMENTS": "1"},
              catalog=args.library_catalog)
    nas.wait(lambda s: manifest_idle(s, args.library + 1) and s["manifest"]["snapshot"] == s["manifest"]["segments"], 3600,
             "the compacted manifest")
    s3 = moto.s3_admin()
    keys = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=moto.bucket, Prefix=f"metadata/{user}/"):
        for o in page.get("Contents", []):
            keys[o["Key"]] = o["Size"]
    snapshot = sum(size for k, size in keys.items() if "/snapshot/" in k)
    print(f"manifest{tag}: after compaction the manifest of {args.library + 1:,} files is {snapshot:,} bytes in "
          f"{sum(1 for k in keys if '/snapshot/' in k)} objects = {snapshot / (args.library + 1):.1f} bytes a photo; "
          f"daemon peak RSS while compacting {vm_hwm_kib(nas.proc.pid) / 1024:.1f} MB")
    nas.stop()
    backend.configure(sts_endpoint=None)
    return {"building": b / args.library, "cpu": cpu, "seconds": built, "compacted": snapshot / (args.library + 1)}


def ratios(f1: dict, f2: dict, goals: dict[str, tuple[str, float]]) -> None:
    """Format 2 / format 1 for each figure both runs measured, against its goal."""
    for key, (what, goal) in goals.items():
        if key in f1 and key in f2:
            r = f2[key] / f1[key]
            print(f"  ratio format 2 / format 1, {what}: {f2[key]:.2f} / {f1[key]:.2f} = {r:.2f} "
                  f"(goal <= {goal}: {'met' if r <= goal else 'not met'})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--library", type=int, default=1_000_000, help="files in the big-library manifest run (0 skips it)")
    ap.add_argument("--bin", help="a photolalad binary (default: build the release one)")
    ap.add_argument("--only", choices=["restore", "new", "library"], help="run one section")
    ap.add_argument("--library-rounds", type=int, default=1, help="with --format1-bin: pairs of library runs, "
                    "alternating which format goes first; the CPU ratio is of the medians")
    ap.add_argument("--library-catalog", action=argparse.BooleanOptionalAction, default=False,
                    help="run the library's daemons with the catalog stage on: its thumbnail attempts for the "
                    "100,000 unreadable files then count in the manifest's CPU (default: off, in both formats)")
    ap.add_argument("--format1-bin", help="a photolalad of manifest format 1 (commit 9958bab): the manifest sections "
                    "run with it too, first, and print the ratios format 2 / format 1")
    args = ap.parse_args()
    binary = args.bin or release_binary()
    print(f"binaries: {binary}" + (f"; format 1: {args.format1_bin}" if args.format1_bin else ""))
    work = Path(tempfile.mkdtemp(prefix="photolala-bench-restore-", dir="/var/tmp"))
    moto = MotoServer().start()
    backend = FakeBackend(moto).start()
    proxy = FaultProxy(moto.endpoint).start()
    try:
        if args.only in (None, "restore"):
            bench_restore(args, binary, work, moto, backend)
        if args.only in (None, "new"):
            if args.format1_bin:
                f1 = bench_new_photos(args, args.format1_bin, work, moto, backend, proxy, tag=" (format 1)")
            f2 = bench_new_photos(args, binary, work, moto, backend, proxy, tag=" (format 2)" if args.format1_bin else "")
            if args.format1_bin:
                ratios(f1, f2, {"burst": ("bytes a photo, 1,000 at once", 1.1), "alone": ("bytes a photo alone", 1.1)})
        if args.only in (None, "library") and args.library > 0:
            if not args.format1_bin:
                bench_library(args, binary, work, moto, backend, proxy)
            else:
                # Pairs, alternating which format goes first: one pair's CPU moves with
                # whatever else the machine does, so the ratio of the medians is the figure.
                runs: dict[int, list[dict]] = {1: [], 2: []}
                for r in range(args.library_rounds):
                    order = [(1, args.format1_bin), (2, binary)]
                    for fmt, b in (order if r % 2 == 0 else order[::-1]):
                        runs[fmt].append(bench_library(args, b, work, moto, backend, proxy,
                                                       tag=f" (format {fmt}" + (f", round {r + 1})" if args.library_rounds > 1 else ")")))
                if args.library_rounds > 1:
                    print("pairs, daemon CPU-seconds format 2 / format 1: "
                          + ", ".join(f"{b['cpu']:.2f} / {a['cpu']:.2f} = {b['cpu'] / a['cpu']:.2f}" for a, b in zip(runs[1], runs[2])))
                f1, f2 = ({k: statistics.median(run[k] for run in runs[fmt]) for k in runs[fmt][0]} for fmt in (1, 2))
                ratios(f1, f2, {"compacted": (f"bytes a photo, {args.library + 1:,} compacted", 1.1),
                                "building": (f"bytes a photo building {args.library:,}", 1.1),
                                "cpu": (f"daemon CPU-seconds writing the manifest of {args.library:,} new photos"
                                        + (f", medians of {args.library_rounds}" if args.library_rounds > 1 else ""), 1.2)})
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
