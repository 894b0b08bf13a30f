"""An HTTP/1.1 reverse proxy on loopback that misbehaves on purpose, for S3 fault tests.

The daemon is pointed at the proxy (the fake backend hands out the proxy's URL as the STS
`endpoint`), so it signs its SigV4 requests for the proxy's host:port. The proxy forwards
the request line and every header byte for byte (Host included) and streams the body, so
moto verifies exactly the signature the daemon made. Keep-alive works on both sides;
bodies may be large (tens of MB) and are streamed, never buffered.

Faults, evaluated per request in this order (control paths /_proxy/ are never faulted):

    match                a regular expression searched in "METHOD target" (the request
                         line's path and query, e.g. "^GET [^?]*[?&]list-type=2"):
                         when set, every fault below (but expiry enforcement) applies only
                         to matching requests (counted ones are used up only by those)
    blackhole            read the request head, then never answer (until cleared)
    expiry enforcement   400 ExpiredToken if the request's STS key is past the expiration
                         the backend reported (moto itself accepts expired keys)
    expired_token_count  the next N requests: 400 ExpiredToken (S3 XML)
    access_denied        403 AccessDenied (S3 XML), as S3 answers what the session policy
                         does not allow: moto does not enforce session policies, so this
                         stands in for S3's policy check (e.g. ListObjectsV2 without
                         s3:ListBucket)
    reset_rate           probability: read the request, then close with a TCP RST
    slowdown_rate        probability: read the request, answer 503 SlowDown (S3 XML)
    latency              seconds to wait before forwarding
    corrupt_body         forward, then flip the bits of the answer's first body byte: the
                         bytes a client reads back are not the stored ones, their size is
                         (what only reading back and checking an MD5 finds)
    refuse_if_match      412 PreconditionFailed to any request with If-Match, not forwarded,
                         whether or not it holds (Ceph Pacific does this to a quoted If-Match)
    truncate_rate/_count forward to upstream (the request takes effect), then send the
                         status and headers with a Content-Length and close early: half the
                         body (or none, with 64 declared, when the body is empty; for HEAD,
                         which has no body, close after 10 bytes of the status line)
    archive_delay        seconds an object asked back with RestoreObject stays "being
                         restored" (moto makes it readable at once): HEAD says
                         ongoing-request="true", GET answers 403 InvalidObjectState

Over TLS: `FaultProxy(upstream, tls=server_cert, upstream_ca=ca_path)` serves HTTPS with that
certificate (support/tls.py), so the daemon's TLS ends here (a handshake the client refuses
is counted as `tls_refused`, nothing else happens), and an `https://` upstream is reached
over TLS verified against `upstream_ca`. Each request's `payload` says how it was signed:
"UNSIGNED-PAYLOAD", "sha256" (the body's hash) or "streaming".

Python:  proxy = FaultProxy(moto.endpoint).start(); proxy.set_faults(slowdown_rate=0.2, seed=1)
HTTP:    POST {proxy.url}/_proxy/faults {"slowdown_rate": 0.2, "seed": 1}
Script:  python3 Tests/e2e/support/fault_proxy.py --upstream http://127.0.0.1:PORT [--port N]
         (prints its URL on stdout line 1)
"""
from __future__ import annotations

import argparse
import http.client
import json
import logging
import random
import re
import select
import signal
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, fields
from typing import Callable, Iterator
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import requests

log = logging.getLogger("fault_proxy")

CHUNK = 1 << 20
WRITE_METHODS = ("PUT", "POST", "DELETE")
# Query parameters that carry credentials (presigned URLs); never kept in stats.
_SECRET_PARAMS = {"x-amz-security-token", "x-amz-signature", "x-amz-credential"}


@dataclass
class Faults:
    slowdown_rate: float = 0.0
    reset_rate: float = 0.0
    expired_token_count: int = 0
    blackhole: bool = False
    latency: float = 0.0
    truncate_rate: float = 0.0
    truncate_count: int = 0
    archive_delay: float = 0.0
    refuse_if_match: bool = False
    seed: int | None = None
    # Base URL of a FakeBackend: enforce the `expiration` it reported for each STS key.
    enforce_expiry_from: str | None = None
    access_denied: bool = False
    corrupt_body: bool = False
    match: str | None = None


