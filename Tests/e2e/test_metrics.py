"""Prometheus metrics, end to end (issue 18): the real daemon against moto and the fake
backend, its exposition checked by Debian's `promtool` in every state (signed out,
uploading, paused by the user, Apple ID revoked, paused for quota) and compared with
`status --json`; the counters compared with what the fault proxy saw go to S3; the
alerting rules checked and unit-tested with `promtool`; a real `prometheus` scraping
the TCP listener during an upload; the listener off by default, and when on serving
only /metrics, refusing oversized and slow requests, and never holding the daemon up."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from support.daemon import REPO
from support.prom import (PrometheusServer, free_port, have_prometheus, http_body, parse, promtool_check_metrics,
                          scrape_socket, tcp_exchange, value)
from support.world import settled, write_photo

pytestmark = pytest.mark.skipif(not have_prometheus(), reason="Debian's prometheus package (promtool) is not installed: run scripts/setup")

RULES = REPO / "packaging" / "prometheus" / "photolalad.rules.yml"
RULE_TESTS = REPO / "Tests" / "prometheus" / "photolalad.rules.test.yml"
DASHBOARD = REPO / "packaging" / "prometheus" / "photolalad-dashboard.json"
MiB = 1 << 20


VOLATILE = ("hashRate", "uploadRate", "etaSeconds")


def steady(s: dict) -> dict:
    return s | {"queue": {k: v for k, v in s["queue"].items() if k not in VOLATILE}}


def snapshot(d) -> tuple[dict, dict, str]:
    """A scrape between two equal `status --json` (while files move, until one is), so
    the two must agree; the scrape passes promtool."""
    for _ in range(50):
        before = d.status()
        text = scrape_socket(d.socket)
        after = d.status()
        if steady(before) == steady(after):
            break
    promtool_check_metrics(text)
    return after, parse(text), text


def one_of(m: dict, name: str, label: str) -> str | None:
    on = [dict(labels)[label] for (n, labels), v in m.items() if n == name and v == 1]
    assert len(on) <= 1, (name, on)
    return on[0] if on else None


def assert_agrees(s: dict, m: dict, text: str):
    """The gauges are the snapshot status --json prints."""
    assert one_of(m, "photolala_state", "state") == s["state"]
    assert one_of(m, "photolala_paused", "reason") == s["pauseReason"]
    assert one_of(m, "photolala_apple_credential_state", "state") == s["appleCredential"]["state"]
    assert one_of(m, "photolala_sts_credentials_state", "state") == s["credentials"]["state"]
    assert value(m, "photolala_signed_in") == (1 if s["account"]["signedIn"] else 0)
    for state in ("pending", "hashing", "uploading", "uploaded", "failed"):
        assert value(m, "photolala_files", state=state) == s["queue"][state], state
    assert value(m, "photolala_files_bytes", state="pending") == s["queue"]["pendingBytes"]
    assert value(m, "photolala_files_bytes", state="uploaded") == s["queue"]["uploadedBytes"]
    assert value(m, "photolala_watched_folders") == s["watch"]["folders"]
    assert value(m, "photolala_watched_directories") == s["watch"]["directories"]
    assert ("photolala_sts_credentials_expires_in_seconds", frozenset()) in m or s["credentials"]["expiresAt"] is None
    # Nothing private: no user id, no path, no key.
    for private in filter(None, [s["account"]["userId"], *s["watch"]["paths"], "photos/"]):
        assert private not in text, private


# Alone: it must catch the upload in the act between two snapshots (status + scrape),
# which other tests loading the machine make it miss.
@pytest.mark.alone
def test_every_state_passes_promtool_agrees_with_status_and_counts_what_s3_saw(world):
    # 1 MiB/s keeps the 12 photos uploading for about 12 s: a snapshot (status, metrics,
    # promtool) takes a second or more on a loaded machine, and at 6 MiB/s the whole
    # upload could fall between two of them.
    d = world.daemon(config={"credentials": {"apple_check_interval": "2s"},
                             "upload": {"bandwidth_limit": "1MiB/s", "concurrency": 2}})
    s, m, text = snapshot(d)
    assert s["state"] == "needsLogin"
    assert_agrees(s, m, text)

    uid = world.login(d)
    bodies = [write_photo(d.photos / f"m/{i:02d}.jpg", MiB + 1000 * i) for i in range(12)]
    bodies.append(bodies[0])
    write_photo(d.photos / "m/copy-of-00.jpg", 0, data=bodies[0])    # same bytes: one object, two files
    seen_uploading = False
    deadline = time.monotonic() + 120
    while True:
        s, m, text = snapshot(d)
        assert_agrees(s, m, text)
        if s["queue"]["uploading"] > 0 and s["state"] == "running":
            seen_uploading = True
        if settled(13)(s):
            break
        assert time.monotonic() < deadline, json.dumps(s, indent=1)
        time.sleep(0.3)
    assert seen_uploading
    s, m, text = snapshot(d)
    assert_agrees(s, m, text)

    # Counters from the parts that did the work, against what went over the wire.
    assert value(m, "photolala_uploaded_files_total") == 13
    assert value(m, "photolala_uploaded_objects_total") == 12
    assert value(m, "photolala_uploaded_bytes_total") == sum(len(b) for b in set(bodies))
    assert value(m, "photolala_hashed_files_total") >= 13
    seen = Counter((r["op"], f"{r['status'] // 100}xx") for r in world.s3_ops(manifest=True))   # every request S3 saw, the manifest's too
    for (op, cls), n in seen.items():
        assert value(m, "photolala_s3_requests_total", operation=op, status_class=cls) == n, (op, cls, n)
    assert value(m, "photolala_s3_sent_bytes_total") >= sum(len(b) for b in set(bodies))
    assert value(m, "photolala_sts_credential_fetches_total") >= 1
    assert value(m, "photolala_backend_requests_total", endpoint="/api/v1/auth/sts-token", status="200") >= 1
    assert value(m, "photolala_apple_credential_checks_total", result="authorized") >= 1
    assert abs(value(m, "photolala_last_upload_timestamp_seconds") - time.time()) < 60
    assert 0 < value(m, "photolala_sts_credentials_expires_in_seconds") <= 3600
    assert value(m, "photolala_oldest_pending_file_age_seconds") == 0

    # Paused by the user.
    d.ctl("pause", check=True)
    s, m, text = snapshot(d)
    assert s["pauseReason"] == "user"
    assert_agrees(s, m, text)
    d.ctl("resume", check=True)

    # The Apple ID revoked: paused within a check, the credentials dropped.
    world.backend.set_apple_state("revoked")
    d.wait_for(lambda s: s["pauseReason"] == "appleRevoked", timeout=15, what="the revocation pause")
    s, m, text = snapshot(d)
    assert_agrees(s, m, text)
    assert value(m, "photolala_apple_credential_checks_total", result="revoked") >= 1

    # Authorized again, but the storage is full: the next photo's credentials are refused,
    # paused for quota, the refusal counted.
    world.backend.fail("sts-token", status=403, error="quota_exceeded", message="storage full")
    world.backend.set_apple_state("authorized")
    d.wait_for(lambda s: s["state"] == "running", timeout=15, what="the lifted revocation")
    write_photo(d.photos / "m/after.jpg", 50_000)
    d.wait_for(lambda s: s["pauseReason"] == "quotaExceeded", timeout=20, what="the quota pause")
    s, m, text = snapshot(d)
    assert_agrees(s, m, text)
    assert value(m, "photolala_sts_credential_failures_total") >= 1
    # No token, key or identity the backend ever handed out is in a scrape.
    for secret in world.backend.all_secrets():
        assert secret not in text
    assert value(m, "photolala_backend_requests_total", endpoint="/api/v1/auth/sts-token", status="403") >= 1
    world.backend.clear_faults()


def test_alerting_rules_pass_promtool_and_their_unit_tests():
    r = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 13 rules found" in r.stdout, r.stdout
    r = subprocess.run(["promtool", "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    # Every alert has a test that fires it.
    alerts = {line.split(":", 1)[1].strip() for line in RULES.read_text().splitlines() if line.strip().startswith("- alert:")}
    tested = RULE_TESTS.read_text()
    for alert in alerts:
        assert f"alertname: {alert}" in tested, alert


def test_prometheus_scrapes_the_listener_during_an_upload(world, tmp_path):
    port = free_port()
    d = world.daemon(config={"metrics": {"listen": f"127.0.0.1:{port}"},
                             "upload": {"bandwidth_limit": "4MiB/s", "concurrency": 2}})
    prom = PrometheusServer(tmp_path / "prometheus", [f"127.0.0.1:{port}"], rule_files=[str(RULES)])
    try:
        deadline = time.monotonic() + 20
        while not prom.query('up{job="photolalad"} == 1'):
            assert time.monotonic() < deadline, prom.query("up")
            time.sleep(0.3)
        # The rules load; signed out, the sign-in alert is pending (it fires after 5 minutes).
        groups = prom.api("rules")["groups"]
        assert sum(len(g["rules"]) for g in groups) == 13
        assert all(r["health"] == "ok" for g in groups for r in g["rules"]), groups
        deadline = time.monotonic() + 20
        while not [a for a in prom.api("alerts")["alerts"] if a["labels"]["alertname"] == "PhotolalaSignedOut"]:
            assert time.monotonic() < deadline, prom.api("alerts")
            time.sleep(0.3)

        world.login(d)
        n = 16
        for i in range(n):
            write_photo(d.photos / f"p/{i:02d}.jpg", MiB + i)
        deadline = time.monotonic() + 60
        while True:
            got = prom.query('photolala_uploaded_files_total{job="photolalad"}')
            if got and float(got[0]["value"][1]) == n:
                break
            assert time.monotonic() < deadline, (got, d.status())
            time.sleep(0.5)
        # It saw the upload progress, not just its end.
        series = prom.query('photolala_uploaded_files_total{job="photolalad"}[5m]')
        values = {float(v) for _, v in series[0]["values"]}
        assert any(0 < v < n for v in values), values
        uploaded = prom.query('photolala_files{job="photolalad",state="uploaded"}')
        assert float(uploaded[0]["value"][1]) == n == d.status()["queue"]["uploaded"]
        # Every query of the Grafana dashboard is one this Prometheus accepts, and most have data.
        exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]]
        answered = 0
        for expr in exprs:
            result = prom.query(expr.replace("$__rate_interval", "1m").replace("$instance", ".*"))
            answered += bool(result)
        assert answered >= len(exprs) * 3 // 4, (answered, len(exprs))
    finally:
        prom.stop()


def listening_tcp_ports(pid: int) -> list[int]:
    """TCP ports the process listens on, from its descriptors and /proc/net/tcp{,6}."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:
                ports.append(int(f[1].rsplit(":", 1)[1], 16))
    return ports


