"""Moments to kill -9 a daemon at, for the crash suite: a photo open for reading (hashing),
the queue database's WAL just written (a transaction in progress), and an S3 answer just
handed to the daemon (through FaultProxy.on_response). Each waits for its moment and kills
at once from the thread that saw it, so the daemon gets no time to record what happened."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import signal
import struct
import threading
import time
from pathlib import Path

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
IN_MODIFY = 0x00000002
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000


def kill9(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def open_photo(pid: int, under: Path) -> str | None:
    """A regular file under `under` the process has open now, if any."""
    prefix = str(under) + "/"
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(prefix):
                return target
    except OSError:
        return None
    return None


def kill_when_reading(pid: int, under: Path, timeout: float) -> str | None:
    """Kills `pid` the moment it has a file under `under` open; returns that file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = open_photo(pid, under)
        if path and kill9(pid):
            return path
        time.sleep(0.0005)
    return None


def kill_on_db_write(pid: int, state_dir: Path, timeout: float, skip: int = 0) -> bool:
    """Kills `pid` as soon as its queue database's WAL (or the database file, during a
    checkpoint) is modified, after letting `skip` modifications pass: mid-transaction
    more often than not, since a commit is several writes."""
    fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    try:
        if _libc.inotify_add_watch(fd, str(state_dir).encode(), IN_MODIFY) < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch")
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                continue
            data = os.read(fd, 65536)
            offset = 0
            while offset < len(data):
                _wd, _mask, _cookie, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16: offset + 16 + length].split(b"\0", 1)[0].decode(errors="replace")
                offset += 16 + length
                if name.startswith("queue.db"):
                    seen += 1
                    if seen > skip:
                        return kill9(pid)
        return False
    finally:
        os.close(fd)


IN_CREATE = 0x00000100
IN_MOVED_TO = 0x00000080


def kill_on_file(pid: int, directory: Path, name: str, mask: int, timeout: float, skip: int = 0) -> bool:
    """Kills `pid` the moment `name` in `directory` sees an event of `mask` (IN_CREATE: a
    file made; IN_MOVED_TO: a file renamed into place), after letting `skip` such events
    pass: a state file's atomic replacement is a create of its temporary name, then a
    rename, so the kill lands between the steps of a write sequence."""
    fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    try:
        if _libc.inotify_add_watch(fd, str(directory).encode(), mask) < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch")
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            data = os.read(fd, 65536)
            offset = 0
            while offset < len(data):
                _wd, event, _cookie, length = struct.unpack_from("iIII", data, offset)
                got = data[offset + 16: offset + 16 + length].split(b"\0", 1)[0].decode(errors="replace")
                offset += 16 + length
                if got == name and event & mask:
                    seen += 1
                    if seen > skip:
                        return kill9(pid)
        return False
    finally:
        os.close(fd)


class ResponseTrigger:
    """Kills `pid` right after the proxy has handed the daemon a 2xx answer to a request
    `match` accepts (once; then disarms)."""

    def __init__(self, proxy, pid: int, match):
        self.proxy, self.pid, self.match = proxy, pid, match
        self.fired = threading.Event()
        self.request: dict | None = None
        self.armed = True
        proxy.on_response = self._seen

    def _seen(self, r: dict):
        if not self.armed or self.fired.is_set() or not (200 <= (r["status"] or 0) < 300) or not self.match(r):
            return
        self.request = r
        kill9(self.pid)
        self.fired.set()

    def wait(self, timeout: float) -> bool:
        try:
            return self.fired.wait(timeout)
        finally:
            self.armed = False
            self.proxy.on_response = None
