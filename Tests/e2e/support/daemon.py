"""Runs the real photolalad binary for process-level tests: writes a config into a
temporary folder, starts the daemon, waits until its control socket answers, and
offers `ctl()` to run photolalactl against it. Logs are kept so every test can scan
them for secrets."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def binary() -> str:
    path = os.environ.get("PHOTOLALAD_BIN") or str(REPO / ".build" / "debug" / "photolalad")
    if not os.path.exists(path):
        raise RuntimeError(f"photolalad binary not found at {path}: run `swift build` first or set PHOTOLALAD_BIN")
    return path


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(str(v))


def render_config(sections: dict) -> str:
    out = []
    for name, keys in sections.items():
        out.append(f"[{name}]")
        for k, v in keys.items():
            out.append(f"{k} = {toml_value(v)}")
        out.append("")
    return "\n".join(out)


class Daemon:
    """One photolalad process in its own temporary world."""

    def __init__(self, root: Path, config: dict | None = None, env: dict | None = None, name: str = "d"):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.photos = self.root / "photos"
        self.photos.mkdir(exist_ok=True)
        self.state_dir = self.root / "state"
        # The socket lives in a world-traversable folder so tests can connect as other users.
        sock_dir = tempfile.mkdtemp(prefix="pl-sock-")
        os.chmod(sock_dir, 0o755)
        self.socket = os.path.join(sock_dir, f"{name}.sock")
        self.config_path = self.root / f"{name}.toml"
        self.log_path = self.root / f"{name}.log"
        self.sections = {
            "watch": {"folders": [str(self.photos)], "settle": "1s"},
            "daemon": {"state_dir": str(self.state_dir), "socket": self.socket,
                       "socket_group": "users", "log_level": "debug"},
            # The status page listens on 127.0.0.1:8770 by default: test daemons run side
            # by side, so each that wants the page names a free port (test_web.py).
            "web": {"listen": "off"},
        }
        for section, keys in (config or {}).items():
            self.sections.setdefault(section, {}).update(keys)
        self.extra_env = env or {}
        # Extra subprocess.Popen arguments (cwd, preexec_fn…) for tests that need them.
        self.popen_kwargs: dict = {}
        self.proc: subprocess.Popen | None = None
        # Another photolalad (an earlier release, for the upgrade tests); None: binary().
        self.binary: str | None = None
        self._log = None
        self.write_config()

    def write_config(self, text: str | None = None):
        self.config_path.write_text(text if text is not None else render_config(self.sections))

    def start(self, wait: bool = True, timeout: float = 20.0):
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        env.pop("WATCHDOG_USEC", None)
        env.update(self.extra_env)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([self.binary or binary(), "--config", str(self.config_path)],
                                     stdout=self._log, stderr=subprocess.STDOUT, env=env, **self.popen_kwargs)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError(f"photolalad exited with {self.proc.returncode}:\n{self.log()}")
            if connectable(self.socket):
                return
            time.sleep(0.05)
        raise TimeoutError(f"photolalad did not listen on {self.socket} within {timeout}s:\n{self.log()}")

    def ctl(self, *args, user: str | None = None, groups: str | None = None, timeout: float = 60, check: bool = False,
            input: str | None = None):
        cmd = [self.binary or binary(), "ctl", *args, "--socket", self.socket]
        if user:
            prefix = ["setpriv", f"--reuid={user}", f"--regid={user if user != 'nobody' else 'nogroup'}"]
            prefix += [f"--groups={groups}"] if groups else ["--clear-groups"]
            cmd = prefix + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}")
        return r

    def status(self) -> dict:
        r = self.ctl("status", "--json", check=True)
        return json.loads(r.stdout)

    def wait_for(self, predicate, timeout: float = 60.0, interval: float = 0.2, what: str = "condition"):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.status()
            except AssertionError as e:
                # photolalactl's own deadline passed on a machine too loaded to answer in
                # time: not yet, ask again (the daemon's death still fails at once).
                if "did not answer in time" not in str(e) or self.proc.poll() is not None:
                    raise
                time.sleep(interval)
                continue
            if predicate(last):
                return last
            time.sleep(interval)
        raise TimeoutError(f"timed out waiting for {what}; last status: {json.dumps(last, indent=1)}\nlog tail:\n{self.log()[-4000:]}")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self._log:
                self._log.close()

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._log:
            self._log.close()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def connectable(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(1)
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def raw_request(path: str, data: bytes, read: bool = True, timeout: float = 10.0) -> bytes:
    """Sends raw bytes to the control socket and returns whatever comes back."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    try:
        if data:
            s.sendall(data)
        if not read:
            return b""
        chunks = []
        while True:
            try:
                c = s.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                break
            if not c:
                break
            chunks.append(c)
        return b"".join(chunks)
    finally:
        s.close()
