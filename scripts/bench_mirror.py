#!/usr/bin/env python3
"""Mirror benchmark (issue 32), each figure beside a peer measured in the same run.

pull   a first pull of N photos of 2–8 MB (default 500) from Ceph's RADOS Gateway over
       HTTPS (a test CA made for the run; memstore, so the objects live in RAM) into an
       empty folder: photolalad's mirror (from `photolalactl login` until every copy is
       checked and in place, fsync included) against `aws s3 sync` and `rclone copy` of
       the same prefix with the same STS session credentials, in rotated order. Wall time
       and the CPU of each tool (the daemon's own utime+stime; the peers' as children).
       Goals: wall <= 0.9 x the faster peer, CPU <= 0.7 x the leanest.
pass   an account of N objects (default 100,000, small) and a catalog naming them, every
       photo already in the mirror folder under other names (adopted by MD5 on the first
       pass, as after `restore --by-date`, instead of N GETs); the daemon restarts and makes its full pass (the catalog, a full
       listing, every copy looked at), then a check of an unchanged pointer: the S3
       requests of each (counted at a proxy in front of moto), the pass's wall time and the
       daemon's peak RSS (VmHWM). Goals: 1 request for an unchanged pointer; a full pass
       <= 64 MB RSS.

Usage: scripts/bench mirror [--photos 500] [--objects 100000] [--rounds 3] [--bin PATH] [--only pull|pass]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
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

from bench_upload import children_cpu_s, ensure_rclone, proc_cpu_s, release_binary, vm_hwm_kib  # noqa: E402
from support.app_catalog import publish_as_app  # noqa: E402
from support.daemon import connectable, raw_request  # noqa: E402
from support.fake_backend import FakeBackend, user_id_for  # noqa: E402
from support.fault_proxy import FaultProxy  # noqa: E402
from support.rgw import RadosGateway, unavailable  # noqa: E402
from support.stack import MotoServer  # noqa: E402
from support.tls import TestCA  # noqa: E402
from support.world import s3_operation  # noqa: E402


class Mirrored:
    """One photolalad with a mirror folder, in its own directory."""

    def __init__(self, binary: str, root: Path, backend: FakeBackend, sub: str, folder: Path, ca_file: str | None = None,
                 check: str = "15m", listing: str = "24h"):
        self.root, self.binary, self.backend, self.sub, self.folder = root, binary, backend, sub, folder
        root.mkdir(parents=True, exist_ok=True)
        (root / "watched").mkdir(exist_ok=True)
        self.socket = str(root / "d.sock")
        (root / "d.toml").write_text(f"""
