"""Local receivers for the daemon's notifications (config.md "Notifications"), each a real
HTTP server on loopback that records every request it gets:

- `Receiver`: a webhook (any of the three formats) or a Healthchecks-style dead man's
  switch; `answer(500, 200)` makes it answer those statuses in turn before plain 200s
  (`then_hold=True`: the first 200 waits for `release()`).
- `CommandRecorder`: an executable script for `notify.command` that writes its whole
  environment to a new file per event (and says one line on standard output).

`Receiver.events()` parses what arrived according to the format, so a test reads
`[{"event": "problem", "reason": "appleRevoked", ...}]` whatever the wire looked like."""
from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Receiver:
    """One HTTP server on 127.0.0.1 recording each request (method, path, headers, body,
    time and the status it answered)."""

    def __init__(self, fmt: str = "json", tls=None):
        """`tls`: a support.tls.ServerCert to serve HTTPS with."""
        self.fmt = fmt
        self.scheme = "https" if tls else "http"
        self.requests: list[dict] = []
        self._answers: list[int] = []
        self._lock = threading.Lock()
        self._gate = threading.Event()
        self._gate.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with receiver._lock:
                    scripted = receiver._answers.pop(0) if receiver._answers else None
                if scripted is None:
                    # `answer(..., then_hold=True)`: the first plain 200 waits for `release()`.
                    receiver._gate.wait(timeout=60)
                status = 200 if scripted is None else scripted
                with receiver._lock:
                    receiver.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                              "body": body, "time": time.time(), "status": status})
                reply = b"ok\n" if status < 300 else b"receiver says no\n"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_POST = _handle
            do_GET = _handle
            do_HEAD = _handle

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls:
            # A handshake the daemon refuses fails in accept(), which the server shrugs off.
            self.server.socket = tls.server_context().wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> "Receiver":
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str = "/hook") -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}{path}"

    def answer(self, *statuses: int, then_hold: bool = False):
        """The next requests are answered with these statuses, in turn; then 200. With
        `then_hold`, the request after them waits for `release()` (at most 60 s): a test
        can then see the failure in the daemon's status however slowly it polls."""
        with self._lock:
            self._answers = list(statuses)
            if then_hold:
                self._gate.clear()

    def release(self):
        """Lets a request held by `answer(..., then_hold=True)` have its 200."""
        self._gate.set()

    def received(self) -> list[dict]:
        with self._lock:
            return list(self.requests)

    def accepted(self) -> list[dict]:
        return [r for r in self.received() if r["status"] < 300]

    # ---- what a webhook got, whatever its format ----------------------------------------

    def events(self, accepted_only: bool = True) -> list[dict]:
        return [self.parse(r) for r in (self.accepted() if accepted_only else self.received())]

    def parse(self, r: dict) -> dict:
        body = r["body"].decode()
        if self.fmt == "json":
            assert r["headers"].get("Content-Type") == "application/json", r["headers"]
            return json.loads(body)
        if self.fmt == "ntfy":
            h = r["headers"]
            tags = h.get("Tags", "").split(",")
            # Tags: the emoji, "photolala", then the reason; the emoji says which event.
            kind = {"rotating_light": "problem", "warning": "problem", "white_check_mark": "recovered",
                    "floppy_disk": "summary", "test_tube": "test"}[tags[0]]
            return {"event": kind, "reason": tags[2] if len(tags) > 2 else None, "title": h.get("Title"),
                    "priority": h.get("Priority"), "message": body}
        if self.fmt == "slack":
            text = json.loads(body)["text"]
            title, _, message = text.partition("\n")
            kind = ("problem" if " paused on " in title or " stopped on " in title or " missing on " in title
                    else "recovered" if "running again" in title else "test" if "test notification" in title else "summary")
            return {"event": kind, "title": title.strip("*"), "message": message, "reason": None}
        raise AssertionError(self.fmt)

    # ---- what a dead man's switch got ----------------------------------------------------

    def pings(self) -> list[tuple[str, str]]:
        """(kind, body) of each accepted ping: kind is "ok", "fail" or "log"."""
        out = []
        for r in self.accepted():
            path = r["path"].split("?")[0]
            kind = "fail" if path.endswith("/fail") else "log" if path.endswith("/log") else "ok"
            out.append((kind, r["body"].decode()))
        return out


class CommandRecorder:
    """`notify.command`: a shell script writing its environment to `dir/event-N.env`."""

    def __init__(self, root: Path, exit_status: int = 0, line: str = "delivered"):
        self.dir = Path(root) / "command-events"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = Path(root) / "photolala-notify"
        self.path.write_text(
            "#!/bin/sh\n"
            f"f=$(mktemp -p '{self.dir}' event-XXXXXXXX)\n"
            "env > \"$f.env\"\nrm -f \"$f\"\n"
            f"echo '{line}'\n"
            f"exit {exit_status}\n")
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def events(self) -> list[dict]:
        """Each run's environment (oldest first), as a dict."""
        files = sorted(self.dir.glob("*.env"), key=lambda p: p.stat().st_mtime_ns)
        out = []
        for f in files:
            env = {}
            for line in f.read_text().splitlines():
                if "=" in line and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", line):
                    k, _, v = line.partition("=")
                    env[k] = v
            out.append(env)
        return out


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
