"""A throw-away Ceph cluster on loopback with a RADOS Gateway in front: the second real
S3 of the tests (Debian 12's `radosgw`, Ceph 16.2 "Pacific").

One monitor, one OSD on memstore (RAM, 1 GiB at most unless told otherwise), pools of one replica, no manager,
no authentication between the daemons, every file (config, keyring, logs, sockets, the
monitor's store) in the temporary folder given. The gateway serves S3 and STS over plain
HTTP and, with `tls=`, over HTTPS on its beast frontend; `dns_name=` sets `rgw dns name`
(virtual-hosted buckets as `bucket.<dns_name>`). After `start()` it looks like moto's
small AWS account (support/stack.py), so `FakeBackend(gateway)` vends real STS session
credentials from it:

- user `photolala-backend` with an access key (what the backend runs as; also the tests'
  admin for reading objects back), owner of bucket `photolala`;
- role `photolala-uploader`, trusted by that user, allowed `s3:*` on the bucket; the
  backend assumes it with the per-user session policy of backend-api.md, which the
  gateway enforces.

Settings the measurements of issue 17 found necessary: `ms mon client mode = crc secure`
(with auth none, radosgw never connects to the monitor otherwise) and `paxos propose
interval = 0.01` (creating the gateway's pools takes 12 s otherwise). No path in the
config may be /dev/null: `--mkfs` replaces such a keyring with a regular file, which
breaks the machine.

    gw = RadosGateway(tmp_dir, tls=ca.issue("rgw")).start()
    gw.endpoint, gw.https_endpoint, gw.s3_admin()
    gw.stop()

`unavailable()` says why the suite cannot run here (packages missing), or None.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import requests
from botocore.config import Config

from .stack import boto_client, free_port

REGION = "us-east-1"
BUCKET = "photolala"
ROLE_NAME = "photolala-uploader"
BACKEND_USER = "photolala-backend"
BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")
PACKAGES = "radosgw ceph-mon ceph-osd ceph-common"


def unavailable() -> str | None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return (f"Ceph is not installed ({', '.join(missing)} missing): "
                f"apt-get install {PACKAGES} (scripts/setup does)")
    return None


def compact(document: dict) -> str:
    """JSON without spaces: Pacific refuses role and session policies with spaces in them."""
    return json.dumps(document, separators=(",", ":"))


def boto_config(**extra) -> Config:
    # Pacific does not understand the CRC32 checksums newer botocore adds by default
    # (over HTTPS it answers them with an error): only when an operation requires one.
    return Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1, "mode": "standard"},
                  request_checksum_calculation="when_required", response_checksum_validation="when_required",
                  **extra)


_LIBC = ctypes.CDLL(None, use_errno=True)   # loaded here: nothing may be dlopen()ed between fork and exec
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies, however it dies, so
    a killed test run leaves no cluster behind."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class RadosGateway:
    def __init__(self, root: str | Path, *, tls=None, dns_name: str | None = None,
                 bucket: str = BUCKET, region: str = REGION, memstore_bytes: int = 1 << 30):
        self.root = Path(root)
        self.memstore_bytes = memstore_bytes   # RAM the OSD may fill (objects live there)
        self.tls = tls                     # a support.tls.ServerCert, or None
        self.ca_file: str | None = str(tls.ca_path) if tls else None
        self.dns_name = dns_name
        self.bucket, self.region = bucket, region
        self.host = "127.0.0.1"
        self.mon_port = free_port()
        self.port = free_port()
        self.tls_port = free_port() if tls else None
        self.fsid = str(uuid.uuid4())
        self.procs: dict[str, subprocess.Popen] = {}
        self.backend_access_key = "PLBACKEND" + uuid.uuid4().hex[:11].upper()
        self.backend_secret_key = uuid.uuid4().hex + uuid.uuid4().hex[:8]
        self.role_arn = f"arn:aws:iam:::role/{ROLE_NAME}"
        self.backend_user_arn = f"arn:aws:iam:::user/{BACKEND_USER}"
        self.started_in: float | None = None
        self._admin = None

    # ---- addresses ---------------------------------------------------------------------

    @property
    def http_endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def https_endpoint(self) -> str | None:
        return f"https://{self.host}:{self.tls_port}" if self.tls_port else None

    @property
    def endpoint(self) -> str:
        """What the backend vends and the tests' clients use: HTTPS when the gateway has
        a certificate, else plain HTTP."""
        return self.https_endpoint or self.http_endpoint

    # ---- lifecycle ---------------------------------------------------------------------

    def _path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def _config(self) -> str:
        frontend = f"beast endpoint={self.host}:{self.port}"
        if self.tls:
            frontend += (f" ssl_endpoint={self.host}:{self.tls_port}"
                         f" ssl_certificate={self.tls.cert_path} ssl_private_key={self.tls.key_path}")
        r = self.root
        lines = [
            "[global]",
            f"fsid = {self.fsid}",
            f"mon host = v2:{self.host}:{self.mon_port}",
            "mon initial members = a",
            "public network = 127.0.0.0/8",
            "auth cluster required = none",
            "auth service required = none",
            "auth client required = none",
            "ms mon client mode = crc secure",
            "paxos propose interval = 0.01",
            "osd pool default size = 1",
            "osd pool default min size = 1",
            "osd pool default pg num = 8",
            "osd pool default pgp num = 8",
            "mon allow pool size one = true",
            # The monitor refuses to start when the host's disk has less than 5 % free;
            # this cluster keeps its data in memory (memstore), so the host's disk is not
            # its concern (a build machine's big disk is often that full).
            "mon data avail crit = 0",
            "mon warn on pool no redundancy = false",
            "mon max pg per osd = 1000",
            "osd objectstore = memstore",
            f"memstore device bytes = {self.memstore_bytes}",
            # Every path in the test's own folder: never /dev/null (see the module notes).
            f"run dir = {r / 'run'}",
            f"admin socket = {r / 'run'}/$name.$pid.asok",
            f"log file = {r / 'log'}/$name.log",
            f"pid file = {r / 'run'}/$name.pid",
            f"keyring = {r / 'keyring'}",
            f"mon data = {r / 'mon'}",
            f"osd data = {r / 'osd'}",
            "",
            "[client.rgw]",
            f"rgw frontends = {frontend}",
            "rgw s3 auth use sts = true",
            "rgw sts key = " + uuid.uuid4().hex[:16],
            "rgw thread pool size = 64",
        ]
        if self.dns_name:
            lines.append(f"rgw dns name = {self.dns_name}")
        return "\n".join(lines) + "\n"

    def _run(self, *args: str, timeout: float = 30) -> str:
        r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, cwd=self.root)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:3])} … exited {r.returncode}: {r.stderr[-2000:]}{r.stdout[-500:]}")
        return r.stdout

    def _spawn(self, name: str, *args: str) -> None:
        out = open(self._path("log", f"{name}.out"), "ab")
        self.procs[name] = subprocess.Popen(list(args), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            cwd=self.root, start_new_session=True, preexec_fn=_die_with_parent)
        out.close()

    def start(self, timeout: float = 60.0) -> "RadosGateway":
        why = unavailable()
        if why:
            raise RuntimeError(why)
        t0 = time.monotonic()
        for d in ("mon", "osd", "run", "log"):
            self._path(d).mkdir(parents=True, exist_ok=True)
        conf = self._path("ceph.conf")
        conf.write_text(self._config())
        self._path("keyring").touch()
        c = ["-c", str(conf)]
        try:
            self._run("monmaptool", "--create", "--addv", "a", f"[v2:{self.host}:{self.mon_port}]",
                      "--fsid", self.fsid, str(self._path("monmap")))
            self._run("ceph-mon", *c, "--mkfs", "-i", "a", "--monmap", str(self._path("monmap")))
            self._spawn("mon", "ceph-mon", *c, "-i", "a", "-f")
            osd_uuid = str(uuid.uuid4())
            try:
                osd_id = self._run("ceph", *c, "--connect-timeout", "20", "osd", "new", osd_uuid).strip()
            except RuntimeError as e:
                # "timed out" alone hides why: the monitor says it in its log.
                raise RuntimeError(f"{e}; the monitor's last words: {self._log_tail('mon.a.log')}") from None
            self._run("ceph-osd", *c, "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid)
            self._spawn("osd", "ceph-osd", *c, "-i", osd_id, "-f")
            self._spawn("rgw", "radosgw", *c, "-n", "client.rgw", "-f")
            self._wait_gateway(t0 + timeout)
            self.started_in = time.monotonic() - t0
            self._setup()
        except BaseException:
            self.stop()
            raise
        return self

    def _log_tail(self, name: str, lines: int = 5) -> str:
        try:
            text = self._path("log", name).read_text(errors="replace").splitlines()
        except OSError as e:
            return f"(no log: {e})"
        return " | ".join(line for line in text[-lines:] if line.strip())

    def _wait_gateway(self, deadline: float) -> None:
        last = None
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited with {p.returncode}; see {self._path('log')}")
            try:
                if requests.get(self.http_endpoint, timeout=1).status_code == 200:
                    return
            except requests.RequestException as e:
                last = e
            time.sleep(0.05)
        raise RuntimeError(f"radosgw did not answer on {self.http_endpoint}: {last}; see {self._path('log')}")

    def _admin_cmd(self, *args: str) -> str:
        return self._run("radosgw-admin", "-c", str(self._path("ceph.conf")), *args)

    def _setup(self) -> None:
        self._admin_cmd("user", "create", f"--uid={BACKEND_USER}", "--display-name=Photolala backend",
                        f"--access-key={self.backend_access_key}", f"--secret={self.backend_secret_key}")
        self._admin_cmd("role", "create", f"--role-name={ROLE_NAME}", "--assume-role-policy-doc=" + compact({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": [self.backend_user_arn]},
                                                   "Action": ["sts:AssumeRole"]}]}))
        bucket_arn = f"arn:aws:s3:::{self.bucket}"
        self._admin_cmd("role-policy", "put", f"--role-name={ROLE_NAME}", "--policy-name=photolala-uploader",
                        "--policy-doc=" + compact({"Version": "2012-10-17", "Statement": [
                            {"Effect": "Allow", "Action": ["s3:*"], "Resource": [bucket_arn, f"{bucket_arn}/*"]}]}))
        self.s3_admin().create_bucket(Bucket=self.bucket)

    def stop(self) -> None:
        # The gateway first (it holds the cluster's clients), the monitor last.
        for name in ("rgw", "osd", "mon"):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        self.procs.clear()

    def __enter__(self) -> "RadosGateway":
        return self.start() if not self.procs else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- what tests look at ------------------------------------------------------------

    def rss_kib(self) -> dict[str, int]:
        """Resident memory of each daemon (VmRSS, KiB)."""
        out = {}
        for name, p in self.procs.items():
            try:
                for line in open(f"/proc/{p.pid}/status"):
                    if line.startswith("VmRSS:"):
                        out[name] = int(line.split()[1])
            except FileNotFoundError:
                pass
        return out

    def log(self, name: str = "client.rgw") -> str:
        try:
            return self._path("log", f"{name}.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def client(self, service: str, key: str, secret: str, token: str | None = None, *,
               endpoint: str | None = None, **config):
        return boto_client(service, endpoint_url=endpoint or self.endpoint, region_name=self.region,
                           aws_access_key_id=key, aws_secret_access_key=secret, aws_session_token=token,
                           verify=self.ca_file, config=boto_config(**config))

    def s3_admin(self):
        """The backend user's S3 client (path-style): reads objects back, seeds, cleans."""
        if self._admin is None:
            self._admin = self.client("s3", self.backend_access_key, self.backend_secret_key)
        return self._admin

    def sts_backend(self):
        return self.client("sts", self.backend_access_key, self.backend_secret_key)

    def s3_with(self, credentials: dict, endpoint: str | None = None, **config):
        """An S3 client from a backend-api `credentials` object."""
        return self.client("s3", credentials["accessKeyId"], credentials["secretAccessKey"],
                           credentials["sessionToken"], endpoint=endpoint, **config)

    def empty_bucket(self) -> None:
        s3 = self.s3_admin()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for o in page.get("Contents", []):
                s3.delete_object(Bucket=self.bucket, Key=o["Key"])
        for u in s3.list_multipart_uploads(Bucket=self.bucket).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=self.bucket, Key=u["Key"], UploadId=u["UploadId"])
