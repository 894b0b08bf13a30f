"""Socket hardening: garbage, a 2 MB request line, a declared 1 GB body, a client
that sends nothing — the daemon keeps answering others; a non-member is refused."""
import json
import os
import socket
import threading
import time

import pytest

from support.daemon import Daemon, raw_request


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    assert d.stop() == 0


def status_code(reply: bytes) -> int:
    assert reply.startswith(b"HTTP/1.1 "), reply[:100]
    return int(reply.split(b" ")[1])


def test_versioned_paths(daemon):
    reply = raw_request(daemon.socket, b"GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status_code(reply) == 200
    body = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert body["state"] == "needsLogin"
    assert status_code(raw_request(daemon.socket, b"GET /v2/status HTTP/1.1\r\nHost: x\r\n\r\n")) == 404
    assert status_code(raw_request(daemon.socket, b"DELETE /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")) == 405


def test_garbage_bytes(daemon):
    reply = raw_request(daemon.socket, os.urandom(4096))
    assert reply == b"" or status_code(reply) == 400
    assert daemon.status()["state"] == "needsLogin"


def test_two_megabyte_request_line(daemon):
    line = b"GET /v1/status?" + b"a" * (2 * 1024 * 1024) + b" HTTP/1.1\r\n\r\n"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(daemon.socket)
    try:
        s.sendall(line)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the daemon may hang up before we finish writing
    try:
        reply = s.recv(4096)
    except ConnectionResetError:
        reply = b""
    s.close()
    assert reply == b"" or status_code(reply) in (400, 431)
    assert daemon.status()["state"] == "needsLogin"


def test_declared_gigabyte_body(daemon):
    reply = raw_request(daemon.socket, b"POST /v1/pause HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\nxx")
    assert status_code(reply) == 413
    assert daemon.status()["pauseReason"] is None


def test_silent_client_is_dropped_and_others_served(daemon):
    idle = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(20)]
    for s in idle:
        s.connect(daemon.socket)
    try:
        t0 = time.monotonic()
        assert daemon.status()["state"] == "needsLogin"
        assert time.monotonic() - t0 < 5
        # The silent client gets a 408 within the request deadline and is closed.
        idle[0].settimeout(10)
        data = idle[0].recv(4096)
        assert status_code(data) == 408
    finally:
        for s in idle:
            s.close()


def test_slowloris(daemon):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(daemon.socket)
    s.settimeout(10)
    t0 = time.monotonic()
    closed = False
    try:
        for ch in b"GET /v1/status HTTP/1.1\r\nX-Slow: " + b"a" * 100:
            s.send(bytes([ch]))
            time.sleep(0.1)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    assert closed or time.monotonic() - t0 < 15
    s.close()
    assert daemon.status()["state"] == "needsLogin"


def test_many_concurrent_clients(daemon):
    results = []

    def one():
        try:
            r = raw_request(daemon.socket, b"GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
            results.append(status_code(r))
        except OSError as e:
            results.append(str(e))

    threads = [threading.Thread(target=one) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results.count(200) >= 150, results[:10]
    assert daemon.status()["state"] == "needsLogin"


def test_non_member_is_refused_with_group_hint(daemon):
    r = daemon.ctl("status", user="nobody")
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "users" in r.stderr  # names the group to join
    r = daemon.ctl("pause", user="nobody")
    assert r.returncode == 4


def test_member_may_read_but_not_write(daemon):
    r = daemon.ctl("status", "--json", user="nobody", groups="users")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["state"] == "needsLogin"
    for cmd in ["pause", "resume", "rescan", "retry", "logout"]:
        r = daemon.ctl(cmd, user="nobody", groups="users")
        assert r.returncode == 4, (cmd, r.stdout, r.stderr)
        assert "root" in r.stderr
    assert daemon.status()["pauseReason"] is None


def test_root_may_pause_and_resume_and_pause_survives_restart(daemon):
    r = daemon.ctl("pause")
    assert r.returncode == 0, r.stderr
    daemon.stop()
    daemon.start()
    s = daemon.status()
    assert daemon.ctl("status").returncode == 0
    r = daemon.ctl("resume")
    assert r.returncode == 0
