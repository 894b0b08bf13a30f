"""Helpers shared by the upload and account end-to-end suites: a daemon signed in against
the fake backend with S3 reached through the fault proxy, objects read back from moto
with their MD5 checked against their keys, the proxy's requests classified by S3
operation, pairing driven through `photolalactl login` on a pseudo-terminal, and the
log/secret checks every test ends with."""
from __future__ import annotations

import hashlib
import os
import pty
import re
import select
import stat
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from .daemon import Daemon, binary
from .fake_backend import user_id_for

# Apple subjects are secrets too (the daemon must never log them): make them long and
# unmistakable so that finding one in a log is never a coincidence.
def apple_subject(tag: str) -> str:
    digest = hashlib.sha1(f"{tag}/{os.getpid()}/{time.time()}".encode()).hexdigest()
    return f"001{int(digest[:5], 16) % 10**6:06d}.{digest[5:37]}.{tag}"


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def settled(n: int, *, scan_done: bool = False):
    """A `status --json` predicate: `n` objects uploaded and nothing pending, hashing or
    uploading (and, with `scan_done`, no scan running)."""
    def check(s: dict) -> bool:
        q = s["queue"]
        return (q["uploaded"] == n and q["pending"] == 0 and q["hashing"] == 0 and q["uploading"] == 0
                and not (scan_done and s["watch"]["scanning"]))
    return check


def write_photo(path: Path, size: int, data: bytes | None = None) -> bytes:
    """Writes a file atomically from the watcher's point of view (written, closed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = data if data is not None else os.urandom(size)
    path.write_bytes(body)
    return body


class World:
    """One test's stack: the shared moto, this test's backend and fault proxy, and the
    daemons it starts (stopped, and their logs checked for secrets, by `close()`)."""

    def __init__(self, tmp_path: Path, moto, backend, proxy):
        self.tmp_path, self.moto, self.backend, self.proxy = Path(tmp_path), moto, backend, proxy
        # Over HTTPS the daemon trusts the stack's test CA through tls.ca_file.
        self.ca_file: str | None = getattr(moto, "ca_file", None)
        # Every S3 request of the daemon goes through the proxy, so tests can count them.
        backend.configure(sts_endpoint=proxy.url)
        self.daemons: list[Daemon] = []
        self.extra_logs: list[str] = []

    def daemon(self, name: str = "d", config: dict | None = None, start: bool = True,
               env: dict | None = None) -> Daemon:
        cfg = {"account": {"api_url": self.backend.url}}
        if self.ca_file:
            cfg["tls"] = {"ca_file": self.ca_file}
        for section, keys in (config or {}).items():
            cfg.setdefault(section, {}).update(keys)
        d = Daemon(self.tmp_path / name, config=cfg, name=name, env=env)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def login(self, d: Daemon, tag: str = "user", sub: str | None = None) -> str:
        """Signs `d` in with an identity token for a fresh Apple subject (or `sub`);
        returns the Photolala user id."""
        sub = sub or apple_subject(tag)
        token = self.backend.mint_identity_token(sub)
        # On standard input, as the README says to: a command line is visible to every user.
        r = d.ctl("login", "--identity-token", "-", "--authorization-code", "-",
                  input=f"{token}\nac_{os.urandom(8).hex()}\n")
        assert r.returncode == 0, f"login failed: {r.stdout}{r.stderr}"
        uid = user_id_for(sub)
        assert uid in r.stdout
        return uid

    # ---- S3 -------------------------------------------------------------------------

    def objects(self, user_id: str, prefix: str = "photos/") -> dict[str, dict]:
        """The objects under `prefix` (the photos unless told), read back: key -> {body, head}.
        Every key in the bucket is checked to be one the daemon may write for `user_id`
        (s3-layout.md): photos/{user_id}/{md5}.dat holding bytes with that MD5,
        thumbnails/{user_id}/{md5}.jpg a JPEG of a photo that is there, or a key under
        catalogs/{user_id}/ or metadata/{user_id}/."""
        s3 = self.moto.s3_admin()
        keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.moto.bucket)
                for o in page.get("Contents", [])]
        out = {}
        for key in keys:
            family = key.split("/", 1)[0] + "/"
            if family in ("catalogs/", "metadata/"):
                assert key.startswith(f"{family}{user_id}/"), f"{key} is not under {family}{user_id}/"
            elif family not in ("photos/", "thumbnails/"):
                raise AssertionError(f"{key} is outside photos/, thumbnails/, catalogs/ and metadata/")
            if family not in ("photos/", "thumbnails/") and not key.startswith(prefix):
                continue
            body = s3.get_object(Bucket=self.moto.bucket, Key=key)["Body"].read()
            if family == "photos/":
                assert key == f"photos/{user_id}/{md5_hex(body)}.dat", f"{key} holds bytes with MD5 {md5_hex(body)}"
            elif family == "thumbnails/":
                m = re.fullmatch(rf"thumbnails/{re.escape(user_id)}/([0-9a-f]{{32}})\.jpg", key)
                assert m, f"{key} is not thumbnails/{user_id}/{{md5}}.jpg"
                assert f"photos/{user_id}/{m.group(1)}.dat" in keys, f"{key} is the thumbnail of no photo in the bucket"
                assert body[:3] == b"\xff\xd8\xff", f"{key} is not a JPEG"
            if key.startswith(prefix):
                out[key] = {"body": body, "head": s3.head_object(Bucket=self.moto.bucket, Key=key)}
        return out

    def key(self, user_id: str, body: bytes) -> str:
        return f"photos/{user_id}/{md5_hex(body)}.dat"

    def s3_ops(self, since: float = 0.0, manifest: bool = False) -> list[dict]:
        """The proxy's requests (not /_proxy/ controls) with an `op` name, oldest first.
        The device manifest's own requests (metadata/ keys and listings) only with
        `manifest=True`: the upload suites count the photos' requests."""
        return [r | {"op": s3_operation(r["method"], r["path"])}
                for r in self.proxy.stats()["requests"] if r["time"] >= since
                and (manifest or not is_manifest_request(r["path"]))]

    # ---- teardown -------------------------------------------------------------------

    def close(self):
        for d in self.daemons:
            try:
                d.stop()
            except Exception:
                d.kill9()
        assert_no_secrets_in_logs(self.backend, [d.log() for d in self.daemons] + self.extra_logs)


