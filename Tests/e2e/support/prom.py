"""Prometheus for the metrics suite: scraping the daemon (control socket or TCP), reading
the text exposition back, Debian's real `promtool`, and a real `prometheus` server on
loopback in a temporary folder."""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from .daemon import raw_request
from .run import free_port  # noqa: F401  (the metrics suite imports it from here)

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def have_prometheus() -> bool:
    return shutil.which("promtool") is not None and shutil.which("prometheus") is not None




def http_body(raw: bytes) -> tuple[int, dict, str]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return status, headers, body.decode()


def scrape_socket(sock: str) -> str:
    status, headers, body = http_body(raw_request(sock, b"GET /v1/metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert status == 200, (status, body)
    assert headers["content-type"].startswith("text/plain; version=0.0.4"), headers
    return body


def tcp_exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        if data:
            s.sendall(data)
        chunks = []
        while True:
            try:
                c = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not c:
                break
            chunks.append(c)
        return b"".join(chunks)


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    """{(name, frozenset(labels)): value}; asserts every sample is well formed."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample: {line!r}"
        labels = frozenset(LABEL.findall(m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def promtool_check_metrics(text: str) -> None:
    """`promtool check metrics` (the lint Prometheus' own exporters follow): exits 0 and
    says nothing about a clean exposition."""
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), f"promtool: {r.stdout}{r.stderr}"


class PrometheusServer:
    """A real Prometheus scraping `targets` every second, listening on loopback only."""

    def __init__(self, root: Path, targets: list[str], rule_files: list[str] = ()):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        config = self.root / "prometheus.yml"
        rules = "".join(f"  - {f}\n" for f in rule_files)
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            + (f"rule_files:\n{rules}" if rule_files else "")
            + "scrape_configs:\n  - job_name: photolalad\n    static_configs:\n"
            + f"      - targets: {json.dumps(targets)}\n")
        self.log = open(self.root / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={self.root / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.wait_ready()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_ready(self, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.root / "prometheus.log").read_text()
            try:
                with urllib.request.urlopen(self.url("/-/ready"), timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError("prometheus did not become ready:\n" + (self.root / "prometheus.log").read_text())

    def api(self, path: str, **params) -> dict:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(self.url(f"/api/v1/{path}?{query}"), timeout=10) as r:
            answer = json.load(r)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