[account]
api_url = "{backend.url}"
[watch]
folders = ["{root / 'watched'}"]
[catalog]
enabled = false
[mirror]
folder = "{folder}"
min_free = "0"
check_interval = "{check}"
list_interval = "{listing}"
[daemon]
state_dir = "{root / 'state'}"
socket = "{self.socket}"
socket_group = "users"
log_level = "warning"
""" + (f'[tls]\nca_file = "{ca_file}"\n' if ca_file else ""))
        self.proc = None

    def start(self):
        self.log = open(self.root / "d.log", "ab")
        self.proc = subprocess.Popen([self.binary, "--config", str(self.root / "d.toml")], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(400):
            if connectable(self.socket):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"photolalad did not start: see {self.root / 'd.log'}")

    def login(self):
        subprocess.run([self.binary, "ctl", "login", "--identity-token", "-", "--socket", self.socket], check=True,
                       input=self.backend.mint_identity_token(self.sub) + "\n", capture_output=True, text=True)

    def status(self) -> dict:
        raw = raw_request(self.socket, b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        return json.loads(raw.split(b"\r\n\r\n", 1)[1])

    def wait(self, predicate, timeout: float, what: str) -> dict:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            s = self.status()
            if predicate(s["mirror"]):
                return s
            time.sleep(0.05)
        raise TimeoutError(f"{what}: {json.dumps(self.status()['mirror'])}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)
        self.log.close()


def peer_env(credentials: dict, region: str) -> dict:
    env = dict(os.environ, AWS_ACCESS_KEY_ID=credentials["accessKeyId"], AWS_SECRET_ACCESS_KEY=credentials["secretAccessKey"],
               AWS_SESSION_TOKEN=credentials["sessionToken"], AWS_DEFAULT_REGION=region,
               # Pacific does not take the CRC32 checksums newer botocore adds by default.
               AWS_REQUEST_CHECKSUM_CALCULATION="when_required", AWS_RESPONSE_CHECKSUM_VALIDATION="when_required")
    return env


def timed(cmd, env) -> float:
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - t0


def bench_pull(args, binary: str, work: Path) -> None:
    if unavailable():
        print(f"pull: skipped: {unavailable()}")
        return
    ensure_rclone()
    ca = TestCA(work / "ca")
    cert = ca.issue("loopback")
    gw = RadosGateway(work / "rgw", tls=cert, memstore_bytes=6 << 30).start()
    backend = FakeBackend(gw, tls=cert).start()
    sub = "bench-mirror-subject"
    user = user_id_for(sub)
    try:
        rng = random.Random(2032)
        pool = os.urandom(8 << 20)
        admin = gw.s3_admin()
        keys = []

        def put(i: int) -> int:
            size = rng.randint(2 << 20, 8 << 20)
            body = os.urandom(4096) + pool[: size - 4096]
            key = f"photos/{user}/{hashlib.md5(body).hexdigest()}.dat"
            admin.put_object(Bucket=gw.bucket, Key=key, Body=body, ContentType="image/jpeg", Metadata={"original-format": "JPEG"})
            keys.append(key)
            return size
        with ThreadPoolExecutor(8) as ex:
            total = sum(ex.map(put, range(args.photos)))
        mb = total / 1e6
        print(f"pull: {args.photos} photos, {mb:.0f} MB, from RGW over HTTPS at {gw.endpoint}; {args.rounds} round(s)")

        def run_aws(r: int, out: Path) -> float:
            env = peer_env(backend._vend(user)["credentials"], gw.region)
            return timed(["aws", "--endpoint-url", gw.endpoint, "--ca-bundle", str(ca.path), "s3", "sync", "--only-show-errors",
                          f"s3://{gw.bucket}/photos/{user}/", str(out)], env)

        def run_rclone(r: int, out: Path) -> float:
            c = backend._vend(user)["credentials"]
            env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
            env.update(RCLONE_CONFIG_RGW_TYPE="s3", RCLONE_CONFIG_RGW_PROVIDER="Ceph", RCLONE_CONFIG_RGW_ACCESS_KEY_ID=c["accessKeyId"],
                       RCLONE_CONFIG_RGW_SECRET_ACCESS_KEY=c["secretAccessKey"], RCLONE_CONFIG_RGW_SESSION_TOKEN=c["sessionToken"],
                       RCLONE_CONFIG_RGW_ENDPOINT=gw.endpoint, RCLONE_CONFIG_RGW_REGION=gw.region)
            return timed(["rclone", "copy", "--s3-no-check-bucket", "--ca-cert", str(ca.path),
                          f"rgw:{gw.bucket}/photos/{user}/", str(out)], env)

        daemon_cpu: list[float] = []

        def run_daemon(r: int, out: Path) -> float:
            d = Mirrored(binary, work / f"daemon-{r}", backend, sub, out, str(ca.path)).start()
            cpu0 = proc_cpu_s(d.proc.pid)
            # --perf: a sampled profile of the daemon for the pull alone (perf report -i FILE).
            perf = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-o", f"{args.perf}.{r}", "-p", str(d.proc.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if args.perf else None
            t0 = time.monotonic()
            d.login()
            d.wait(lambda m: m["present"] == args.photos, timeout=3600, what="the first pull")
            elapsed = time.monotonic() - t0
            daemon_cpu.append(proc_cpu_s(d.proc.pid) - cpu0)
            if perf:
                perf.send_signal(2)
                perf.wait()
            d.stop()
            return elapsed

        tools = {"aws s3 sync": run_aws, "rclone copy": run_rclone, "photolalad mirror": run_daemon}
        names = list(tools)
        times = {n: [] for n in names}
        cpu = {n: [] for n in names}
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                out = work / f"out-{r}-{name.split()[0]}"
                subprocess.run(["sync"])
                c0 = children_cpu_s()
                t = tools[name](r, out)
                times[name].append(t)
                cpu[name].append(daemon_cpu[-1] if name.startswith("photolalad") else children_cpu_s() - c0)
                got = sum(1 for p in out.rglob("*") if p.is_file() and not p.name.startswith("."))
                print(f"  round {r + 1}  {name:<20} {t:7.2f} s  {mb / t:6.1f} MB/s  CPU {cpu[name][-1]:5.1f} s  ({got} files)", flush=True)
                shutil.rmtree(out, ignore_errors=True)
        med = {n: statistics.median(times[n]) for n in names}
        cpus = {n: statistics.median(cpu[n]) for n in names}
        print("medians:")
        for n in names:
            print(f"  {n:<20} {med[n]:7.2f} s  {mb / med[n]:6.1f} MB/s  CPU {cpus[n]:5.1f} s")
        peers = [n for n in names if not n.startswith("photolalad")]
        print(f"  ratio wall photolalad / faster peer = {med['photolalad mirror'] / min(med[n] for n in peers):.2f} (goal <= 0.9)")
        print(f"  ratio CPU  photolalad / leanest peer = {cpus['photolalad mirror'] / min(cpus[n] for n in peers):.2f} (goal <= 0.7)")
    finally:
        backend.stop()
        gw.stop()


def bench_pass(args, binary: str, work: Path) -> None:
    moto = MotoServer().start()
    backend = FakeBackend(moto).start()
    proxy = FaultProxy(moto.endpoint).start()
    backend.configure(sts_endpoint=proxy.url)
    sub = "bench-mirror-pass"
    user = user_id_for(sub)
    try:
        s3 = moto.s3_with(backend._vend(user)["credentials"])
        rows = []

        folder = work / "pass-mirror"
        # The folder already holds every photo (as after `restore --by-date`, under other
        # names): the first pass adopts them by MD5 instead of 100,000 GETs from moto,
        # which take hours and are not what this measures.
        adopted = folder / "adopted"
        adopted.mkdir(parents=True)

        def put(i: int) -> str:
            body = f"object {i} ".encode() + os.urandom(64)
            m = hashlib.md5(body).hexdigest()
            s3.put_object(Bucket=moto.bucket, Key=f"photos/{user}/{m}.dat", Body=body, ContentType="image/jpeg")
            (adopted / f"{i:06d}.jpg").write_bytes(body)
            return f"{hashlib.md5(body).hexdigest()},{len(body)},{m},{1_500_000_000 + i * 97},JPEG"
        t0 = time.monotonic()
        with ThreadPoolExecutor(16) as ex:
            rows = list(ex.map(put, range(args.objects)))
        publish_as_app(moto.s3_admin(), moto.bucket, user, rows)
        print(f"pass: {args.objects} objects and a catalog of as many rows in moto ({time.monotonic() - t0:.0f} s to put them)")
        d = Mirrored(binary, work / "pass-daemon", backend, sub, folder, check="10s", listing="24h").start()
        t0 = time.monotonic()
        d.login()
        d.wait(lambda m: m["present"] == args.objects and m["state"] == "idle", timeout=7200, what="the first pull")
        print(f"  first pass, adopting {args.objects} small files already in the folder: {time.monotonic() - t0:.0f} s")
        d.stop()

        # Nothing new: a restart's full pass, then checks of an unchanged pointer.
        proxy.reset_stats()
        d.start()
        t0 = time.monotonic()
        s = d.wait(lambda m: m["lastPassAt"] is not None and m["state"] == "idle", timeout=3600, what="the full pass")
        wall = time.monotonic() - t0
        hwm = vm_hwm_kib(d.proc.pid)
        ops = Counter(s3_operation(q["method"], q["path"]) for q in proxy.stats()["requests"] if "/metadata/" not in q["path"])
        print(f"  full pass with nothing new: {wall:.1f} s, {sum(ops.values())} requests ({dict(ops)}), peak RSS {hwm / 1024:.1f} MB "
              f"(goal <= 64 MB); present {s['mirror']['present']}, pending {s['mirror']['pending']}")
        proxy.reset_stats()
        time.sleep(31)
        ops = Counter(s3_operation(q["method"], q["path"]) for q in proxy.stats()["requests"] if "/metadata/" not in q["path"])
        checks = ops.get("GetObject", 0)
        print(f"  an unchanged pointer, 31 s at check_interval 10s: {sum(ops.values())} requests ({dict(ops)}): "
              f"{sum(ops.values()) / max(1, checks):.1f} per check (goal: 1)")
        d.stop()
    finally:
        proxy.stop()
        backend.stop()
        moto.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=500)
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", help="a photolalad binary (default: build the release one)")
    ap.add_argument("--only", choices=["pull", "pass"])
    ap.add_argument("--perf", metavar="FILE", help="pull: record a perf profile of the daemon's pull in FILE.ROUND")
    args = ap.parse_args()
    binary = args.bin or release_binary()
    work = Path(tempfile.mkdtemp(prefix="photolala-bench-mirror-", dir="/var/tmp"))
    try:
        if args.only in (None, "pull"):
            bench_pull(args, binary, work)
        if args.only in (None, "pass"):
            bench_pass(args, binary, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
