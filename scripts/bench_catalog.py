#!/usr/bin/env python3
"""Catalog benchmark: photolalad publishing a catalog of 1,000,000 rows into moto — half of
them another device's, already in the bucket (a 42 MB snapshot), half ours, ready in the
queue — against a plain `aws s3 cp` of the same 85 MB snapshot file to the same moto, in
the same run; and the daemon's peak RSS while it merges and publishes.

Usage: scripts/bench catalog [--theirs 500000] [--ours 500000] [--rounds 3] [--bin PATH]

The daemon's figure is its own: the time from its first read of the pointer to its
pointer written (the "seconds" of its "catalog published" log line), which is: the
pointer GET, the snapshot streamed to a file with its MD5 checked, the merge (our rows
from SQLite in date order, theirs from the file, dedup by photo_md5 in a scratch
database), the new snapshot written and uploaded in parts, the pointer PUT with If-Match.
The daemon starts with the catalog off; once it has settled, its peak is reset
(/proc/PID/clear_refs) and a reload turns the catalog on: the peak RSS reported (VmHWM)
is the publish's, idle baseline included. The start's own peak (the binary and its
libraries mapped, before `releaseStartupMemory`) is reported beside it. Each round
starts from the same state: the other device's catalog as the pointer, our rows not yet
published.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from support.app_catalog import HEADER, read_catalog, snapshot_key, pointer_key  # noqa: E402
from support.daemon import connectable, raw_request  # noqa: E402
from support.fake_backend import FakeBackend, user_id_for  # noqa: E402
from support.stack import MotoServer  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
from bench_upload import release_binary, proc_cpu_s, vm_hwm_kib  # noqa: E402


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def rows(kind: str, count: int, seed: int):
    """(head, size, md5, date, format) of `count` distinct photos over 20 years."""
    rng = random.Random(seed)
    fmts = ["JPEG", "HEIF", "PNG", "RAW-DNG"]
    for i in range(count):
        yield (md5(f"{kind} head {i}"), rng.randint(500_000, 12_000_000), md5(f"{kind} {i}"),
               1_100_000_000 + rng.randint(0, 630_000_000), fmts[i % 4])


class Daemon:
    def __init__(self, binary: str, root: Path, backend: FakeBackend, multipart: str):
        self.root, self.binary, self.backend, self.multipart = root, binary, backend, multipart
        self.socket = str(root / "d.sock")
        (root / "watched").mkdir(parents=True, exist_ok=True)
        self.configure(catalog=True)

    def configure(self, catalog: bool):
        root = self.root
        (root / "d.toml").write_text(f"""
