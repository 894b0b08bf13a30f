"""The photolalad of the release before manifest format 2, for the upgrade tests of
test_manifest_sealed.py: commit 9958bab (main just before "Merge q-format2"), built from
this clone's history once per machine and reused.

    path = built_format1()    # PHOTOLALAD_FORMAT1_BIN if given, else the cached build

The build never touches the checkout: `git archive` of the commit into a cache directory
outside it (PHOTOLALA_FORMAT1_CACHE, default ~/.cache/photolala/format1-9958bab), this
checkout's Package.resolved copied beside it when there is one (the commit's Package.swift
names the same packages; it carries no Package.resolved), then `swift build --product
photolalad` (debug) there, its log in the run's output directory. The binary is copied to
`bin/photolalad` in the cache and marked complete; a later run takes it at once.

conftest.py starts the build in the background when the run collects those tests (while
the other suites run) and orders them late; a test that gets there first waits for it
under the same lock. A clone without the commit (a shallow one) skips the tests with the
reason; a failed build fails them with the tail of its log, once per run.
Environment:
    PHOTOLALAD_FORMAT1_BIN   use this binary instead of building one
    PHOTOLALA_FORMAT1_CACHE  where the source, its build and the binary are kept
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from .run import OUT_ENV, output_dir, spawn_build

REPO = Path(__file__).resolve().parents[3]
COMMIT = "9958babbd6d8499a087211e59caecad8572ee4f6"
ENV = "PHOTOLALAD_FORMAT1_BIN"
# A debug build from nothing takes about 5.5 min on 2 idle cores; niced beside the
# suites, much longer. The bound only catches a build that hangs.
WAIT_SECONDS = 45 * 60


class Unavailable(Exception):
    """The commit to build is not in this clone: the upgrade tests are skipped."""


def cache_dir() -> Path:
    given = os.environ.get("PHOTOLALA_FORMAT1_CACHE")
    if given:
        return Path(given).resolve()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "photolala" / f"format1-{COMMIT[:7]}"


def _binary() -> Path:
    return cache_dir() / "bin" / "photolalad"


def _complete() -> bool:
    return (cache_dir() / ".complete").exists() and _binary().is_file()


def needs_build() -> bool:
    """False when the binary is given or already cached: nothing to start in the background."""
    return not os.environ.get(ENV) and not _complete()


def check_commit() -> None:
    """Raises Unavailable unless this clone has the commit (a shallow clone does not)."""
    r = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{COMMIT}^{{commit}}"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        shallow = (subprocess.run(["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"],
                                  capture_output=True, text=True).stdout.strip() == "true")
        raise Unavailable(f"commit {COMMIT[:7]} (the format-1 release) is not in this clone"
                          f"{' (a shallow clone: fetch with --unshallow)' if shallow else ''}; "
                          f"set {ENV} to a photolalad of that release to run the upgrade tests")


def _tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def built_format1(wait: float = WAIT_SECONDS) -> Path:
    """The format-1 photolalad: PHOTOLALAD_FORMAT1_BIN, the cached build, or built now
    (waiting up to `wait` seconds for a build another process of the run holds)."""
    given = os.environ.get(ENV)
    if given:
        path = Path(given).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"{ENV}={given}: no such file")
        return path
    if _complete():
        return _binary()
    check_commit()
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    run_id = os.environ.get(OUT_ENV, "")
    with open(cache / ".lock", "w") as lock:
        # The background build of this run, or another run on this machine, may hold it.
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the format-1 build did not end within {wait:.0f} s; its log "
                                       f"({output_dir() / 'build-format1.log'}) ends:\n"
                                       f"{_tail(output_dir() / 'build-format1.log')}")
                time.sleep(2)
        if _complete():
            return _binary()
        failed = cache / "failed.json"
        try:
            last = json.loads(failed.read_text())
        except (FileNotFoundError, ValueError):
            last = {}
        if run_id and last.get("run") == run_id:
            # Built and failed already in this run: say so again rather than build again.
            raise RuntimeError(f"the format-1 build failed ({last['rc']}); {last['log']} ends:\n{_tail(Path(last['log']))}")
        failed.unlink(missing_ok=True)
        return _build(cache, run_id, failed)


def _build(cache: Path, run_id: str, failed: Path) -> Path:
    src = cache / "src"
    log = output_dir() / "build-format1.log"
    started = time.monotonic()
    with open(log, "w") as f:
        def step(cmd, **kw) -> int:
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kw).returncode
        rc = 0
        if not (src / ".extracted").exists():
            # A fresh tree; an extracted one keeps its .build (a build cut short goes on).
            shutil.rmtree(src, ignore_errors=True)
            src.mkdir(parents=True)
            rc = step(["sh", "-c", 'git -C "$1" archive "$2" | tar -x -C "$3"', "sh", str(REPO), COMMIT, str(src)])
            if rc == 0:
                if (REPO / "Package.resolved").is_file():
                    shutil.copy2(REPO / "Package.resolved", src / "Package.resolved")
                (src / ".extracted").touch()
        if rc == 0:
            rc = step(["swift", "build", "--package-path", str(src), "--product", "photolalad"])
        if rc == 0:
            bin_path = subprocess.run(["swift", "build", "--package-path", str(src), "--show-bin-path"],
                                      capture_output=True, text=True).stdout.strip()
            built = Path(bin_path) / "photolalad"
            if built.is_file():
                _binary().parent.mkdir(parents=True, exist_ok=True)
                tmp = _binary().with_suffix(".tmp")
                shutil.copy2(built, tmp)
                os.replace(tmp, _binary())
                (cache / ".complete").write_text(json.dumps({"commit": COMMIT, "seconds": round(time.monotonic() - started)}))
                f.write(f"built {_binary()} in {time.monotonic() - started:.0f} s\n")
                return _binary()
            rc = -1
            f.write(f"no photolalad at {built}\n")
    failed.write_text(json.dumps({"run": run_id, "rc": rc, "log": str(log)}))
    raise RuntimeError(f"the format-1 build failed ({rc}); {log} ends:\n{_tail(log)}")


def start_background_build():
    """Starts built_format1() in a process of its own (niced, paused while a test runs
    alone), so the build overlaps the other suites; None when there is nothing to build or
    the commit is missing (the tests then skip with the reason)."""
    if not needs_build():
        return None
    try:
        check_commit()
    except Unavailable:
        return None
    return spawn_build("format1", "built_format1", "build-format1-background.log")
