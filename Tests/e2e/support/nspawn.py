"""The packaging test harness: builds the .deb and the container image once per test
session, and runs them in root file systems made with mmdebstrap under systemd-nspawn:
Debian 12 and 13 booted with a real systemd to install the .deb into, and the image's own
root file system run as a container engine would run it.

    deb = built_deb()                     # scripts/build-deb, once per run
    with Container.boot(tmp_dir, deb=deb.path, suite="trixie") as ct:
        ct.install_deb(deb.path)
        ct.run("systemctl is-enabled photolalad")           # -> CompletedProcess
        ct.run(["photolalactl", "status"], user="alice")
        ct.run_in_container("...")                          # the same as run()

    image = built_image()                 # scripts/build-image, once per run
    with ImageContainer.start(tmp_dir, image, binds={...}, env={...}) as c:
        c.run(["photolalactl", "status"])  # inside, through nsenter
        c.terminate()                      # SIGTERM to PID 1, as docker stop

The container shares the host's network namespace, so a server on the host's
loopback (moto, the fake backend) is reachable from inside at 127.0.0.1.
Commands run through nsenter as root (or, with user=, through setpriv with that
user's groups) with a clean environment; their output comes back as the result.

The roots are cached outside the repo (PHOTOLALA_NSPAWN_CACHE, default
/var/cache/photolala-test-root), keyed by release and package list, so only the first
run on a machine pays for mmdebstrap (one to three minutes each); the packages it
downloads are kept in ~/.cache/photolala/apt-archives/ for the next key.
The .deb is built outside the checkout (a test run leaves the checkout as it found
it): into PHOTOLALA_DEB_OUT, default ~/.cache/photolala/build-deb/<checkout's hash>
(removed by a later run once its checkout is gone, as the image's folder is),
which keeps the staging tree's incremental Swift build between runs; its log goes to
the run's output directory. What it made is kept by the content of what went into it
(~/.cache/photolala/deb/<hash of every file scripts/build-deb stages but Tests/, docs/,
the top-level Markdown and scripts/ other than build-deb, and the toolchain's version>): a run of a tree already packaged, from any clone,
takes that .deb instead of a release build of several minutes. The image goes to ~/.cache/photolala/build-image/<checkout's
hash>, its Debian layer cached by scripts/build-image. Once per run, not per xdist
worker: the first worker to ask builds under a lock, the others take its result.
Environment:
    PHOTOLALA_DEB            use this .deb instead of building one (iterating)
    PHOTOLALA_IMAGE          use this OCI archive instead of building one
    PHOTOLALA_DEB_OUT        where scripts/build-deb puts the .debs and its staging tree
    PHOTOLALA_DEBIAN_MIRROR  the mirror for mmdebstrap (default: deb.debian.org)
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .run import OUT_ENV, output_dir, spawn_build

REPO = Path(__file__).resolve().parents[3]
SUITE = "bookworm"
SUITES = {"bookworm": "Debian 12", "trixie": "Debian 13"}
# systemd to boot, and acl and procps for the tests; cached_root(deb) adds what the
# .deb's Depends name, so that installing it needs no network.
ROOT_PACKAGES = ["systemd", "systemd-sysv", "dbus", "acl", "procps"]
CACHE = Path(os.environ.get("PHOTOLALA_NSPAWN_CACHE", "/var/cache/photolala-test-root"))
CLEAN_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
    "SYSTEMD_PAGER": "",
    "SYSTEMD_COLORS": "0",
    "DEBIAN_FRONTEND": "noninteractive",
}


class Unavailable(Exception):
    """A prerequisite of the container tests that this machine truly lacks."""


# ---------------------------------------------------------------------------
# The .deb


@dataclass(frozen=True)
class BuiltDeb:
    path: Path
    dbgsym: Path | None
    seconds: float
    log: Path

    @property
    def outdir(self) -> Path:
        return self.path.parent


def deb_out_dir() -> Path:
    given = os.environ.get("PHOTOLALA_DEB_OUT")
    if given:
        return Path(given).resolve()
    return checkout_dir("build-deb")


def checkout_dir(kind: str) -> Path:
    """~/.cache/photolala/KIND/<checkout's hash>, made if needed, with a note of the
    checkout it belongs to. The ones whose checkout is gone (a clean clone tested, then
    removed: a staging tree with its Swift build, 1–2 GB) are removed, unless a run still
    holds their lock; one without a note (made before there were notes) is left alone."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    parent = cache / "photolala" / kind
    here = parent / hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    here.mkdir(parents=True, exist_ok=True)
    note = here / "checkout"
    if not note.is_file() or note.read_text().strip() != str(REPO):
        note.write_text(f"{REPO}\n")
    for other in parent.iterdir():
        if other == here or not other.is_dir():
            continue
        try:
            owner = (other / "checkout").read_text().strip()
        except OSError:
            continue
        if not owner or Path(owner).is_dir():
            continue
        try:
            with open(other / ".lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(other, ignore_errors=True)
        except OSError:
            continue   # in use (a run from that checkout before it went), or already gone
    return here


@functools.cache
def built_deb() -> BuiltDeb:
    """scripts/build-deb, once per run (both test modules, on any worker, share it)."""
    given = os.environ.get("PHOTOLALA_DEB")
    if given:
        path = Path(given).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"PHOTOLALA_DEB={given}: no such file")
        ddebs = sorted(path.parent.glob("photolalad-dbgsym_*.deb"))
        return BuiltDeb(path, ddebs[-1] if ddebs else None, 0.0, path.parent / "build.log")
    out = deb_out_dir()
    out.mkdir(parents=True, exist_ok=True)
    run_id = os.environ.get(OUT_ENV, "")
    with open(out / ".lock", "w") as lock:
        # Another worker of this run, or another run from this checkout, may be building.
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = out / "built.json"
        try:
            last = json.loads(done.read_text())
        except (FileNotFoundError, ValueError):
            last = {}
        if run_id and last.get("run") == run_id and Path(last.get("path", "")).is_file():
            return BuiltDeb(Path(last["path"]), Path(last["dbgsym"]) if last.get("dbgsym") else None,
                            last["seconds"], Path(last["log"]))
        done.unlink(missing_ok=True)
        key = deb_content_key()
        kept = kept_deb(key)
        if kept:
            done.write_text(json.dumps({"run": run_id, "path": str(kept.path), "seconds": kept.seconds,
                                        "log": str(kept.log), "dbgsym": str(kept.dbgsym) if kept.dbgsym else None}))
            return kept
        log = output_dir() / "build-deb.log"
        start = time.monotonic()
        with open(log, "w") as f:
            proc = subprocess.run([str(REPO / "scripts" / "build-deb"), "--out", str(out)],
                                  stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        seconds = time.monotonic() - start
        text = log.read_text(errors="replace")
        if proc.returncode != 0:
            tail = "\n".join(text.splitlines()[-60:])
            raise RuntimeError(f"scripts/build-deb failed (exit {proc.returncode}); {log}:\n{tail}")
        path = Path(text.strip().splitlines()[-1])
        ddebs = sorted(out.glob("photolalad-dbgsym_*.deb"))
        deb = keep_deb(key, BuiltDeb(path, ddebs[-1] if ddebs else None, seconds, log))
        done.write_text(json.dumps({"run": run_id, "path": str(deb.path), "seconds": seconds, "log": str(log),
                                    "dbgsym": str(deb.dbgsym) if deb.dbgsym else None}))
        return deb


DEB_KEPT = 3   # packaged trees kept (the newest by use)


def deb_content_key() -> str:
    """What the .deb is made of: every file scripts/build-deb stages (git's tracked and
    not-ignored files, as they are on disk now) but the tests, the docs, the top-level
    Markdown and the scripts other than build-deb, none of which debian/rules reads or
    installs; and the Swift toolchain that compiles them."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True).stdout.split(b"\0")
    h = hashlib.sha256()
    swift = Path(os.environ.get("SWIFT_BIN", "/opt/swift/usr/bin")) / "swift"
    h.update(subprocess.run([str(swift), "--version"], capture_output=True).stdout)
    h.update(os.environ.get("DEB_BUILD_OPTIONS", "").encode() + b"\0")
    for name in sorted(set(n for n in listed if n)):
        if name.startswith((b"Tests/", b"docs/")) or (name.endswith(b".md") and b"/" not in name) \
                or (name.startswith(b"scripts/") and name != b"scripts/build-deb"):
            continue
        path = REPO / os.fsdecode(name)
        if path.is_symlink():
            body = b"link:" + os.fsencode(os.readlink(path))
        elif path.is_file():
            body = path.read_bytes()
        else:
            continue   # listed but deleted: build-deb skips it too
        h.update(name + b"\0" + hashlib.sha256(body).digest() + (b"x" if os.access(path, os.X_OK) else b"-"))
    return h.hexdigest()[:16]


def deb_kept_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "photolala" / "deb"


def kept_deb(key: str) -> BuiltDeb | None:
    """The .deb made earlier of exactly these files, if one is kept."""
    here = deb_kept_dir() / key
    try:
        record = json.loads((here / "built.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    deb = BuiltDeb(here / record["deb"], here / record["dbgsym"] if record.get("dbgsym") else None,
                   record["seconds"], here / "build-deb.log")
    if not deb.path.is_file() or (deb.dbgsym and not deb.dbgsym.is_file()):
        return None
    os.utime(here)   # the newest by use stays
    return deb


def keep_deb(key: str, deb: BuiltDeb) -> BuiltDeb:
    """Copies a fresh build under its key (complete or not at all), drops the oldest kept
    beyond DEB_KEPT, and returns the kept copy: the staging directory's .deb is replaced
    by the next build from this checkout, the kept one is not."""
    root = deb_kept_dir()
    root.mkdir(parents=True, exist_ok=True)
    here = root / key
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    for f in [deb.path, deb.dbgsym, deb.log]:
        if f:
            shutil.copy2(f, staging / (f.name if f != deb.log else "build-deb.log"))
    (staging / "built.json").write_text(json.dumps({"deb": deb.path.name, "dbgsym": deb.dbgsym.name if deb.dbgsym else None,
                                                     "seconds": deb.seconds}))
    shutil.rmtree(here, ignore_errors=True)
    os.rename(staging, here)
    kept = sorted((d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")),
                  key=lambda d: d.stat().st_mtime, reverse=True)
    for old in kept[DEB_KEPT:]:
        shutil.rmtree(old, ignore_errors=True)
    return kept_deb(key) or deb


def start_background_build() -> subprocess.Popen | None:
    """Starts build_artefacts() in a process of its own, so the .deb (a release build:
    minutes), the image and the Debian roots are made while the other suites run; the
    first test that needs one then waits only for what is left (each takes the same lock
    as here). Called once per run by the controlling process; `stop_background_build()`
    ends it. The build is its own process group, which dies with the controller
    (PR_SET_PDEATHSIG)."""
    return spawn_build("nspawn", "build_artefacts", "build-deb-background.log")


def build_artefacts() -> None:
    """The .deb, then the Debian 12 root the first suite boots, the image, and the Debian
    13 root: in the order the suites ask for them."""
    deb = built_deb()
    cached_root(deb.path, "bookworm")
    built_image()
    cached_root(deb.path, "trixie")


def stop_background_build(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


# ---------------------------------------------------------------------------
# The container image


@dataclass(frozen=True)
class BuiltImage:
    oci: Path
    docker: Path
    seconds: float
    log: Path


def image_out_dir() -> Path:
    return checkout_dir("build-image")


@functools.cache
def built_image() -> BuiltImage:
    """scripts/build-image of this run's .deb, once per run (on any worker)."""
    given = os.environ.get("PHOTOLALA_IMAGE")
    if given:
        path = Path(given).resolve()
        return BuiltImage(path, path.with_name(path.name.replace(".oci.tar", ".docker.tar")), 0.0, path.parent / "build.log")
    deb = built_deb()
    out = image_out_dir()
    out.mkdir(parents=True, exist_ok=True)
    run_id = os.environ.get(OUT_ENV, "")
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = out / "built.json"
        try:
            last = json.loads(done.read_text())
        except (FileNotFoundError, ValueError):
            last = {}
        if run_id and last.get("run") == run_id and Path(last.get("oci", "")).is_file():
            return BuiltImage(Path(last["oci"]), Path(last["docker"]), last["seconds"], Path(last["log"]))
        done.unlink(missing_ok=True)
        log = output_dir() / "build-image.log"
        start = time.monotonic()
        with open(log, "w") as f:
            proc = subprocess.run([str(REPO / "scripts" / "build-image"), "--deb", str(deb.path), "--out", str(out)],
                                  stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        seconds = time.monotonic() - start
        text = log.read_text(errors="replace")
        if proc.returncode != 0:
            tail = "\n".join(text.splitlines()[-60:])
            raise RuntimeError(f"scripts/build-image failed (exit {proc.returncode}); {log}:\n{tail}")
        oci = Path(text.strip().splitlines()[-1])
        image = BuiltImage(oci, oci.with_name(oci.name.replace(".oci.tar", ".docker.tar")), seconds, log)
        done.write_text(json.dumps({"run": run_id, "oci": str(image.oci), "docker": str(image.docker),
                                    "seconds": seconds, "log": str(log)}))
        return image


def unpack_image(archive: Path, dest: Path) -> tuple[Path, dict]:
    """The image's root file system (its layers applied in order, as a container engine
    does) and its OCI configuration, from the archive, with umoci."""
    dest = Path(dest)
    layout = dest / "layout"
    bundle = dest / "bundle"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    subprocess.run(["skopeo", "copy", "--quiet", f"oci-archive:{archive}", f"oci:{layout}:image"], check=True)
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:image", str(bundle)], check=True,
                   capture_output=True, text=True)
    config = json.loads(subprocess.run(["skopeo", "inspect", "--config", f"oci-archive:{archive}"],
                                       check=True, capture_output=True, text=True).stdout)
    shutil.rmtree(layout, ignore_errors=True)
    return bundle / "rootfs", config


# ---------------------------------------------------------------------------
# The cached Debian root


def _mirror() -> str:
    return os.environ.get("PHOTOLALA_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def deb_depends(deb: Path) -> list[str]:
    """The .deb's Depends as packages mmdebstrap can include on any release: a name, or
    for alternatives an apt pattern that takes whichever of them the release has
    (Debian 13's t64 libraries or Debian 12's), versions left out."""
    out = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True, text=True, check=True).stdout
    packages = []
    for dep in out.split(","):
        names = [re.sub(r"\s*\(.*\)", "", alt).strip() for alt in dep.split("|") if alt.strip()]
        if len(names) == 1:
            packages.append(names[0])
        elif set(names) & set(ROOT_PACKAGES):
            continue   # `systemd | systemd-standalone-sysusers`: the root has systemd (the pattern would take both)
        elif names:
            packages.append("?or(" + ",".join(f"?exact-name({n})" for n in names) + ")")
    return packages


def apt_archives(suite: str) -> Path:
    """Where the packages mmdebstrap downloaded for `suite` are kept for the next root."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = cache / "photolala" / "apt-archives" / suite
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached_root(deb: Path | None = None, suite: str = SUITE) -> Path:
    """A Debian root with systemd (and the .deb's dependencies) made by mmdebstrap, once
    per machine, release and package list, and reused."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite}: one of {', '.join(SUITES)}")
    packages = sorted(set(ROOT_PACKAGES + (deb_depends(deb) if deb else [])))
    key = hashlib.sha256(f"{suite} mmdebstrap minbase {' '.join(packages)}".encode()).hexdigest()[:12]
    root = CACHE / f"{suite}-{key}"
    if (root / ".complete").exists():
        return root
    if not shutil.which("mmdebstrap"):
        raise Unavailable("mmdebstrap is not installed (scripts/setup installs it)")
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building the same root
        if (root / ".complete").exists():
            return root
        partial = CACHE / f".partial-{key}-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        archives = apt_archives(suite)
        # One --include each: mmdebstrap takes a value holding an apt pattern whole.
        cmd = ["mmdebstrap", "--variant=minbase", *[f"--include={p}" for p in packages],
               "--skip=essential/unlink",
               "--setup-hook=mkdir -p \"$1/var/cache/apt/archives\"",
               f"--setup-hook=sync-in '{archives}' /var/cache/apt/archives",
               f"--customize-hook=sync-out /var/cache/apt/archives '{archives}'",
               "--customize-hook=rm -f \"$1\"/var/cache/apt/archives/*.deb",
               suite, str(partial), _mirror()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise RuntimeError(f"mmdebstrap failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        (partial / "etc" / "hostname").write_text("photolala-test\n")
        (partial / ".complete").write_text(" ".join(cmd) + "\n")
        shutil.rmtree(root, ignore_errors=True)
        partial.rename(root)
        # Roots for older package lists: keep the two newest of each release.
        for old in sorted(CACHE.glob(f"{suite}-*"), key=lambda p: p.stat().st_mtime, reverse=True)[2:]:
            shutil.rmtree(old, ignore_errors=True)
    return root


def prerequisites() -> str | None:
    """Why the container tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "systemd-nspawn and mmdebstrap need root"
    for tool in ("systemd-nspawn", "nsenter", "mmdebstrap"):
        if not shutil.which(tool):
            return f"{tool} is not installed (scripts/setup installs systemd-container, util-linux and mmdebstrap)"
    return None


# ---------------------------------------------------------------------------
# The container


def _cgroup_roots() -> list[Path]:
    """The cgroup hierarchies systemd-nspawn places a container in: the unified one, and
    on a hybrid host also the named systemd one."""
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():
        return [base]
    return [p for p in (base / "systemd", base / "unified") if (p / "cgroup.procs").exists()]


def _own_cgroup() -> None:
    """preexec_fn of every systemd-nspawn: a cgroup of its own.

    With --keep-unit, nspawn puts the container under the caller's cgroup (payload/ and
    supervisor/ beside each other). Two containers started from one test session then share
    payload/system.slice/photolalad.service, and one container's `systemctl kill` also
    signals the other's daemon, which its PID namespace cannot see (EIO, "auxiliary
    processes"), while its stop sees a foreign SIGKILL. Seen when test_debian13.py and
    test_systemd_nspawn.py ran on two workers at once."""
    name = f"photolala-e2e-{os.getpid()}"
    for root in _cgroup_roots():
        own = root / name
        own.mkdir(exist_ok=True)
        (own / "cgroup.procs").write_text(str(os.getpid()))


def _remove_cgroup(pid: int) -> None:
    """The empty cgroups a stopped container leaves, deepest first."""
    for root in _cgroup_roots():
        own = root / f"photolala-e2e-{pid}"
        if not own.is_dir():
            continue
        for path, _, _ in sorted(os.walk(own), key=lambda w: -w[0].count("/")):
            with contextlib.suppress(OSError):
                os.rmdir(path)


class Container:
    """A booted copy of the cached root. Use Container.boot(); stop() or the context
    manager powers it off and deletes the copy."""

    # A boot takes 3–10 s here; a loaded 2-core machine (a release build beside the tests)
    # has been measured past 60 s.
    BOOT_TIMEOUT = 180

    def __init__(self, root: Path, workdir: Path):
        self.root = root
        self.workdir = workdir
        self.console = workdir / "console.log"
        self.proc: subprocess.Popen | None = None
        self.leader: int | None = None

    # -- lifecycle ----------------------------------------------------------

    @classmethod
    def boot(cls, workdir: Path, deb: Path | None = None, suite: str = SUITE) -> "Container":
        """Boots a fresh copy of the cached root of `suite` (with deb's dependencies, if given)."""
        base = cached_root(deb, suite)
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        root = workdir / "root"
        if root.exists():
            shutil.rmtree(root)
        subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(root)], check=True)
        ct = cls(root, workdir)
        ct.start()
        return ct

    def start(self):
        cmd = ["systemd-nspawn", "--register=no", "--keep-unit", "--quiet",
               "--console=pipe", "-D", str(self.root), "-b"]
        self._console = open(self.console, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._console,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=_own_cgroup)
        deadline = time.monotonic() + self.BOOT_TIMEOUT
        # What the last look saw, for the error: the console alone says nothing when
        # systemd never wrote to it (it shows no status on a pipe).
        seen = "no PID 1 of the container found"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Unavailable(f"systemd-nspawn exited {self.proc.returncode} while booting: "
                                  f"{self.console.read_text(errors='replace')[-2000:]}")
            self.leader = self._find_leader()
            if self.leader:
                try:
                    r = self.run("systemctl is-system-running --wait", timeout=max(1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    seen = "systemctl is-system-running --wait did not answer"
                    break
                state = r.stdout.strip()
                if state in ("running", "degraded"):
                    return
                seen = f"systemctl is-system-running said {state!r} (exit {r.returncode}): {r.stderr.strip()[-500:]}"
                # 'offline' is not an answer yet: the container's PID 1 exists from nspawn's
                # fork, before it executes systemd (two CI runs gave up there at once).
                if state in ("maintenance", "stopping"):
                    break
            time.sleep(0.2)
        log = self.console.read_text(errors="replace")[-3000:]
        if self.leader:
            try:
                jobs = self.run("systemctl list-jobs --no-pager; systemctl --failed --no-pager", timeout=10)
                seen += f"\nits jobs and failed units:\n{jobs.stdout[-2000:]}{jobs.stderr[-500:]}"
            except (subprocess.TimeoutExpired, RuntimeError) as e:
                seen += f"\n(its jobs could not be listed: {e})"
        self.stop()
        # It started and got stuck or was slow: a failure to see, not a machine without
        # containers to skip (that one exits above, at once).
        waited = self.BOOT_TIMEOUT - max(0, deadline - time.monotonic())
        raise RuntimeError(f"the container did not boot (waited {waited:.0f} of {self.BOOT_TIMEOUT}s): {seen}\nconsole: {log}")

    def _find_leader(self) -> int | None:
        """The container's PID 1: the descendant of systemd-nspawn whose NSpid ends in 1."""
        todo = [self.proc.pid]
        seen = set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                continue
            for c in map(int, children):
                try:
                    status = Path(f"/proc/{c}/status").read_text()
                except OSError:
                    continue
                m = re.search(r"^NSpid:\s+(.*)$", status, re.M)
                if m and len(m.group(1).split()) > 1 and m.group(1).split()[-1] == "1":
                    return c
                todo.append(c)
        return None

    def stop(self, timeout: float = 30):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if self.leader:
                with contextlib.suppress(Exception):
                    self.run("systemctl poweroff --no-block", timeout=10)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.terminate()  # nspawn forwards it as SIGRTMIN+3 (halt)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, 9)
                    self.proc.wait()
        self._console.close()
        _remove_cgroup(self.proc.pid)
        self.proc = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()

    # -- running things inside ----------------------------------------------

    def run(self, cmd, user: str | None = None, input: str | None = None, timeout: float = 120,
            check: bool = False, env: dict | None = None) -> subprocess.CompletedProcess:
        """Runs cmd (a shell string, or an argv list) inside the container, as root or
        as `user` with that user's groups; returns the CompletedProcess (text)."""
        if self.leader is None:
            raise RuntimeError("the container is not running")
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        environment = dict(CLEAN_ENV)
        environment["HOME"] = "/root"
        if user:
            environment["HOME"] = f"/home/{user}"
            environment["USER"] = environment["LOGNAME"] = user
            argv = ["/bin/sh", "-c", 'exec setpriv --reuid="$0" --regid="$(id -g "$0")" --init-groups -- "$@"',
                    user] + argv
        environment.update(env or {})
        full = (["nsenter", "--target", str(self.leader), "--mount", "--uts", "--ipc", "--net", "--pid",
                 "--root", "--wd", "--", "env", "-i"] + [f"{k}={v}" for k, v in environment.items()] + argv)
        proc = subprocess.run(full, input=input, capture_output=True, text=True, timeout=timeout,
                              errors="replace")
        if check and proc.returncode != 0:
            raise AssertionError(f"in the container: {cmd!r} exited {proc.returncode}\n"
                                 f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
        return proc

    run_in_container = run

    def sh(self, cmd: str, **kw) -> str:
        """run(cmd, check=True).stdout"""
        return self.run(cmd, check=True, **kw).stdout

    def write_file(self, path: str, text: str, mode: int = 0o644):
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        os.chmod(target, mode)

    def read_file(self, path: str) -> str:
        """Copies a file out of the container (through the container's own view)."""
        return self.sh(f"cat {shlex.quote(path)}")

    def copy_in(self, src: Path, dest: str) -> str:
        target = self.root / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        return dest

    def copy_out(self, path: str, dest: Path) -> Path:
        """Copies a file or a folder out of the container into dest."""
        src = self.root / path.lstrip("/")
        dest = Path(dest)
        if src.is_dir():
            shutil.copytree(src, dest, dirs_exist_ok=True, symlinks=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
        return dest

    def install_deb(self, deb: Path) -> subprocess.CompletedProcess:
        """apt-get install of the .deb, as an admin would do it; the root already has
        every dependency, so it needs no network."""
        inside = self.copy_in(deb, f"/var/cache/photolala-test/{deb.name}")
        return self.run(["apt-get", "install", "-y", "--no-install-recommends", inside], timeout=300)

    # -- systemd helpers ------------------------------------------------------

    def show(self, unit: str, *props: str) -> dict[str, str]:
        out = self.sh(["systemctl", "show", unit, "-p", ",".join(props)])
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def wait_for(self, what: str, predicate, timeout: float = 30, interval: float = 0.25):
        """Polls predicate() until it returns something truthy; returns it."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")

    def journal(self, *args: str) -> str:
        return self.run(["journalctl", "--no-pager", "-o", "short-monotonic", *args]).stdout


class ImageContainer(Container):
    """The image's root file system run as a container engine runs it: its entrypoint and
    command as PID 1 (tini), its environment, user and working directory from the image's
    configuration, the volumes bound from folders of the host, the host's network, and
    systemd-nspawn's sandbox. `prefix` goes before the entrypoint (for example setpriv to
    stand in for `docker run --user`, or to load Docker's seccomp profile). Its output, the
    container's log, is `self.log`."""

    STOP_TIMEOUT = 10   # docker stop's grace before SIGKILL

    def __init__(self, root: Path, workdir: Path, config: dict, argv: list[str], binds: dict, env: dict,
                 nspawn_args: list[str]):
        super().__init__(root, workdir)
        self.config = config
        self.argv = argv
        self.binds = binds
        self.env = env
        self.nspawn_args = nspawn_args
        self.log = workdir / "container.log"
        self.exit_code: int | None = None

    @classmethod
    def start(cls, workdir: Path, root: Path, config: dict, binds: dict[str, tuple[Path, bool]] | None = None,
              env: dict[str, str] | None = None, prefix: list[str] | None = None, args: list[str] | None = None,
              nspawn_args: list[str] | None = None, wait: bool = True) -> "ImageContainer":
        """Starts the image at `root` with `binds` {container path: (host path, read_only)}
        and `env` over the image's own. The root is shared: what the container writes
        (the entrypoint's /etc/passwd) goes to a tmpfs over it (nspawn's
        --volatile=overlay), as an engine's writable layer, gone with the container."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        own = Path(root)
        image = config.get("config", {})
        environment = dict(e.split("=", 1) for e in image.get("Env", []))
        environment.update(env or {})
        argv = (prefix or []) + list(image.get("Entrypoint") or []) + list(args if args is not None else image.get("Cmd") or [])
        ct = cls(own, workdir, config, argv, binds or {}, environment, nspawn_args or [])
        ct.launch(wait)
        return ct

    def launch(self, wait: bool = True):
        image = self.config.get("config", {})
        cmd = ["systemd-nspawn", "--register=no", "--keep-unit", "--quiet", "--console=pipe", "--volatile=overlay",
               "-D", str(self.root), f"--chdir={image.get('WorkingDir') or '/'}", "--kill-signal=SIGTERM"]
        if image.get("User"):
            cmd.append(f"--user={image['User']}")
        for inside, (host, read_only) in self.binds.items():
            cmd.append(f"--bind{'-ro' if read_only else ''}={host}:{inside}")
        for key, value in self.env.items():
            cmd.append(f"--setenv={key}={value}")
        cmd += self.nspawn_args
        cmd += ["--"] + self.argv
        self._console = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._console, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=_own_cgroup)
        if not wait:
            return
        deadline = time.monotonic() + self.BOOT_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.exit_code = self.proc.returncode
                raise AssertionError(f"the container exited {self.proc.returncode} at once: "
                                     f"{self.log.read_text(errors='replace')[-3000:]}")
            self.leader = self._find_leader()
            if self.leader:
                return
            time.sleep(0.1)
        raise Unavailable(f"systemd-nspawn did not start the image within {self.BOOT_TIMEOUT}s")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_exit(self, timeout: float) -> int:
        """For a container expected to end by itself: its exit code."""
        self.exit_code = self.proc.wait(timeout=timeout)
        self._console.close()
        _remove_cgroup(self.proc.pid)
        self.proc = None
        return self.exit_code

    def terminate(self, timeout: float = STOP_TIMEOUT) -> float:
        """What `docker stop` does: SIGTERM to PID 1, then SIGKILL after `timeout`.
        Returns how long it took; `exit_code` is PID 1's."""
        start = time.monotonic()
        os.kill(self.leader, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        took = time.monotonic() - start
        self.exit_code = self.proc.returncode
        self._console.close()
        _remove_cgroup(self.proc.pid)
        self.proc = None
        self.leader = None
        return took

    def stop(self, timeout: float = 30):
        if self.proc is not None:
            self.terminate(timeout)

    def cleanup(self):
        """Stops it; the image's root is shared and left as it was."""
        self.stop()
