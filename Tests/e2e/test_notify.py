"""The systemd notify protocol against a real AF_UNIX datagram socket set as
NOTIFY_SOCKET: READY only once the control socket accepts, WATCHDOG pings at half of
WATCHDOG_USEC, STATUS lines, RELOADING/READY around SIGHUP, STOPPING on SIGTERM."""
import signal
import socket
import time

import pytest

from support.daemon import Daemon, connectable


class NotifyListener:
    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.messages = []  # (time, text)

    def drain(self, until, on_message=None):
        end = time.monotonic() + until
        while time.monotonic() < end:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            msg = data.decode()
            self.messages.append((time.monotonic(), msg))
            if on_message and on_message(msg):
                return msg
        return None

    def all(self, key):
        return [(t, m) for t, m in self.messages if any(line.startswith(key) for line in m.splitlines())]


def test_ready_only_after_control_socket_accepts(tmp_path):
    n = NotifyListener(tmp_path / "notify")
    d = Daemon(tmp_path, env={"NOTIFY_SOCKET": n.path})
    d.start(wait=False)
    accepted_at_ready = []

    def on_message(msg):
        if "READY=1" in msg.splitlines():
            accepted_at_ready.append(connectable(d.socket))
            return True
        return False

    assert n.drain(20, on_message), "no READY=1"
    assert accepted_at_ready == [True]
    ready = n.all("READY=1")[0][1]
    assert any(line.startswith("STATUS=") for line in ready.splitlines())
    assert (d.state_dir / "queue.db").exists()

    # RELOADING=1 then READY=1 around a reload.
    d.signal(signal.SIGHUP)
    n.drain(3)
    reloading = n.all("RELOADING=1")
    assert reloading, n.messages
    assert any(line.startswith("MONOTONIC_USEC=") for line in reloading[0][1].splitlines())
    assert [t for t, _ in n.all("READY=1") if t > reloading[0][0]], "no READY=1 after RELOADING=1"

    # STOPPING=1 on SIGTERM, and a clean exit.
    d.signal(signal.SIGTERM)
    n.drain(3, lambda m: "STOPPING=1" in m.splitlines())
    assert n.all("STOPPING=1")
    assert d.proc.wait(15) == 0


# Alone: it measures the gaps between pings (< 0.9 s for a 0.5 s period).
@pytest.mark.alone
def test_watchdog_pings_at_half_the_interval(tmp_path):
    n = NotifyListener(tmp_path / "notify")
    d = Daemon(tmp_path, env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "1000000"})
    d.start(wait=False)
    n.drain(4.2)
    pings = n.all("WATCHDOG=1")
    d.stop()
    # 1 s watchdog → a ping every 0.5 s: about 8 in 4 s of running.
    assert len(pings) >= 5, n.messages
    gaps = [b - a for (a, _), (b, _) in zip(pings, pings[1:])]
    assert max(gaps) < 0.9, gaps


def test_no_watchdog_without_watchdog_usec(tmp_path):
    n = NotifyListener(tmp_path / "notify")
    d = Daemon(tmp_path, env={"NOTIFY_SOCKET": n.path})
    d.start(wait=False)
    n.drain(2)
    assert d.stop() == 0
    assert not n.all("WATCHDOG=1")
    assert n.all("READY=1")


def test_runs_silently_without_notify_socket(tmp_path):
    d = Daemon(tmp_path).start()
    assert d.status()["state"] == "needsLogin"
    assert d.stop() == 0