# Alone: it times `status` (< 2 s) while 80 slow clients hold the listener.
@pytest.mark.alone
def test_listener_off_by_default_then_only_metrics_bounded_and_never_in_the_way(world):
    d = world.daemon()
    assert listening_tcp_ports(d.proc.pid) == []
    assert "photolala_files" in scrape_socket(d.socket)
    # Group members may read it, like status; others may not.
    ask = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", d.socket, "http://x/v1/metrics"]
    as_member = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--groups=users", *ask], capture_output=True, text=True)
    as_other = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *ask], capture_output=True, text=True)
    # The kernel refuses a non-member at connect (the socket is 0660): curl gets no answer.
    assert as_member.stdout == "200" and as_other.stdout != "200" and as_other.returncode != 0, (as_member, as_other)

    # Turned on by a reload.
    port = free_port()
    d.sections["metrics"] = {"listen": f"127.0.0.1:{port}"}
    d.write_config()
    d.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while listening_tcp_ports(d.proc.pid) != [port]:
        assert time.monotonic() < deadline, d.log()[-3000:]
        time.sleep(0.1)

    status, headers, body = http_body(tcp_exchange(port, b"GET /metrics HTTP/1.1\r\nHost: nas\r\n\r\n"))
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    promtool_check_metrics(body)
    for request, want in [(b"GET /v1/status HTTP/1.1\r\n\r\n", 404), (b"GET / HTTP/1.1\r\n\r\n", 404),
                          (b"GET /v1/metrics HTTP/1.1\r\n\r\n", 404), (b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
                          (b"GET /metrics HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd", 413),
                          (b"GET /metrics HTTP/1.1\r\nX-Fill: " + b"a" * 20000 + b"\r\n\r\n", 431)]:
        got, _, answer = http_body(tcp_exchange(port, request))
        assert got == want, (request[:40], got, answer)
        assert "photolala_" not in answer

    # Slow clients: each is cut off after 3 s, and meanwhile the daemon answers at once.
    idle = []
    for _ in range(80):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /metr")
        idle.append(s)
    started = time.monotonic()
    s_status = d.status()
    assert time.monotonic() - started < 2, "status waited on the metrics listener"
    assert s_status["state"] in ("needsLogin", "running")
    assert "photolala_files" in scrape_socket(d.socket)
    answers = []
    for s in idle:
        chunks = b""
        try:
            while c := s.recv(65536):
                chunks += c
            answers.append(http_body(chunks)[0])
        except ConnectionResetError:
            # Turned away with its request unread: the kernel resets instead of closing.
            answers.append("reset")
        s.close()
    assert time.monotonic() - started < 8
    # Past the connection cap the rest are turned away at once; none waits forever.
    assert set(answers) <= {408, 503, "reset"} and answers.count(408) >= 32, Counter(answers)
    status, _, body = http_body(tcp_exchange(port, b"GET /metrics HTTP/1.1\r\n\r\n"))
    assert status == 200 and "photolala_files" in body
    assert d.proc.poll() is None
