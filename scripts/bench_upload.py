#!/usr/bin/env python3
"""Upload benchmark: N photos of 2–8 MB into moto through photolalad, against
`aws s3 cp --recursive` and Debian's `rclone copy` to the same moto in the same run;
then the daemon's peak RSS while uploading one 2 GiB file.

With --https everything goes over TLS with a test CA made for the run: moto serves HTTPS,
the daemon gets the CA as tls.ca_file, `aws` as --ca-bundle and rclone as --ca-cert.
With --target rgw the server is Ceph's RADOS Gateway on a throw-away one-node cluster
(Tests/e2e/support/rgw.py; memstore, so the photos live in RAM), with the same two peers
(the bucket emptied before each tool). Every run also counts the TCP connections each tool opened to the server (from
`ss`: every socket to or from the server's port seen during the run and in TIME_WAIT
after it), printed per photo.

With --shape RTT_MS:MBIT[:JITTER_MS] every tool reaches the server through a shaping
proxy on the loopback (Tests/e2e/support/shaper.py): a home uplink of that rate shared by
the tool's connections, that round trip added to every byte. With --bandwidth-limit RATE
the daemon runs with that `upload.bandwidth_limit` and the rate it held on the wire in the
middle 80 % of its bytes is printed beside the limit.

Usage: scripts/bench upload [--photos 500] [--big-gib 2] [--concurrency 4] [--rounds 3] [--bin PATH]
                            [--https] [--target moto|rgw] [--shape 40:20] [--bandwidth-limit 1MiB/s]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from support.daemon import connectable, raw_request  # noqa: E402
from support.fake_backend import FakeBackend, user_id_for  # noqa: E402
from support.rgw import RadosGateway, unavailable  # noqa: E402
from support.shaper import Shaper  # noqa: E402
from support.stack import MotoServer  # noqa: E402
from support.tls import TestCA  # noqa: E402


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


class ConnectionCounter:
    """The TCP connections opened to `port` on loopback while it runs: `ss` every 100 ms,
    every socket with the port on either end (a client's socket, or the server's side
    of one that the server closed first and holds in TIME_WAIT), told apart by the
    client's ephemeral port. A run lasts less than TIME_WAIT's 60 s, so none is missed."""

    def __init__(self, port: int):
        self.port = port
        self.peers: set[int] = set()
        self._stop = False
        import threading
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        out = subprocess.run(["ss", "-Htan", f"( dport = :{self.port} or sport = :{self.port} )"],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            cols = line.split()
            if len(cols) < 5 or cols[0] == "LISTEN":
                continue
            local, peer = cols[3].rsplit(":", 1)[1], cols[4].rsplit(":", 1)[1]
            self.peers.add(int(peer) if int(local) == self.port else int(local))

    def _run(self):
        while not self._stop:
            self._sample()
            time.sleep(0.1)

    def __enter__(self):
        self._sample()
        self._before = set(self.peers)   # what was already there is not this run's
        self.peers.clear()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()
        self._sample()

    @property
    def opened(self) -> int:
        return len(self.peers - self._before)


def vm_hwm_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a running process, in seconds."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_faults_switches(pid: int) -> tuple[int, int]:
    """Minor page faults of a running process, and its threads' context switches."""
    faults = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[7])
    switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if "ctxt_switches:" in line:
                    switches += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return faults, switches


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class DaemonRun:
    def __init__(self, binary: str, root: Path, backend: FakeBackend, concurrency: int, sub: str,
                 ca_file: str | None = None, sign_in: bool = True, bandwidth_limit: str = "off"):
        self.root = root
        self.backend, self.sub = backend, sub
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
bandwidth_limit = "{bandwidth_limit}"
[daemon]
state_dir = "{root / 'state'}"
socket = "{self.socket}"
socket_group = "users"
log_level = "warning"
""" + (f'[tls]\nca_file = "{ca_file}"\n' if ca_file else ""))
        self.log = open(root / "d.log", "wb")
        self.proc = subprocess.Popen([binary, "--config", str(root / "d.toml")], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if connectable(self.socket):
                break
            time.sleep(0.05)
        if sign_in:
            self.sign_in()
            # Signed in means credentials fetched and the bucket listed (a build that
            # lists): wait for both so no run pays for them, as a NAS signed in long ago.
            for _ in range(200):
                s = self.status()
                if s.get("credentials", {}).get("state") == "valid" and \
                        s.get("inventory", {}).get("state", "ok") in ("ok", "refused", "failed"):
                    break
                time.sleep(0.05)

    def sign_in(self):
        self.ctl("login", "--identity-token", self.backend.mint_identity_token(self.sub))

    def ctl(self, *args, check=True):
        return subprocess.run([self.binary, "ctl", *args, "--socket", self.socket], capture_output=True, text=True, check=check)

    def status(self) -> dict:
        # Straight to the socket: a CLI process every 100 ms would cost the daemon's CPU.
        raw = raw_request(self.socket, b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        return json.loads(raw.split(b"\r\n\r\n", 1)[1])

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
    ap.add_argument("--big-gib", type=float, default=2.0, help="0 skips the 2 GiB RSS run")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="each tool runs once per round, in a rotated order")
    ap.add_argument("--bin", help="a photolalad binary (default: build the release one)")
    ap.add_argument("--peer-credentials", choices=["sts", "iam"], default="sts",
                    help="sts: the peers use STS keys with a session token, as the daemon must (default); "
                         "iam: the backend's long-term IAM keys, which moto authenticates with less work")
    ap.add_argument("--perf", metavar="FILE", help="record a perf profile of the daemon's upload in FILE.ROUND")
    ap.add_argument("--https", action="store_true", help="everything over TLS, trusting a test CA made for the run")
    ap.add_argument("--target", choices=["moto", "rgw"], default="moto",
                    help="rgw: Ceph's RADOS Gateway on a one-node cluster (memstore)")
    ap.add_argument("--shape", metavar="RTT_MS:MBIT[:JITTER_MS]",
                    help="every tool through a shaping proxy: that round trip, that shared uplink rate")
    ap.add_argument("--bandwidth-limit", default="off", metavar="RATE",
                    help="the daemon's upload.bandwidth_limit; the rate it held is printed")
    args = ap.parse_args()
    shape = None
    if args.shape:
        parts = [float(x) for x in args.shape.split(":")]
        if len(parts) not in (2, 3):
            ap.error("--shape is RTT_MS:MBIT or RTT_MS:MBIT:JITTER_MS, e.g. 40:20")
        shape = {"rtt_ms": parts[0], "up_mbit": parts[1], "jitter_ms": parts[2] if len(parts) == 3 else 0.0}
    elif args.bandwidth_limit != "off":
        shape = {"rtt_ms": 0.0, "up_mbit": 0.0}   # a meter only

    binary = args.bin or release_binary()
    ensure_rclone()
    if args.target == "rgw" and unavailable():
        sys.exit(unavailable())
    work = Path(tempfile.mkdtemp(prefix="photolala-bench-", dir="/var/tmp"))
    ca = TestCA(work / "ca") if args.https else None
    cert = ca.issue("loopback") if ca else None
    ca_file = str(ca.path) if ca else None
    if args.target == "rgw":
        # memstore keeps every object in RAM: room for one tool's photos at a time.
        server = RadosGateway(work / "rgw", tls=cert, memstore_bytes=6 << 30).start()
        server_pids = lambda: [server.procs["rgw"].pid, server.procs["osd"].pid]
        port = server.tls_port if cert else server.port
    else:
        server = MotoServer(tls=cert).start()
        server_pids = lambda: [server.proc.pid]
        port = server.port
    backend = FakeBackend(server, tls=cert).start()
    endpoint = server.endpoint
    shaper = None
    if shape:
        shaper = Shaper(port, **shape).start()
        endpoint = shaper.url("https" if cert else "http")
        backend.configure(sts_endpoint=endpoint)
    sub = "bench-apple-subject"
    user = user_id_for(sub)
    server_cpu_s = lambda: sum(proc_cpu_s(pid) for pid in server_pids())
    try:
        staging = work / "photos"
        total = make_photos(staging, args.photos)
        mb = total / 1e6
        print(f"upload: {args.photos} photos, {mb:.0f} MB, into {args.target} at {server.endpoint}; "
              f"{args.rounds} round(s); peers with {args.peer_credentials.upper()} credentials"
              + (f"; through a shaping proxy: {shape['rtt_ms']:g} ms round trip, "
                 f"{shape['up_mbit']:g} Mbit/s up" + (f", {shape['jitter_ms']:g} ms jitter" if shape.get("jitter_ms") else "")
                 if args.shape else ""))
        subprocess.run(["cat", *map(str, staging.iterdir())], stdout=subprocess.DEVNULL)  # warm the page cache for everyone

        # The peers use the same kind of credentials as the daemon: STS keys with a session
        # token for the same user, vended by the backend, into the user's own prefix, so
        # the server does the same authentication work for every tool.
        def peer_credentials() -> dict:
            if args.peer_credentials == "iam":
                return {"accessKeyId": server.backend_access_key, "secretAccessKey": server.backend_secret_key,
                        "sessionToken": ""}
            return backend._vend(user)["credentials"]

        def run_aws(r: int) -> float:
            c = peer_credentials()
            env = dict(os.environ, AWS_ACCESS_KEY_ID=c["accessKeyId"], AWS_SECRET_ACCESS_KEY=c["secretAccessKey"],
                       AWS_DEFAULT_REGION=server.region)
            if c["sessionToken"]:
                env["AWS_SESSION_TOKEN"] = c["sessionToken"]
            if args.target == "rgw":
                # Pacific does not take the CRC32 checksums newer botocore adds by default.
                env.update(AWS_REQUEST_CHECKSUM_CALCULATION="when_required",
                           AWS_RESPONSE_CHECKSUM_VALIDATION="when_required")
            tls = ["--ca-bundle", ca_file] if ca_file else []
            return timed(["aws", "--endpoint-url", endpoint, *tls, "s3", "cp", "--recursive",
                          "--only-show-errors", str(staging), f"s3://{server.bucket}/photos/{user}/aws-{r}/"], env=env)

        def run_rclone(r: int) -> float:
            c = peer_credentials()
            renv = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
            renv.update(RCLONE_CONFIG_MOTO_TYPE="s3", RCLONE_CONFIG_MOTO_PROVIDER="Other",
                        RCLONE_CONFIG_MOTO_ACCESS_KEY_ID=c["accessKeyId"],
                        RCLONE_CONFIG_MOTO_SECRET_ACCESS_KEY=c["secretAccessKey"],
                        RCLONE_CONFIG_MOTO_ENDPOINT=endpoint, RCLONE_CONFIG_MOTO_REGION=server.region)
            if c["sessionToken"]:
                renv["RCLONE_CONFIG_MOTO_SESSION_TOKEN"] = c["sessionToken"]
            tls = ["--ca-cert", ca_file] if ca_file else []
            return timed(["rclone", "copy", "--no-traverse", "--s3-no-check-bucket", *tls, str(staging),
                          f"moto:{server.bucket}/photos/{user}/rclone-{r}/"], env=renv)

        daemon_cpu: list[float] = []
        daemon_costs: list[str] = []

        held: list[float] = []

        def run_daemon(r: int) -> float:
            run = DaemonRun(binary, work / f"daemon-{r}", backend, args.concurrency, sub, ca_file,
                            bandwidth_limit=args.bandwidth_limit)
            cpu0 = proc_cpu_s(run.proc.pid)
            faults0, switches0 = proc_faults_switches(run.proc.pid)
            # --perf: a sampled profile of the daemon for this round alone (perf report -i FILE.ROUND).
            perf = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-o", f"{args.perf}.{r}", "-p", str(run.proc.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if args.perf else None
            if shaper:
                shaper.reset_stats()
            t0 = time.monotonic()
            os.rename(staging, run.watched / "photos")  # the drop: every file appears at once
            run.wait_uploaded(args.photos)
            elapsed = time.monotonic() - t0
            daemon_cpu.append(proc_cpu_s(run.proc.pid) - cpu0)
            faults1, switches1 = proc_faults_switches(run.proc.pid)
            daemon_costs.append(f"{faults1 - faults0} minor page faults, {switches1 - switches0} context switches")
            if perf:
                perf.send_signal(2)
                perf.wait()
            if shaper and args.bandwidth_limit != "off":
                held.append(shaper.up.rate_between(0.1, 0.9))
            run.stop()
            os.rename(run.watched / "photos", staging)
            return elapsed

        tools = {"aws s3 cp --recursive": run_aws, "rclone copy": run_rclone, "photolalad": run_daemon}
        names = list(tools)
        times: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        server_cpu: dict[str, list[float]] = {n: [] for n in names}
        conns: dict[str, list[int]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                c0, m0 = children_cpu_s(), server_cpu_s()
                if shaper:
                    shaper.reset_stats()
                with ConnectionCounter(port) as counter:
                    t = tools[name](r)
                m1 = server_cpu_s()
                wire = ""
                if shaper:
                    up = shaper.stats()["up"]
                    wire = f", {up['bytes'] / 1e6:.1f} MB up in {(up['last'] or 0) - (up['first'] or 0):.2f} s on the wire"
                times[name].append(t)
                cpu[name].append(daemon_cpu[-1] if name == "photolalad" else children_cpu_s() - c0)
                server_cpu[name].append(m1 - m0)
                conns[name].append(counter.opened)
                print(f"  round {r + 1}  {name:<24} {t:7.2f} s  {mb / t:6.1f} MB/s  "
                      f"CPU {cpu[name][-1]:5.1f} s, {args.target}'s {server_cpu[name][-1]:5.1f} s, "
                      f"{counter.opened} connections ({counter.opened / args.photos:.2f} per photo){wire}"
                      + (f"; {daemon_costs[-1]}" if name == "photolalad" else ""), flush=True)
                server.empty_bucket()  # every tool starts on an empty bucket (and moto/memstore keep it in RAM)
        med = {n: statistics.median(times[n]) for n in names}
        print("medians:")
        for n in names:
            print(f"  {n:<24} {med[n]:7.2f} s  {mb / med[n]:6.1f} MB/s  CPU {statistics.median(cpu[n]):5.1f} s, "
                  f"{args.target}'s {statistics.median(server_cpu[n]):5.1f} s, "
                  f"{statistics.median(conns[n]) / args.photos:.2f} connections per photo  "
                  f"(runs: {', '.join(f'{t:.2f}' for t in times[n])})")
        peers = [n for n in names if n != "photolalad"]
        faster = min(med[n] for n in peers)
        target = "target <= 1.0 through the shaping proxy, issue 33" if args.shape else "target <= 0.95, issue 14"
        print(f"  ratio photolalad / faster peer = {med['photolalad'] / faster:.2f} ({target}; settle 1s included)")
        if held:
            limit = parse_rate(args.bandwidth_limit)
            rates = ", ".join(f"{h / 2**20:.3f}" for h in held)
            worst = max(abs(h - limit) / limit for h in held)
            print(f"  bandwidth_limit {args.bandwidth_limit}: the daemon's uplink carried {rates} MiB/s in the middle 80 % "
                  f"of its bytes (TLS records and HTTP heads included); furthest from the limit {worst * 100:.1f} % (goal <= 2 %)")

        if args.big_gib > 0:
            big = work / "big"
            big.mkdir()
            size = int(args.big_gib * (1 << 30))
            with open(big / "VID_big.mov", "wb") as f:
                block = os.urandom(16 << 20)
                for _ in range(size // len(block)):
                    f.write(os.urandom(4096) + block[4096:])
            run = DaemonRun(binary, work / "daemon-big", backend, args.concurrency, sub, ca_file)
            base = vm_hwm_kib(run.proc.pid)
            os.rename(big, run.watched / "big")
            run.wait_uploaded(1, timeout=3600)
            peak = vm_hwm_kib(run.proc.pid)
            print(f"upload: one {args.big_gib:g} GiB file: peak RSS {peak / 1024:.1f} MB (before the drop {base / 1024:.1f} MB; target <= 64 MB)")
            run.stop()
    finally:
        if shaper:
            shaper.stop()
        backend.stop()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def parse_rate(text: str) -> float:
    """Bytes per second of a rate as config.md writes one ("10MiB/s", "500KiB/s", "2MB/s")."""
    units = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    number = text.upper().removesuffix("/S")
    for unit in sorted(units, key=len, reverse=True):
        if number.endswith(unit):
            return float(number[: -len(unit)]) * units[unit]
    raise ValueError(f"not a rate: {text!r} (for example 10MiB/s)")


if __name__ == "__main__":
    sys.exit(main())
