"""What one pytest run shares between its xdist workers: the run's output directory, the
worker's own slice of TCP ports, and the lock that lets a test run alone.

- `output_dir()`: where a run writes what it produces (the reliability report, the
  .deb's build log…), never the checkout. `PHOTOLALA_TEST_OUT` names it; when unset the
  controlling process makes a temporary one (`start_run()`) and its workers inherit the
  variable. scripts/test prints it at the end.
- `free_port()`: a TCP port on 127.0.0.1 from a range below the kernel's ephemeral ports
  (so no `bind(0)` or outgoing connection of another process takes it between our check
  and the server's bind), split between the workers so two workers never pick the same.
- `MachineLock`: every test holds it shared while it runs; a test marked
  `@pytest.mark.alone` (it measures timing, CPU, memory or idleness, which other tests
  running at once would distort) holds it exclusively, so it runs with no other test of
  this run beside it, and the run's background work (the .deb's build, registered with
  `register_background()`) is stopped (SIGSTOP) meanwhile. A turnstile keeps the waiting
  exclusive holder from being starved by a stream of shared ones.
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import random
import signal
import socket
import tempfile
import time
from pathlib import Path

OUT_ENV = "PHOTOLALA_TEST_OUT"


def worker_id() -> str:
    """"gw0", "gw1"… under xdist; "master" when pytest runs alone."""
    return os.environ.get("PYTEST_XDIST_WORKER", "master")


def worker_count() -> int:
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def start_run() -> Path:
    """In the controlling process, before the workers start: the run's output directory
    (made when PHOTOLALA_TEST_OUT does not name one), exported to the workers."""
    given = os.environ.get(OUT_ENV)
    if given:
        out = Path(given).resolve()
        out.mkdir(parents=True, exist_ok=True)
    else:
        out = Path(tempfile.mkdtemp(prefix="photolala-e2e-"))
    os.environ[OUT_ENV] = str(out)
    return out


def output_dir() -> Path:
    out = os.environ.get(OUT_ENV)
    if not out:  # imported outside a pytest run (a script): one directory per process
        out = str(start_run())
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    return path


_LIBC = ctypes.CDLL(None, use_errno=True)   # loaded here: nothing may be dlopen()ed between fork and exec


def die_with_parent() -> None:
    """A Popen preexec_fn: SIGTERM when the process that started it dies, however it dies
    (a worker killed mid-run), so no server of a dead run lingers."""
    _LIBC.prctl(1, signal.SIGTERM, 0, 0, 0)   # PR_SET_PDEATHSIG


# ---- ports --------------------------------------------------------------------------

_PORT_LOW = 20000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, from this worker's slice of
    [20000, start of the ephemeral range). Random within the slice, so consecutive runs
    (and a server that lingers in TIME_WAIT) rarely meet."""
    high = max(_ephemeral_low(), _PORT_LOW + 1000)
    n = max(worker_count(), 1)
    wid = worker_id()
    index = int(wid[2:]) if wid.startswith("gw") and wid[2:].isdigit() else 0
    span = (high - _PORT_LOW) // n
    low = _PORT_LOW + (index % n) * span
    ports = list(range(low, low + span))
    random.shuffle(ports)
    for port in ports[:500]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    # Every port tried was taken (not expected): fall back to the kernel's choice.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- running alone ------------------------------------------------------------------

def _background_file() -> Path:
    return output_dir() / ".background-pgids"


def register_background(pgid: int) -> None:
    """A process group of this run's background work, paused while a test runs alone."""
    with open(_background_file(), "a") as f:
        f.write(f"{pgid}\n")


def spawn_build(module: str, function: str, log_name: str):
    """Runs `support.<module>.<function>()` in a process group of its own, niced (the
    suites running meanwhile time things; the build takes what they leave), logging to
    `log_name` in the run's output directory. It dies with the controller
    (PR_SET_PDEATHSIG), kills its whole group on SIGTERM, and is paused while a test runs
    alone. Returns the Popen."""
    import subprocess
    import sys
    code = ("import os, signal, sys; sys.path.insert(0, sys.argv[1]); os.nice(10);"
            "signal.signal(signal.SIGTERM, lambda *_: os.killpg(0, signal.SIGKILL));"
            f"from support.{module} import {function}; {function}()")
    log = open(output_dir() / log_name, "ab")
    try:
        proc = subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).resolve().parents[1])],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=die_with_parent)
    finally:
        log.close()
    register_background(proc.pid)
    return proc


def signal_background(sig: int) -> None:
    try:
        pgids = [int(x) for x in _background_file().read_text().split()]
    except (FileNotFoundError, ValueError):
        return
    for pgid in pgids:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass


class MachineLock:
    """Shared for an ordinary test, exclusive for one that must run alone; no lock when
    the run has one process (no other test runs beside it anyway). Consecutive alone tests
    keep the exclusive lock from one to the next (`leave(keep=True)`), so they run as
    one block instead of each waiting again for the tests that slipped in between."""

    STEPPED_OUT = ".stepped-out"
    # How long the first alone test waits for a test that will step out (its setup took
    # about 60 s when measured; a failed setup writes the mark too, on the way out).
    STEP_OUT_WAIT = 300.0

    def __init__(self):
        self._turnstile = self._machine = None
        self._held: str | None = None    # None, "shared" or "alone"
        # Set when the run holds a test that steps out (the idle watch): the first alone
        # test lets it set up first, else it would wait for the whole alone block.
        self.awaits_step_out = False

    def _active(self) -> bool:
        return worker_count() > 1 and bool(os.environ.get(OUT_ENV))

    def enter(self, alone: bool) -> None:
        if self._held == "alone":
            return
        if self._active():
            out = output_dir()
            if alone and self.awaits_step_out:
                self.awaits_step_out = False
                deadline = time.monotonic() + self.STEP_OUT_WAIT
                while not (out / self.STEPPED_OUT).exists() and time.monotonic() < deadline:
                    time.sleep(0.5)
            self._turnstile = open(out / ".turnstile.lock", "a")
            self._machine = open(out / ".machine.lock", "a")
            fcntl.flock(self._turnstile, fcntl.LOCK_EX)
            try:
                fcntl.flock(self._machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            except BaseException:
                self._close()
                raise
            if not alone:
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self._held = "alone" if alone else "shared"
        if alone:
            signal_background(signal.SIGSTOP)

    def leave(self, keep: bool = False) -> None:
        if self._held is None or (keep and self._held == "alone"):
            return
        if self._held == "alone":
            signal_background(signal.SIGCONT)
        self._close()

    def step_out(self) -> None:
        """An ordinary test that from here on only waits (its own daemon idle) lets the
        alone tests run beside it: it drops its shared lock for the rest of the test."""
        if self._held == "shared":
            self._close()
        self.mark_stepped_out()

    def mark_stepped_out(self) -> None:
        """Tells a waiting alone test that the test it waits for is out of its way."""
        if self._active():
            (output_dir() / self.STEPPED_OUT).touch()

    def _close(self) -> None:
        for f in (self._machine, self._turnstile):
            if f is not None:
                f.close()   # closing drops the flock
        self._turnstile = self._machine = None
        self._held = None