[account]
api_url = "{self.backend.url}"
[watch]
folders = ["{root / 'watched'}"]
[upload]
multipart_threshold = "{self.multipart}"
part_size = "{self.multipart}"
[catalog]
enabled = {"true" if catalog else "false"}
publish_interval = "1s"
[daemon]
state_dir = "{root / 'state'}"
socket = "{self.socket}"
socket_group = "users"
log_level = "notice"
""")

    def start(self):
        self.log = open(self.root / "d.log", "ab")
        self.proc = subprocess.Popen([self.binary, "--config", str(self.root / "d.toml")], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(400):
            if connectable(self.socket):
                return
            time.sleep(0.05)
        raise RuntimeError("the daemon did not start")

    def ctl(self, *args):
        return subprocess.run([self.binary, "ctl", *args, "--socket", self.socket], capture_output=True, text=True, check=True)

    def status(self) -> dict:
        import json
        raw = raw_request(self.socket, b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        return json.loads(raw.split(b"\r\n\r\n", 1)[1])

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)
        self.log.close()

    def published_seconds(self) -> float:
        found = re.findall(r"catalog published.*?seconds=([0-9.]+)|seconds=([0-9.]+).*catalog published",
                           (self.root / "d.log").read_text())
        last = found[-1]
        return float(last[0] or last[1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--theirs", type=int, default=500_000, help="rows of another device already in the bucket")
    ap.add_argument("--ours", type=int, default=500_000, help="our photos ready in the queue")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--multipart", default="64MiB", help="upload.multipart_threshold and part_size (default 64MiB, as shipped)")
    ap.add_argument("--bin", help="a photolalad binary (default: build the release one)")
    args = ap.parse_args()

    binary = args.bin or release_binary()
    work = Path(tempfile.mkdtemp(prefix="photolala-bench-catalog-", dir="/var/tmp"))
    private = work / "photolalad"
    shutil.copy2(binary, private)
    moto = MotoServer().start()
    backend = FakeBackend(moto).start()
    sub = "bench-catalog-subject"
    uid = user_id_for(sub)
    s3, bucket = moto.s3_admin(), moto.bucket
    try:
        print(f"catalog: {args.theirs:,} rows of another device in the bucket + {args.ours:,} of ours in the queue; "
              f"{args.rounds} round(s); load average {os.getloadavg()[0]:.2f}", flush=True)
        theirs = sorted(rows("theirs", args.theirs, 1), key=lambda r: -r[3])
        body = ("\n".join([HEADER] + [f"{h},{s},{m},{d},{f}" for h, s, m, d, f in theirs]) + "\n").encode()
        existing_md5 = hashlib.md5(body).hexdigest()
        s3.put_object(Bucket=bucket, Key=snapshot_key(uid, existing_md5), Body=body, ContentType="text/csv")
        print(f"  their snapshot: {len(body) / 1e6:.1f} MB", flush=True)
        del body, theirs

        d = Daemon(str(private), work / "daemon", backend, args.multipart)
        d.start()
        d.ctl("login", "--identity-token", backend.mint_identity_token(sub))
        # The sign-in's listing of the bucket must end first: a listing cut short runs
        # again at the next start and would send our seeded rows' objects (not in the
        # bucket) again. Complete, the next is a day away.
        deadline = time.monotonic() + 60
        while d.status()["inventory"]["state"] != "ok":
            if time.monotonic() > deadline:
                raise RuntimeError(f"the first listing did not end: {d.status()['inventory']}")
            time.sleep(0.1)
        d.stop()
        con = sqlite3.connect(str(work / "daemon" / "state" / "queue.db"))
        with con:
            t0 = time.monotonic()
            ours = list(rows("ours", args.ours, 2))
            con.executemany("INSERT INTO object(md5, size, state, updatedAt) VALUES (?, ?, 'uploaded', 0)",
                            [(m, s) for _, s, m, _, _ in ours])
            con.executemany("INSERT INTO photo(md5, state, headMD5, size, format, takenAt, updatedAt) VALUES (?, 'ready', ?, ?, ?, ?, 0)",
                            [(m, h, s, f, dt) for h, s, m, dt, f in ours])
            del ours
        print(f"  our rows seeded in {time.monotonic() - t0:.1f} s", flush=True)

        def reset():
            # The other device's catalog as the pointer; nothing of ours published yet.
            s3.put_object(Bucket=bucket, Key=pointer_key(uid), Body=existing_md5.encode(), ContentType="text/plain")
            with con:
                con.execute("UPDATE photo SET catalog = NULL")
                con.execute("DELETE FROM setting WHERE key LIKE 'catalog.%'")

        published = work / "published.csv"
        daemon_times, walls, peaks, start_peaks, idles, cpus, aws_times = [], [], [], [], [], [], []
        for r in range(args.rounds):
            reset()
            # The daemon, started with the catalog off; settled, its peak reset; then on.
            d.configure(catalog=False)
            d.start()
            pid = d.proc.pid
            time.sleep(3)
            start_peaks.append(vm_hwm_kib(pid) / 1024)
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            idles.append(vm_hwm_kib(pid) / 1024)
            d.configure(catalog=True)
            t0 = time.monotonic()
            d.proc.send_signal(signal.SIGHUP)
            cpu0 = proc_cpu_s(pid)
            # Its log says when it published: a status would count every photo row (the
            # thumbnail stage's counts), CPU that is not the publish's.
            before = len(re.findall("catalog published", (d.root / "d.log").read_text()))
            while before == len(re.findall("catalog published", (d.root / "d.log").read_text())):
                if time.monotonic() - t0 > 1800 or d.proc.poll() is not None:
                    raise RuntimeError(f"the publish did not finish: {d.status()['catalog']}")
                time.sleep(0.05)
            walls.append(time.monotonic() - t0)
            cpus.append(proc_cpu_s(pid) - cpu0)
            peaks.append(vm_hwm_kib(pid) / 1024)
            c = d.status()["catalog"]
            assert c["state"] == "published" and c["rows"] == args.ours, c
            d.stop()
            daemon_times.append(d.published_seconds())
            line = [l for l in (d.root / "d.log").read_text().splitlines() if "catalog published" in l][-1]
            print(f"  the daemon's log: {line}", flush=True)
            cat = read_catalog(s3, bucket, uid)
            assert len(cat.lines) == args.theirs + args.ours
            if r == 0:
                s3.download_file(bucket, snapshot_key(uid, cat.md5), str(published))
                subprocess.run(["cat", str(published)], stdout=subprocess.DEVNULL)
            # The peer: the same file, with the same kind of credentials (STS, session token).
            c = backend._vend(uid)["credentials"]
            env = dict(os.environ, AWS_ACCESS_KEY_ID=c["accessKeyId"], AWS_SECRET_ACCESS_KEY=c["secretAccessKey"],
                       AWS_SESSION_TOKEN=c["sessionToken"], AWS_DEFAULT_REGION=moto.region)
            t1 = time.monotonic()
            subprocess.run(["aws", "--endpoint-url", moto.endpoint, "s3", "cp", "--only-show-errors", str(published),
                            f"s3://{bucket}/catalogs/{uid}/aws-copy-{r}.csv"], check=True, env=env)
            aws_times.append(time.monotonic() - t1)
            print(f"  round {r + 1}: photolalad publish {daemon_times[-1]:.2f} s (reload to published {walls[-1]:.2f} s, "
                  f"CPU {cpus[-1]:.1f} s, peak RSS {peaks[-1]:.1f} MB from idle {idles[-1]:.1f} MB; the start's own peak "
                  f"{start_peaks[-1]:.1f} MB); aws s3 cp {aws_times[-1]:.2f} s", flush=True)
        size = published.stat().st_size / 1e6
        med_d, med_a = statistics.median(daemon_times), statistics.median(aws_times)
        print(f"medians: the new snapshot {size:.1f} MB, {args.theirs + args.ours:,} rows")
        print(f"  photolalad publish (read, check, merge, upload, pointer)  {med_d:6.2f} s  (runs {', '.join(f'{t:.2f}' for t in daemon_times)})")
        print(f"  photolalad reload to published                            {statistics.median(walls):6.2f} s")
        print(f"  aws s3 cp of the same file                                {med_a:6.2f} s  (runs {', '.join(f'{t:.2f}' for t in aws_times)})")
        print(f"  ratio photolalad / aws s3 cp = {med_d / med_a:.2f}")
        print(f"  daemon CPU {statistics.median(cpus):.1f} s; peak RSS while publishing {max(peaks):.1f} MB (target <= 64 MB), "
              f"idle {statistics.median(idles):.1f} MB; the start's own peak {max(start_peaks):.1f} MB")
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
        return 0 if max(peaks) <= 64 else 1
    finally:
        backend.stop()
        moto.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