# A fault-proxy `match` for the daemon's listings (ListObjectsV2) and nothing else.
LISTING = r"^GET [^?]*[?&]list-type=2"


def is_manifest_request(path: str) -> bool:
    """A request of the manifest stage: a metadata/ key, or a listing of that prefix."""
    parts = urlsplit(path)
    prefix = parse_qs(parts.query).get("prefix", [""])[0]
    return "/metadata/" in parts.path or prefix.startswith("metadata/")


def s3_operation(method: str, path: str) -> str:
    q = parse_qs(urlsplit(path).query, keep_blank_values=True)
    if method == "HEAD":
        return "HeadObject"
    if method == "PUT":
        return "UploadPart" if "partNumber" in q else "PutObject"
    if method == "POST":
        if "uploads" in q:
            return "CreateMultipartUpload"
        if "uploadId" in q:
            return "CompleteMultipartUpload"
        return "POST?"
    if method == "GET":
        if "uploadId" in q:
            return "ListParts"
        return "ListObjectsV2" if "list-type" in q else "GetObject"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in q else "DeleteObject"
    return method


def part_number(path: str) -> int | None:
    q = parse_qs(urlsplit(path).query)
    return int(q["partNumber"][0]) if "partNumber" in q else None


def assert_no_secrets_in_logs(backend, logs: list[str]):
    """No issued or received secret (tokens, codes, STS keys, Apple subjects) in any line."""
    secrets = [s for s in backend.all_secrets() if s]
    assert all(len(s) >= 16 for s in secrets), "a secret too short to search for reliably"
    for text in logs:
        for line in text.splitlines():
            for s in secrets:
                assert s not in line, f"a secret ({s[:6]}…) appears in a log line: {line[:200]}"


def files_under(path: Path) -> list[Path]:
    return [p for p in Path(path).rglob("*") if p.is_file() or p.is_symlink()]


def assert_no_secrets_in_files(backend, root: Path, kinds: tuple[str, ...] | None = None):
    secrets = backend.secrets()
    wanted = [v for k, values in secrets.items() if kinds is None or k in kinds for v in values]
    for f in files_under(root):
        data = f.read_bytes()
        for s in wanted:
            assert s.encode() not in data, f"{f} still holds a secret ({s[:6]}…)"


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ---- pairing through `photolalactl login` ---------------------------------------------

CODE_RE = re.compile(r"\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b")


class PairingLogin:
    """`photolalactl login` as a person runs it: stdout on a terminal (a pty), so the
    URL and code show up while it waits. `code()` returns the code it printed."""

    def __init__(self, d: Daemon):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen([binary(), "ctl", "login", "--socket", d.socket],
                                     stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)
        self.out = b""

    def _pump(self, timeout: float) -> bool:
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the other side closed
            return False
        self.out += chunk
        return bool(chunk)

    def code(self, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = CODE_RE.search(self.text)
            if m and "Waiting" in self.text:
                return m.group(1)
            if not self._pump(0.1) and self.proc.poll() is not None:
                break
        raise AssertionError(f"photolalactl login printed no code: {self.text!r}")

    @property
    def text(self) -> str:
        return self.out.decode(errors="replace").replace("\r\n", "\n")

    def wait(self, timeout: float = 60.0) -> tuple[int, str, str]:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._pump(0.1)
        if self.proc.poll() is None:
            self.proc.kill()
            raise AssertionError(f"photolalactl login still running after {timeout}s: {self.text!r}")
        while self._pump(0.05):
            pass
        os.close(self.master)
        return self.proc.returncode, self.text, self.proc.stderr.read().decode(errors="replace")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
