#!/usr/bin/env python3
"""First-sync benchmark: N photos that are already in the bucket (uploaded beforehand by
another client, as a phone would have), on a NAS that signs in for the first time. The
same run measures this build (it lists the bucket) and a build that sends a HEAD before
every upload (--base-bin, e.g. the release build of 913d3f6), each through a fault proxy
without faults that counts every S3 request by operation.

Each daemon starts signed out with the photos already in its watched folder and hashes
them all; the clock starts at `photolalactl login` and stops when status says every file
is uploaded. Nothing may be sent: the script fails if a daemon PUTs anything.

Usage: scripts/bench sync [--photos 10000] [--base-bin PATH] [--bin PATH] [--rounds 1]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))
sys.path.insert(0, str(REPO / "scripts"))

from bench_upload import DaemonRun, proc_cpu_s, release_binary  # noqa: E402
from support.fake_backend import FakeBackend, user_id_for  # noqa: E402
from support.fault_proxy import FaultProxy  # noqa: E402
from support.stack import MotoServer  # noqa: E402
from support.world import s3_operation  # noqa: E402


def make_photos(folder: Path, count: int, seed: int = 14) -> list[bytes]:
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    bodies = []
    for i in range(count):
        body = os.urandom(rng.randint(20_000, 60_000))
        (folder / f"IMG_{i:05d}.jpg").write_bytes(body)
        bodies.append(body)
    return bodies


def seed_bucket(moto: MotoServer, backend: FakeBackend, user: str, bodies: list[bytes]) -> float:
    import hashlib
    s3 = moto.s3_with(backend._vend(user)["credentials"])
    t0 = time.monotonic()

    def put(body: bytes):
        s3.put_object(Bucket=moto.bucket, Key=f"photos/{user}/{hashlib.md5(body).hexdigest()}.dat", Body=body,
                      ContentType="image/jpeg")
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, bodies))
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=10_000)
    ap.add_argument("--bin", help="this build (default: build the release one)")
    ap.add_argument("--base-bin", required=True, help="a build that sends a HEAD before every upload (e.g. 913d3f6)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()

    binary = args.bin or release_binary()
    builds = {"HEAD per object (base)": args.base_bin, "listing (this build)": binary}
    work = Path(tempfile.mkdtemp(prefix="photolala-bench-sync-", dir="/var/tmp"))
    moto = MotoServer().start()
    backend = FakeBackend(moto).start()
    proxy = FaultProxy(moto.endpoint).start()
    backend.configure(sts_endpoint=proxy.url)
    sub = "bench-sync-apple-subject"
    user = user_id_for(sub)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    try:
        staging = work / "photos"
        bodies = make_photos(staging, args.photos)
        mb = sum(map(len, bodies)) / 1e6
        took = seed_bucket(moto, backend, user, bodies)
        print(f"sync: {args.photos} photos ({mb:.0f} MB) already in the bucket (seeded by another client in {took:.0f} s); "
              f"each daemon hashes them signed out, then signs in; timed from the sign-in to every file uploaded")
        results: dict[str, list[tuple[float, Counter, float]]] = {n: [] for n in builds}
        names = list(builds)
        for r in range(args.rounds):
            for name in names[r % 2:] + names[:r % 2]:
                run = DaemonRun(builds[name], work / f"{name.split()[0]}-{r}", backend, args.concurrency, sub, sign_in=False)
                os.rename(staging, run.watched / "photos")
                deadline = time.monotonic() + 1800
                while True:
                    q = run.status()["queue"]
                    if q["pending"] == args.photos and q["hashing"] == 0:
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{name}: not all hashed: {q}")
                    time.sleep(0.2)
                proxy.reset_stats()
                cpu0 = proc_cpu_s(run.proc.pid)
                t0 = time.monotonic()
                run.sign_in()
                run.wait_uploaded(args.photos)
                elapsed = time.monotonic() - t0
                cpu = proc_cpu_s(run.proc.pid) - cpu0
                ops = Counter(s3_operation(q["method"], q["path"]) for q in proxy.stats()["requests"])
                run.stop()
                os.rename(run.watched / "photos", staging)
                if ops["PutObject"] or ops["UploadPart"]:
                    raise RuntimeError(f"{name} sent photos that were already there: {dict(ops)}")
                results[name].append((elapsed, ops, cpu))
                print(f"  round {r + 1}  {name:<24} {elapsed:7.2f} s  requests {sum(ops.values()):6d}  "
                      f"{dict(sorted(ops.items()))}  daemon CPU {cpu:5.1f} s", flush=True)
        base, new = (results[n][-1] for n in names)
        print(f"  requests: {sum(base[1].values())} → {sum(new[1].values())} "
              f"({sum(base[1].values()) / max(1, sum(new[1].values())):.0f}× fewer; target ≥ 20×)")
        print(f"  wall time: {base[0]:.2f} s → {new[0]:.2f} s ({base[0] / new[0]:.1f}× faster)")
    finally:
        proxy.stop()
        backend.stop()
        moto.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
