#!/usr/bin/env python3
"""Upload benchmark: N photos of 2–8 MB into moto through photolalad, against
`aws s3 cp --recursive` and Debian's `rclone copy` to the same moto in the same run;
then the daemon's peak RSS while uploading one 2 GiB file.

Usage: scripts/bench upload [--photos 500] [--big-gib 2] [--concurrency 4]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from support.fake_backend import FakeBackend  # noqa: E402
from support.stack import MotoServer  # noqa: E402


def release_binary() -> str:
    subprocess.run(["swift", "build", "-c", "release", "--product", "photolalad"], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL)
    out = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.strip()
    return os.path.join(out, "photolalad")


def ensure_rclone():
    if shutil.which("rclone"):
        return
    subprocess.run(["apt-get", "install", "-y", "-qq", "rclone"], check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def make_photos(folder: Path, count: int, seed: int = 2026) -> int:
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    total = 0
    chunk = os.urandom(8 << 20)
    for i in range(count):
        size = rng.randint(2 << 20, 8 << 20)
        # A unique head makes every file a distinct object; the rest comes from a random pool.
        head = os.urandom(4096)
        off = rng.randint(0, (8 << 20) - size) if size < (8 << 20) else 0
        with open(folder / f"IMG_{i:05d}.jpg", "wb") as f:
            f.write(head)
            f.write(chunk[off:off + size - 4096])
        total += size
    return total


def timed(cmd, env=None) -> float:
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - t0


def vm_hwm_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


class DaemonRun:
    def __init__(self, binary: str, root: Path, backend: FakeBackend, concurrency: int):
        self.root = root
        self.binary = binary
        self.watched = root / "watched"
        self.watched.mkdir(parents=True)
        self.socket = str(root / "d.sock")
        (root / "d.toml").write_text(f"""
[account]
api_url = "{backend.url}"
[watch]
folders = ["{self.watched}"]
settle = "1s"
[upload]
concurrency = {concurrency}
[daemon]
state_dir = "{root / 'state'}"
socket = "{self.socket}"
socket_group = "users"
log_level = "warning"
""")
        self.log = open(root / "d.log", "wb")
        self.proc = subprocess.Popen([binary, "--config", str(root / "d.toml")], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if self.ctl("status", check=False).returncode == 0:
                break
            time.sleep(0.05)
        token = backend.mint_identity_token("bench-apple-subject")
        self.ctl("login", "--identity-token", token)

    def ctl(self, *args, check=True):
        return subprocess.run([self.binary, "ctl", *args, "--socket", self.socket], capture_output=True, text=True, check=check)

    def status(self) -> dict:
        return json.loads(self.ctl("status", "--json").stdout)

    def wait_uploaded(self, count: int, timeout: float = 1800) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            q = self.status()["queue"]
            if q["uploaded"] >= count and q["pending"] + q["hashing"] + q["uploading"] == 0:
                return time.monotonic() - t0
            if q["failed"]:
                raise RuntimeError(f"{q['failed']} files failed: see {self.root / 'd.log'}")
            time.sleep(0.1)
        raise TimeoutError("upload did not finish")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=500)
    ap.add_argument("--big-gib", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()

    binary = release_binary()
    ensure_rclone()
    work = Path(tempfile.mkdtemp(prefix="photolala-bench-", dir="/var/tmp"))
    moto = MotoServer().start()
    backend = FakeBackend(moto).start()
    try:
        staging = work / "photos"
        total = make_photos(staging, args.photos)
        mb = total / 1e6
        print(f"upload: {args.photos} photos, {mb:.0f} MB, into moto at {moto.endpoint}")
        subprocess.run(["cat", *map(str, staging.iterdir())], stdout=subprocess.DEVNULL)  # warm the page cache for everyone

        env = dict(os.environ, AWS_ACCESS_KEY_ID=moto.backend_access_key, AWS_SECRET_ACCESS_KEY=moto.backend_secret_key,
                   AWS_DEFAULT_REGION=moto.region)
        t_aws = timed(["aws", "--endpoint-url", moto.endpoint, "s3", "cp", "--recursive", "--only-show-errors",
                       str(staging), f"s3://{moto.bucket}/bench-aws/"], env=env)
        print(f"  aws s3 cp --recursive   {t_aws:7.2f} s  {mb / t_aws:7.1f} MB/s")

        renv = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
        renv.update(RCLONE_CONFIG_MOTO_TYPE="s3", RCLONE_CONFIG_MOTO_PROVIDER="Other",
                    RCLONE_CONFIG_MOTO_ACCESS_KEY_ID=moto.backend_access_key,
                    RCLONE_CONFIG_MOTO_SECRET_ACCESS_KEY=moto.backend_secret_key,
                    RCLONE_CONFIG_MOTO_ENDPOINT=moto.endpoint, RCLONE_CONFIG_MOTO_REGION=moto.region)
        t_rclone = timed(["rclone", "copy", "--no-traverse", "--s3-no-check-bucket", str(staging),
                          f"moto:{moto.bucket}/bench-rclone/"], env=renv)
        print(f"  rclone copy             {t_rclone:7.2f} s  {mb / t_rclone:7.1f} MB/s")

        run = DaemonRun(binary, work / "daemon", backend, args.concurrency)
        t0 = time.monotonic()
        os.rename(staging, run.watched / "photos")  # the drop: every file appears at once
        run.wait_uploaded(args.photos)
        t_daemon = time.monotonic() - t0
        print(f"  photolalad              {t_daemon:7.2f} s  {mb / t_daemon:7.1f} MB/s  (settle 1s included; concurrency {args.concurrency})")
        faster = min(t_aws, t_rclone)
        print(f"  ratio photolalad / faster peer = {t_daemon / faster:.2f} (target <= 1.0)")
        run.stop()
        moto.empty_bucket()  # moto keeps objects in memory

        big = work / "big"
        big.mkdir()
        size = int(args.big_gib * (1 << 30))
        with open(big / "VID_big.mov", "wb") as f:
            block = os.urandom(16 << 20)
            for _ in range(size // len(block)):
                f.write(os.urandom(4096) + block[4096:])
        run = DaemonRun(binary, work / "daemon-big", backend, args.concurrency)
        base = vm_hwm_kib(run.proc.pid)
        os.rename(big, run.watched / "big")
        run.wait_uploaded(1, timeout=3600)
        peak = vm_hwm_kib(run.proc.pid)
        print(f"upload: one {args.big_gib:g} GiB file: peak RSS {peak / 1024:.1f} MB (before the drop {base / 1024:.1f} MB; target <= 64 MB)")
        run.stop()
    finally:
        backend.stop()
        moto.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