def _s3_error(status: int, reason: str, code: str, message: str, head_only: bool) -> bytes:
    rid = uuid.uuid4().hex[:16].upper()
    body = b"" if head_only else (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<RequestId>{rid}</RequestId><HostId>fault-proxy</HostId></Error>").encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\nx-amz-request-id: {rid}\r\n"
            f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime())}\r\n"
            "Server: fault-proxy\r\n\r\n").encode()
    return head + body


def _clean_path(target: str) -> str:
    parts = urlsplit(target)
    if not parts.query:
        return parts.path
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k.lower() not in _SECRET_PARAMS]
    return parts.path + ("?" + urlencode(kept) if kept else "")


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True
    block_on_close = False


def _payload_kind(value: str | None) -> str | None:
    """How a request's body was signed, from its x-amz-content-sha256 header."""
    if not value:
        return None
    if value.startswith("STREAMING-"):
        return "streaming"
    if value == "UNSIGNED-PAYLOAD":
        return value
    return "sha256" if len(value) == 64 else "other"


class FaultProxy:
    def __init__(self, upstream: str, port: int = 0, *, host: str = "127.0.0.1", seed: int | None = None,
                 tls=None, upstream_ca: str | None = None):
        u = urlsplit(upstream)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"upstream must be http(s)://host:port, not {upstream!r}")
        self.upstream = (u.hostname, u.port or (443 if u.scheme == "https" else 80))
        self.upstream_scheme = u.scheme
        # TLS towards upstream is verified against the test CA, never switched off.
        self._upstream_ctx = ssl.create_default_context(cafile=upstream_ca) if u.scheme == "https" else None
        # A support.tls.ServerCert: the certificate this proxy presents to its clients.
        self.tls = tls
        self._server_ctx = tls.server_context() if tls else None
        self.host, self.port = host, port
        self._lock = threading.Lock()
        self._faults = Faults(seed=seed)
        self._rng = random.Random(seed)
        self._release = threading.Event()   # set: let blackholed requests go (closed)
        self._stopping = threading.Event()
        self._clients: set[socket.socket] = set()
        self._expiry_cache: dict[str, float] = {}
        self._expiry_lookup: Callable[[str], float | None] | None = None
        self._server: _Server | None = None
        # Called (in the proxy's thread) with the request's stats entry once its whole
        # answer has been handed to the client: a crash test kills the daemon there,
        # "right after a completed PUT".
        self.on_response: Callable[[dict], None] | None = None
        # Object path -> when RestoreObject was first answered 2xx for it (archive_delay).
        self._thawing: dict[str, float] = {}
        self.reset_stats()

    # ---- lifecycle -------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def start(self) -> "FaultProxy":
        proxy = self
        self._stopping.clear()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                proxy._serve_connection(self.request)

        self._server = _Server((self.host, self.port), Handler)
        self.port = self._server.server_address[1]
        # A short poll interval: shutdown() waits for it, and tests start and stop many.
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         name="fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._release.set()
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            clients = list(self._clients)
        for c in clients:  # wake handler threads blocked on keep-alive reads
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "FaultProxy":
        return self.start() if self._server is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- controls --------------------------------------------------------------------

    def set_certificate(self, tls) -> None:
        """Present another certificate (a support.tls.ServerCert): a server whose
        certificate expires or is replaced while the daemon runs. Connections open now are
        closed, so the client's next request shakes hands again."""
        if self._server_ctx is None:
            raise ValueError("this proxy speaks plain HTTP; give it tls= to start with")
        ctx = tls.server_context()
        with self._lock:
            self.tls, self._server_ctx = tls, ctx
            clients = list(self._clients)
        for c in clients:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    @property
    def expiry_lookup(self) -> Callable[[str], float | None] | None:
        """Python-side alternative to `enforce_expiry_from`: accessKeyId -> the epoch
        expiry the backend reported (None: unknown key, not enforced). For example
        `proxy.expiry_lookup = backend.credential_expiry`."""
        return self._expiry_lookup

    @expiry_lookup.setter
    def expiry_lookup(self, fn: Callable[[str], float | None] | None) -> None:
        with self._lock:
            self._expiry_lookup = fn
            self._expiry_cache.clear()

    def set_faults(self, **changes) -> dict:
        """Change some faults (names as in `Faults`); returns all of them."""
        kinds = {f.name: f.type for f in fields(Faults)}
        unknown = set(changes) - set(kinds)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {sorted(kinds)}")
        for k, v in changes.items():  # checked here, not later in a proxy thread
            kind = kinds[k]
            ok = (v is None and "None" in kind) or (
                isinstance(v, bool) if kind == "bool" else
                isinstance(v, str) if kind.startswith("str") else
                isinstance(v, int) and not isinstance(v, bool) if kind.startswith("int") else
                isinstance(v, (int, float)) and not isinstance(v, bool))
            if not ok:
                raise ValueError(f"{k} must be {kind}, not {v!r}")
        with self._lock:
            for k, v in changes.items():
                setattr(self._faults, k, v)
            if "enforce_expiry_from" in changes:
                self._expiry_cache.clear()
            if "seed" in changes:
                self._rng = random.Random(changes["seed"])
            if "blackhole" in changes and not changes["blackhole"]:
                self._release_blackholed()
            return asdict(self._faults)

    def clear_faults(self) -> dict:
        """No faults any more; blackholed connections are closed."""
        with self._lock:
            self._faults = Faults(seed=self._faults.seed)
            self._expiry_cache.clear()
            self._release_blackholed()
            return asdict(self._faults)

    def faults(self) -> dict:
        with self._lock:
            return asdict(self._faults)

    def _release_blackholed(self) -> None:
        self._release.set()
        self._release = threading.Event()

    def reset_stats(self) -> None:
        with self._lock:
            self._stats = {"total": 0, "connections": 0, "tls_refused": 0, "methods": {}, "writes_forwarded": 0,
                           "bytes_forwarded": 0,
                           "faults": {"blackhole": 0, "expired_token": 0, "reset": 0, "slowdown": 0,
                                      "truncated": 0, "expired_enforced": 0, "upstream_error": 0,
                                      "access_denied": 0, "corrupted": 0,
                                      "refused_if_match": 0},
                           "requests": [], "held": []}

    def stats(self) -> dict:
        """total (requests), connections (accepted), tls_refused (handshakes that failed), methods {METHOD: n},
        writes_forwarded (PUT/POST/DELETE answered 2xx by upstream), bytes_forwarded (request body bytes sent
        upstream), faults {kind: n}, requests [{time, method, path, status, fault, bytes, payload, ifNoneMatch}]
        (status None when no answer), held [{time, method, path}]: requests `latency` is holding or held,
        recorded as they arrive (a test can change the bucket while the request waits)."""
        with self._lock:
            return json.loads(json.dumps(self._stats))

    # ---- the proxy -------------------------------------------------------------------

    def _serve_connection(self, client: socket.socket) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._stats["connections"] += 1
        with self._lock:
            server_ctx = self._server_ctx
        if server_ctx is not None:
            client.settimeout(10)
            try:
                client = server_ctx.wrap_socket(client, server_side=True)
            except (ssl.SSLError, OSError) as e:
                # The client refused our certificate (or hung up): nothing was sent.
                with self._lock:
                    self._stats["tls_refused"] += 1
                log.info("TLS handshake refused: %s", getattr(e, "reason", None) or type(e).__name__)
                try:
                    client.close()
                except OSError:
                    pass
                return
        client.settimeout(300)
        with self._lock:
            self._clients.add(client)
        rfile = client.makefile("rb", buffering=CHUNK)
        upstream: socket.socket | None = None
        try:
            while not self._stopping.is_set():
                req = self._read_head(rfile)
                if req is None:
                    return
                if req["target"].startswith("/_proxy/"):
                    keep = self._control(client, rfile, req)
                else:
                    keep, upstream = self._proxy_one(client, rfile, req, upstream)
                if not keep:
                    return
        except (OSError, http.client.HTTPException, ValueError) as e:
            log.debug("connection ended: %s", type(e).__name__)
        finally:
            with self._lock:
                self._clients.discard(client)
            for s in (upstream, client):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass

    @staticmethod
    def _read_head(rfile) -> dict | None:
        line = rfile.readline(65537)
        while line in (b"\r\n", b"\n"):  # RFC 9112 2.2: ignore a stray empty line
            line = rfile.readline(65537)
        if not line:
            return None
        method, target, version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        raw_headers, headers = [], {}
        while True:
            h = rfile.readline(65537)
            if h in (b"\r\n", b"\n", b""):
                break
            raw_headers.append(h)
            name, _, value = h.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        te = headers.get("transfer-encoding", "").lower()
        conn = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        return {"method": method.upper(), "target": target, "version": version,
                "line": line, "raw_headers": raw_headers, "headers": headers,
                "chunked": "chunked" in te,
                "length": 0 if "chunked" in te else int(headers.get("content-length", "0") or 0),
                "keep_alive": version == "HTTP/1.1" and "close" not in conn}

    @staticmethod
    def _body(rfile, req) -> Iterator[bytes]:
        """The request body as raw wire bytes (chunked framing kept as is)."""
        if req["chunked"]:
            while True:
                size_line = rfile.readline(65537)
                yield size_line
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers up to the empty line
                        t = rfile.readline(65537)
                        yield t
                        if t in (b"\r\n", b"\n", b""):
                            return
                left = size + 2  # data + CRLF
                while left:
                    data = rfile.read(min(left, CHUNK))
                    if not data:
                        raise ConnectionError("client closed mid-body")
                    left -= len(data)
                    yield data
        else:
            left = req["length"]
            while left:
                data = rfile.read(min(left, CHUNK))
                if not data:
                    raise ConnectionError("client closed mid-body")
                left -= len(data)
                yield data

    def _record(self, req, status, fault=None, sent=0) -> None:
        with self._lock:
            s = self._stats
            s["total"] += 1
            s["methods"][req["method"]] = s["methods"].get(req["method"], 0) + 1
            s["bytes_forwarded"] += sent
            if fault:
                s["faults"][fault] = s["faults"].get(fault, 0) + 1
            if (not fault or fault == "truncated") and req["method"] in WRITE_METHODS \
                    and status is not None and 200 <= status < 300:
                s["writes_forwarded"] += 1
            s["requests"].append({"time": time.time(), "method": req["method"],
                                  "path": _clean_path(req["target"]), "status": status,
                                  "fault": fault, "bytes": sent,
                                  "payload": _payload_kind(req["headers"].get("x-amz-content-sha256")),
                                  # A conditional write (If-None-Match: *) says so.
                                  "ifNoneMatch": req["headers"].get("if-none-match")})
        log.info("%s %s %s%s", req["method"], urlsplit(req["target"]).path, status,
                 f" ({fault})" if fault else "")

    def _draw(self) -> tuple[Faults, float, float, float]:
        """A snapshot of the faults and this request's three random draws, taken together
        under the lock so that a seed gives one reproducible sequence."""
        with self._lock:
            return Faults(**asdict(self._faults)), self._rng.random(), self._rng.random(), self._rng.random()

    def _take(self, counter: str) -> bool:
        """Consume one of a counted fault (expired_token_count, truncate_count) if any left."""
        with self._lock:
            left = getattr(self._faults, counter)
            if left > 0:
                setattr(self._faults, counter, left - 1)
                return True
            return False

    def _expired_by_backend(self, req, f: Faults) -> bool:
        lookup = self.expiry_lookup
        if lookup is None and f.enforce_expiry_from:
            base = f.enforce_expiry_from.rstrip("/")

            def lookup(akid: str) -> float | None:
                r = requests.get(f"{base}/_test/credential-expiry/{akid}", timeout=5)
                return r.json().get("expiration") if r.ok else None
        if lookup is None:
            return False
        auth = req["headers"].get("authorization", "")
        akid = auth.partition("Credential=")[2].partition("/")[0]
        if not akid:
            return False
        if akid not in self._expiry_cache:
            exp = lookup(akid)
            if exp is None:
                return False
            self._expiry_cache[akid] = exp
        return time.time() >= self._expiry_cache[akid]

    def _proxy_one(self, client, rfile, req, upstream):
        """Handle one request; returns (keep the client connection?, upstream socket)."""
        method, head_only = req["method"], req["method"] == "HEAD"
        f, r_reset, r_slow, r_trunc = self._draw()
        if f.match and not re.search(f.match, f"{method} {req['target']}"):
            # Not a request the faults are aimed at: none applies, none is used up.
            f = Faults(seed=f.seed, enforce_expiry_from=f.enforce_expiry_from)

        if f.blackhole:
            self._record(req, None, "blackhole")
            # Never answer; stop reading too (a large body backs up into the client's
            # send buffer, as with a dead peer). Released by clear/stop: then just close.
            release = self._release
            while not release.wait(0.2) and not self._stopping.is_set():
                pass
            return False, upstream

        if req["headers"].get("expect", "").lower() == "100-continue":
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

        def drain() -> None:
            for _ in self._body(rfile, req):
                pass

        # Every request is recorded before its answer leaves, so a client that reads the
        # stats right after its response always finds its own request there.
        def error_reply(status, reason, code, message, fault):
            drain()
            self._record(req, status, fault)
            client.sendall(_s3_error(status, reason, code, message, head_only))
            return req["keep_alive"], upstream

        if self._expired_by_backend(req, f):
            return error_reply(400, "Bad Request", "ExpiredToken",
                               "The provided token has expired.", "expired_enforced")
        if f.expired_token_count and self._take("expired_token_count"):
            return error_reply(400, "Bad Request", "ExpiredToken",
                               "The provided token has expired.", "expired_token")
        if f.access_denied:
            return error_reply(403, "Forbidden", "AccessDenied", "Access Denied", "access_denied")
        if r_reset < f.reset_rate:
            drain()
            self._record(req, None, "reset")
            # SO_LINGER 0: close() sends RST, the client sees "connection reset by peer".
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False, upstream
        if r_slow < f.slowdown_rate:
            return error_reply(503, "Slow Down", "SlowDown", "Please reduce your request rate.", "slowdown")
        object_path = urlsplit(req["target"]).path
        with self._lock:
            asked_back = self._thawing.get(object_path)
        thawing = f.archive_delay > 0 and asked_back is not None and time.time() - asked_back < f.archive_delay
        if thawing and method == "GET":
            return error_reply(403, "Forbidden", "InvalidObjectState",
                               "The operation is not valid for the object's storage class", "archive_delay")
        if f.refuse_if_match and "if-match" in req["headers"]:
            return error_reply(412, "Precondition Failed", "PreconditionFailed",
                               "At least one of the pre-conditions you specified did not hold", "refused_if_match")
        if f.latency > 0:
            with self._lock:
                self._stats["held"].append({"time": time.time(), "method": method, "path": _clean_path(req["target"])})
            self._stopping.wait(f.latency)

        truncate = (f.truncate_count > 0 and self._take("truncate_count")) or r_trunc < f.truncate_rate

        # -- forward
        try:
            upstream = self._fresh_upstream(upstream)
            upstream.sendall(req["line"] + b"".join(req["raw_headers"]) + b"\r\n")
        except OSError:
            drain()
            self._record(req, 502, "upstream_error")
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return req["keep_alive"], None
        sent = 0
        for data in self._body(rfile, req):
            upstream.sendall(data)
            sent += len(data)
        resp = http.client.HTTPResponse(upstream, method=method)
        try:
            resp.begin()  # skips upstream's own "100 Continue"
        except (OSError, http.client.HTTPException):
            self._record(req, 502, "upstream_error", sent)
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return False, None
        upstream_closes = resp.will_close
        headers = [(k, v) for k, v in resp.msg.items()
                   if k.lower() not in ("connection", "keep-alive", "transfer-encoding")]
        if thawing and head_only:
            headers = [(k, 'ongoing-request="true"' if k.lower() == "x-amz-restore" else v) for k, v in headers]
        if method == "POST" and "restore" in parse_qs(urlsplit(req["target"]).query, keep_blank_values=True) \
                and 200 <= resp.status < 300:
            with self._lock:
                self._thawing.setdefault(object_path, time.time())
        status_line = f"HTTP/1.1 {resp.status} {resp.reason}\r\n"

        if truncate:
            body = resp.read()
            resp.close()
            self._record(req, resp.status, "truncated", sent)
            if head_only:
                # A HEAD answer has no body to cut, and clients take EOF as the end of
                # the header block, so cut the status line itself.
                client.sendall(status_line.encode("latin-1")[:10])
            else:
                declared = len(body) if body else 64
                head = status_line + "".join(f"{k}: {v}\r\n" for k, v in headers
                                             if k.lower() != "content-length")
                head += f"Content-Length: {declared}\r\n\r\n"
                client.sendall(head.encode("latin-1") + body[: len(body) // 2])
            return False, (None if upstream_closes else upstream)

        keep = req["keep_alive"]
        if resp.chunked:
            headers.append(("Transfer-Encoding", "chunked"))
        elif resp.length is None and not head_only and resp.status not in (204, 304):
            keep = False  # body delimited by close: we must close too
        if not keep:
            headers.append(("Connection", "close"))
        corrupt = f.corrupt_body and not head_only
        self._record(req, resp.status, "corrupted" if corrupt else None, sent)
        client.sendall((status_line + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode("latin-1"))
        while True:
            data = resp.read(CHUNK)
            if not data:
                break
            if corrupt:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
                corrupt = False
            client.sendall(b"%x\r\n%s\r\n" % (len(data), data) if resp.chunked else data)
        if resp.chunked:
            client.sendall(b"0\r\n\r\n")
        resp.close()
        if self.on_response is not None:
            self.on_response({"method": req["method"], "path": _clean_path(req["target"]), "status": resp.status,
                              "bytes": sent})
        return keep, (None if upstream_closes else upstream)

    def _fresh_upstream(self, sock: socket.socket | None) -> socket.socket:
        """The kept upstream connection if it is still good, else a new one. A kept
        connection that is readable while idle has been closed by upstream."""
        if sock is not None:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return sock
            sock.close()
        s = socket.create_connection(self.upstream, timeout=300)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._upstream_ctx is not None:
            s = self._upstream_ctx.wrap_socket(s, server_hostname=self.upstream[0])
        return s

    # ---- /_proxy/ control endpoints ------------------------------------------------

    def _control(self, client, rfile, req) -> bool:
        body = b"".join(self._body(rfile, req))
        path, method = urlsplit(req["target"]).path, req["method"]
        try:
            data = json.loads(body) if body.strip() else {}
            if path == "/_proxy/faults" and method == "GET":
                status, out = 200, self.faults()
            elif path == "/_proxy/faults" and method == "POST":
                status, out = 200, self.set_faults(**data)
            elif path == "/_proxy/clear" and method == "POST":
                status, out = 200, self.clear_faults()
            elif path == "/_proxy/stats" and method == "GET":
                status, out = 200, self.stats()
            elif path == "/_proxy/reset-stats" and method == "POST":
                self.reset_stats()
                status, out = 200, {}
            elif path == "/_proxy/health" and method == "GET":
                status, out = 200, {"ok": True, "upstream": "%s://%s:%d" % ((self.upstream_scheme,) + self.upstream)}
            else:
                status, out = 404, {"error": "not_found", "message": f"no control {method} {path}"}
        except (ValueError, TypeError) as e:
            status, out = 400, {"error": "invalid_request", "message": str(e)}
        payload = json.dumps(out).encode()
        client.sendall((f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                        + ("" if req["keep_alive"] else "Connection: close\r\n") + "\r\n").encode() + payload)
        return req["keep_alive"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fault-injecting HTTP/1.1 proxy for S3 tests.")
    ap.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:5055 (moto)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, stream=sys.stderr,
                        format="fault_proxy %(levelname)s %(message)s")
    proxy = FaultProxy(args.upstream, args.port, seed=args.seed).start()
    print(proxy.url, flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
