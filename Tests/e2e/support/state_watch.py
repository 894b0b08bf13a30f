"""What a daemon writes to its state directory while it should be idle (issue 25, "disks
left asleep"): inotify on the directory, every folder below it and every file in them
(IN_MODIFY, IN_CREATE, IN_DELETE, IN_MOVED_*, IN_ATTRIB), and the process's `write_bytes`
from /proc/PID/io, which also counts pages dirtied through a mapping (SQLite's -shm) that
inotify does not see. `bursts()` groups the events a second apart, as a disk would wake."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from inotify_simple import INotify, flags

MASK = (flags.MODIFY | flags.CREATE | flags.DELETE | flags.MOVED_FROM | flags.MOVED_TO | flags.ATTRIB
        | flags.DELETE_SELF | flags.MOVE_SELF)


def write_bytes(pid: int) -> int:
    """Bytes the process caused to be written to storage so far (dirtied page cache included)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/io has no write_bytes")


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding `path` (from /proc/self/mounts, longest mount point)."""
    path = Path(path).resolve()
    best, kind = "", "?"
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mount, fstype, *_ = line.split()
        mount = mount.replace("\\040", " ")
        if (str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")) and len(mount) > len(best):
            best, kind = mount, fstype
    return kind


class StateWatch:
    """Watches `state_dir` (recursively) and the process `pid` from `start()` to `stop()`."""

    def __init__(self, state_dir: Path, pid: int):
        self.state_dir, self.pid = Path(state_dir), pid
        self.inotify = INotify()
        self.paths: dict[int, Path] = {}
        self.events: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.bytes_before = self.bytes_after = 0
        self.started = self.stopped = 0.0

    def _watch(self, path: Path):
        try:
            wd = self.inotify.add_watch(str(path), MASK)
        except OSError:
            return  # gone meanwhile: its deletion is an event of its folder
        self.paths[wd] = path

    def start(self) -> "StateWatch":
        for root, dirs, files in os.walk(self.state_dir):
            self._watch(Path(root))
            for name in files:
                self._watch(Path(root) / name)
        self.bytes_before = write_bytes(self.pid)
        self.started = time.time()
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            for e in self.inotify.read(timeout=200):
                where = self.paths.get(e.wd, Path("?"))
                path = where / e.name if e.name else where
                names = [f.name for f in flags.from_mask(e.mask)]
                self.events.append({"time": time.time(), "path": str(path.relative_to(self.state_dir)
                                                                  if path.is_relative_to(self.state_dir) else path),
                                    "flags": names})
                if e.mask & flags.CREATE:
                    self._watch(path)

    def stop(self) -> "StateWatch":
        self.bytes_after = write_bytes(self.pid)
        self.stopped = time.time()
        self._stop.set()
        self._thread.join(5)
        self.inotify.close()
        return self

    @property
    def written(self) -> int:
        return self.bytes_after - self.bytes_before

    def bursts(self, gap: float = 1.0) -> list[list[dict]]:
        out: list[list[dict]] = []
        for e in self.events:
            if out and e["time"] - out[-1][-1]["time"] <= gap:
                out[-1].append(e)
            else:
                out.append([e])
        return out

    def report(self) -> str:
        lines = [f"{len(self.events)} events in {len(self.bursts())} bursts over {self.stopped - self.started:.0f} s, "
                 f"write_bytes +{self.written}"]
        for b in self.bursts():
            files = sorted({f"{e['path']} ({','.join(e['flags'])})" for e in b})
            lines.append(f"  +{b[0]['time'] - self.started:6.1f}s: " + "; ".join(files))
        return "\n".join(lines)
