"""Abuse of a Unix-socket HTTP server, for the control-socket reliability suite. Run as a
script (usually under `setpriv`, so the daemon sees another uid) or call `run()`:

    python3 socket_abuse.py --socket PATH --mode MODE --seconds N [--connections N] [--seed N]

Modes (each keeps going until the time is up and prints one JSON line of counts):

    fuzz       random bytes, and requests broken in every way a parser can be
               (bad lines, bogus lengths, smuggling, NULs, HTTP/2 preface, 10,000 headers…)
    oversized  a 2 MB request line, 100,000 headers, 20 MB of body after a declared 1 GB
    slowloris  N connections, each sending one byte every second, reopened when closed
    flood      N connections opened at once and held silent, reopened when closed
    writes     every write call of the API (pause, resume, rescan, retry, logout, logins, verify),
               over and over; counts the status codes answered
    unread     N clients asking for the largest answer (the queue listing) and never reading it
    stream     N clients that send one request, never read the answer and then keep sending
               a never-ending second request head as fast as the daemon takes it
    busy       N clients that each ask for the largest answer (the queue listing), read it
               whole and ask again at once: valid requests, as many in flight as it can
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import select
import socket
import sys
import threading
import time
from collections import Counter


def connect(path: str, timeout: float = 5.0) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        return s
    except OSError:
        s.close()
        return None


def status_of(reply: bytes) -> str:
    if not reply:
        return "closed"
    if reply.startswith(b"HTTP/1.1 "):
        return reply[9:12].decode(errors="replace")
    return "garbage"


def exchange(path: str, data: bytes, read_timeout: float = 5.0) -> str:
    s = connect(path)
    if s is None:
        return "refused"
    try:
        try:
            s.sendall(data)
        except OSError:
            pass
        s.settimeout(read_timeout)
        chunks = []
        try:
            while True:
                c = s.recv(65536)
                if not c:
                    break
                chunks.append(c)
        except (socket.timeout, OSError):
            pass
        return status_of(b"".join(chunks))
    finally:
        s.close()


def fuzz_cases(rng: random.Random) -> list[bytes]:
    big_header = b"X-A: " + b"a" * 20_000 + b"\r\n"
    many = b"".join(b"X-%d: v\r\n" % i for i in range(10_000))
    return [
        rng.randbytes(rng.randint(1, 65536)),
        b"\x00" * 1000,
        b"GET /v1/status HTTP/1.1\r\n" + rng.randbytes(200) + b"\r\n\r\n",
        b"GET /v1/status\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + rng.randbytes(64),
        b"GET /v1/status\r\n\r\n",                                   # HTTP/0.9 style
        b"GET /v1/status HTTP/9.9\r\nHost: x\r\n\r\n",
        b"BREW /v1/status HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET " + b"/" * 8000 + b" HTTP/1.1\r\n\r\n",
        b"POST /v1/pause HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"POST /v1/pause HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        b"POST /v1/pause HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        b"POST /v1/pause HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        b"POST /v1/pause HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/pause HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n" + b"z" * 1000,
        b"POST /v1/login/identity-token HTTP/1.1\r\nContent-Length: 30\r\n\r\n{\"identityToken\": [1,2,3]}xxxx",
        b"POST /v1/login/identity-token HTTP/1.1\r\nContent-Length: 12\r\n\r\n" + rng.randbytes(12),
        b"GET /v1/queue?limit=-5&failed=%ZZ&" + b"a=b&" * 1000 + b" HTTP/1.1\r\n\r\n",
        b"GET /v1/queue?limit=99999999999999999999999 HTTP/1.1\r\n\r\n",
        b"GET /v1/status HTTP/1.1\r\n" + big_header + b"\r\n",
        b"GET /v1/status HTTP/1.1\r\n" + many + b"\r\n",
        b"GET /v1/status HTTP/1.1\r\n\r\n" * 50,                      # pipelined
        b"GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/status HTTP/1.1\r\nX: " + b"y" * 200_000,
        b"\r\n" * 5000,
        b"GET /v1/../../etc/passwd HTTP/1.1\r\n\r\n",
        b"GET /v1/status HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n",
    ]


def run_fuzz(path: str, seconds: float, seed: int, counts: Counter, stop: threading.Event):
    rng = random.Random(seed)
    while not stop.is_set():
        for case in fuzz_cases(rng):
            if stop.is_set():
                break
            counts["fuzz " + exchange(path, case, read_timeout=4)] += 1


def run_oversized(path: str, counts: Counter, stop: threading.Event):
    while not stop.is_set():
        line = b"GET /v1/status?" + b"a" * (2 << 20) + b" HTTP/1.1\r\n\r\n"
        counts["long-line " + exchange(path, line)] += 1
        headers = b"GET /v1/status HTTP/1.1\r\n" + b"".join(b"H%d: x\r\n" % i for i in range(100_000)) + b"\r\n"
        counts["100k-headers " + exchange(path, headers)] += 1
        s = connect(path)
        if s is None:
            counts["body refused"] += 1
            continue
        try:
            s.sendall(b"POST /v1/pause HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n")
            sent = 0
            chunk = b"b" * 65536
            while sent < 20 << 20 and not stop.is_set():
                s.sendall(chunk)
                sent += len(chunk)
            counts["big-body sent all"] += 1
        except OSError:
            counts["big-body cut off"] += 1
        finally:
            s.close()


def run_hold(path: str, n: int, trickle: bool, counts: Counter, stop: threading.Event):
    """n connections kept open; with trickle, one byte a second each (slowloris)."""
    conns: list[socket.socket] = []
    payload = b"GET /v1/status HTTP/1.1\r\nX-Slow: " + b"s" * 10_000
    pos: dict[int, int] = {}
    while not stop.is_set():
        while len(conns) < n and not stop.is_set():
            s = connect(path, timeout=2)
            if s is None:
                counts["connect failed"] += 1
                time.sleep(0.01)
                break
            s.setblocking(False)
            conns.append(s)
            counts["opened"] += 1
        if trickle:
            for s in list(conns):
                i = pos.get(s.fileno(), 0)
                try:
                    s.send(payload[i % len(payload):i % len(payload) + 1])
                    pos[s.fileno()] = i + 1
                except BlockingIOError:
                    pass
                except OSError:
                    conns.remove(s)
                    pos.pop(s.fileno(), None)
                    s.close()
                    counts["dropped by the daemon"] += 1
        # Reap connections the daemon closed.
        if conns:
            readable, _, _ = select.select(conns, [], [], 0)
            for s in readable:
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if not data or data.startswith(b"HTTP/1.1 "):
                    counts["answered " + status_of(data)] += 1
                    conns.remove(s)
                    pos.pop(s.fileno(), None)
                    s.close()
        stop.wait(1.0 if trickle else 0.05)
    counts["held at the end"] = len(conns)
    for s in conns:
        s.close()


WRITES = [
    b"POST /v1/pause HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    b"POST /v1/resume HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    b"POST /v1/rescan HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    b"POST /v1/retry HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    b"POST /v1/logout HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    b"POST /v1/login/device HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    b"DELETE /v1/login/device HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    b"POST /v1/verify HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
]


def run_writes(path: str, counts: Counter, stop: threading.Event, token: str | None):
    calls = list(WRITES)
    if token:
        body = json.dumps({"identityToken": token, "authorizationCode": "ac_attacker"}).encode()
        calls.append(b"POST /v1/login/identity-token HTTP/1.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    # Headers a confused server might trust.
    spoof = b"X-Forwarded-User: root\r\nX-Remote-User: root\r\nAuthorization: Bearer root\r\n"
    while not stop.is_set():
        for call in calls:
            head, _, rest = call.partition(b"\r\n")
            counts[head.split(b" ")[1].decode() + " " + exchange(path, head + b"\r\n" + spoof + rest)] += 1


def run_unread(path: str, n: int, counts: Counter, stop: threading.Event):
    conns = []
    while not stop.is_set():
        while len(conns) < n:
            s = connect(path)
            if s is None:
                counts["connect failed"] += 1
                break
            try:
                s.sendall(b"GET /v1/queue?limit=10000 HTTP/1.1\r\n\r\n")
                counts["asked"] += 1
            except OSError:
                counts["send failed"] += 1
            conns.append(s)
        # Never read; close those the daemon gave up on (they become readable at EOF
        # only after their buffered answer, so peek at the socket's state instead).
        for s in list(conns):
            try:
                r, _, x = select.select([], [], [s], 0)
            except (OSError, ValueError):
                r, x = [], [s]
            if x:
                conns.remove(s)
                s.close()
        stop.wait(0.5)
    counts["held at the end"] = len(conns)
    for s in conns:
        s.close()


def run_stream(path: str, n: int, counts: Counter, stop: threading.Event):
    chunk = b"y" * 65536

    def one():
        while not stop.is_set():
            s = connect(path)
            if s is None:
                counts["connect failed"] += 1
                stop.wait(0.1)
                continue
            try:
                s.sendall(b"GET /v1/queue?limit=10000 HTTP/1.1\r\n\r\nGET /v1/status HTTP/1.1\r\nX-Endless: ")
                s.settimeout(1.0)
                while not stop.is_set():
                    try:
                        s.sendall(chunk)
                        counts["bytes taken"] += len(chunk)
                    except socket.timeout:
                        counts["send blocked"] += 1
            except OSError:
                counts["closed by the daemon"] += 1
            finally:
                s.close()

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_busy(path: str, n: int, counts: Counter, stop: threading.Event):
    def one():
        while not stop.is_set():
            counts["busy " + exchange(path, b"GET /v1/queue?limit=10000 HTTP/1.1\r\nHost: x\r\n\r\n", read_timeout=30)] += 1

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run(path: str, mode: str, seconds: float, connections: int = 100, seed: int = 1,
        token: str | None = None) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    counts: Counter = Counter()
    stop = threading.Event()
    if mode == "fuzz":
        targets = [lambda i=i: run_fuzz(path, seconds, seed + i, counts, stop) for i in range(4)]
    elif mode == "oversized":
        targets = [lambda: run_oversized(path, counts, stop)]
    elif mode == "slowloris":
        targets = [lambda: run_hold(path, connections, True, counts, stop)]
    elif mode == "flood":
        targets = [lambda: run_hold(path, connections, False, counts, stop)]
    elif mode == "writes":
        targets = [lambda: run_writes(path, counts, stop, token) for _ in range(2)]
    elif mode == "stream":
        targets = [lambda: run_stream(path, connections, counts, stop)]
    elif mode == "unread":
        targets = [lambda: run_unread(path, connections, counts, stop)]
    elif mode == "busy":
        targets = [lambda: run_busy(path, connections, counts, stop)]
    else:
        raise ValueError(mode)
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join(30)
    return dict(counts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--token")
    a = ap.parse_args(argv)
    print(json.dumps(run(a.socket, a.mode, a.seconds, a.connections, a.seed, a.token)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
