"""The benchmark's shaping proxy (support/shaper.py) does what its figures claim: the
uplink's rate, shared by connections, and the round trip it adds. Lower bounds are the
proxy's promise; upper bounds are loose (a busy CI machine only makes things slower)."""
from __future__ import annotations

import socket
import socketserver
import threading
import time

import pytest

from support.shaper import Shaper


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while data := self.request.recv(65536):
            if data.startswith(b"count"):
                self.server.received = 0
            self.server.received = getattr(self.server, "received", 0) + len(data)
            if data.endswith(b"?"):
                self.request.sendall(b"!")


@pytest.fixture
def echo():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _round_trips(port: int, n: int) -> float:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.monotonic()
        for _ in range(n):
            s.sendall(b"ping?")
            assert s.recv(1) == b"!"
        return time.monotonic() - t0


def test_each_round_trip_takes_the_added_delay(echo):
    shaper = Shaper(echo.server_address[1], rtt_ms=40, up_mbit=0).start()
    try:
        elapsed = _round_trips(shaper.port, 10)
        assert 0.40 <= elapsed < 0.9, f"10 round trips at 40 ms took {elapsed:.3f} s"
    finally:
        shaper.stop()
    # Without the proxy the same exchange is a loopback's: the delay is the proxy's.
    assert _round_trips(echo.server_address[1], 10) < 0.1


def test_the_uplink_rate_is_shared_by_every_connection(echo):
    # 10 Mbit/s up: 2.5 MB over two connections at once takes 2 s, not 1.
    shaper = Shaper(echo.server_address[1], rtt_ms=10, up_mbit=10).start()
    try:
        block = b"x" * (1 << 16)

        def send(total: int):
            with socket.create_connection(("127.0.0.1", shaper.port)) as s:
                for _ in range(total // len(block)):
                    s.sendall(block)
                s.sendall(b"?")
                assert s.recv(1) == b"!"

        t0 = time.monotonic()
        threads = [threading.Thread(target=send, args=(1_250_000 // len(block) * len(block),)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        elapsed = time.monotonic() - t0
        st = shaper.stats()
        assert st["connections"] == 2
        up = st["up"]
        rate = up["bytes"] * 8 / (up["last"] - up["first"]) / 1e6
        # Never above the rate; below it only when the proxy was kept from reading (load).
        assert 8.0 <= rate <= 10.05, f"the uplink carried {rate:.2f} Mbit/s"
        assert 1.95 <= elapsed < 4.0, f"2.5 MB at 10 Mbit/s took {elapsed:.2f} s"
    finally:
        shaper.stop()


def test_a_sender_is_held_back_instead_of_filling_buffers(echo):
    # 4 Mbit/s up, a 50 ms queue: after 0.5 s a sender cannot have handed over much more
    # than the line carried (about 250 kB) plus the queue and small socket buffers.
    shaper = Shaper(echo.server_address[1], rtt_ms=0, up_mbit=4, queue_ms=50).start()
    try:
        with socket.create_connection(("127.0.0.1", shaper.port)) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 10)
            s.setblocking(False)
            handed = 0
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.5:
                try:
                    handed += s.send(b"y" * 65536)
                except BlockingIOError:
                    time.sleep(0.005)
            assert handed < 1_000_000, f"{handed} bytes accepted in 0.5 s at 4 Mbit/s"
    finally:
        shaper.stop()
