"""Docker's default seccomp profile as a filter a test can load: the profile is the one
Debian packages with Docker's sources (golang-github-docker-docker-dev: Docker 20.10, the
engine of Synology's Container Manager), downloaded once with `apt-get download` into
~/.cache/photolala/docker-seccomp/, and compiled with libseccomp (the library Docker's
runc uses) for x86-64 or arm64 with Docker's default capabilities, as Docker applies it
to a container started without --security-opt. The result is the raw BPF program that
util-linux's `setpriv --seccomp-filter FILE` loads before it runs the container's
entrypoint.

    bpf = docker_seccomp.compile_default(tmp_path / "docker.bpf")
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path

PACKAGE = "golang-github-docker-docker-dev"
PROFILE = "usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json"

# What `docker run` grants without --cap-add (moby's oci/caps/defaults.go).
DEFAULT_CAPS = {
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
    "CAP_AUDIT_WRITE",
}
# What packaging/container/docker-compose.yml drops besides (cap_drop): a container
# that works without them works with Docker's defaults too.
COMPOSE_DROPPED_CAPS = ["CAP_NET_RAW", "CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_SYS_CHROOT", "CAP_NET_BIND_SERVICE",
                        "CAP_SETFCAP"]
# What systemd-nspawn grants that Docker does not: dropped to stand in for `docker run`.
NSPAWN_EXTRA_CAPS = [
    "CAP_AUDIT_CONTROL", "CAP_DAC_READ_SEARCH", "CAP_IPC_OWNER", "CAP_LEASE", "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BROADCAST", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_PTRACE", "CAP_SYS_RESOURCE",
    "CAP_SYS_TTY_CONFIG",
]

_ACTIONS = {"SCMP_ACT_ALLOW": 0x7FFF0000, "SCMP_ACT_KILL": 0x00000000, "SCMP_ACT_KILL_THREAD": 0x00000000,
            "SCMP_ACT_KILL_PROCESS": 0x80000000, "SCMP_ACT_LOG": 0x7FFC0000}
_OPS = {"SCMP_CMP_NE": 1, "SCMP_CMP_LT": 2, "SCMP_CMP_LE": 3, "SCMP_CMP_EQ": 4, "SCMP_CMP_GE": 5, "SCMP_CMP_GT": 6,
        "SCMP_CMP_MASKED_EQ": 7}
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


def profile() -> dict:
    """Docker's default profile, from Debian's package (downloaded once)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "photolala" / "docker-seccomp"
    path = cache / "default.json"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            got = subprocess.run(["apt-get", "download", PACKAGE], cwd=tmp, capture_output=True, text=True)
            debs = list(Path(tmp).glob(f"{PACKAGE}_*.deb"))
            if not debs:
                raise RuntimeError(f"apt-get download {PACKAGE} failed: {got.stderr[-2000:]}")
            subprocess.run(["dpkg-deb", "-x", str(debs[0]), tmp + "/x"], check=True)
            (cache / "version").write_text(debs[0].name + "\n")
            path.write_bytes((Path(tmp) / "x" / PROFILE).read_bytes())
    return json.loads(path.read_text())


def _applies(entry: dict, arch: str, kernel: tuple[int, ...]) -> bool:
    inc, exc = entry.get("includes") or {}, entry.get("excludes") or {}
    if inc.get("arches") and arch not in inc["arches"]:
        return False
    if inc.get("caps") and not set(inc["caps"]) <= DEFAULT_CAPS:
        return False
    if inc.get("minKernel") and kernel < tuple(int(x) for x in inc["minKernel"].split(".")):
        return False
    if exc.get("arches") and arch in exc["arches"]:
        return False
    if exc.get("caps") and set(exc["caps"]) & DEFAULT_CAPS:
        return False
    return True


def _action(name: str, errno: int | None, default_errno: int) -> int:
    if name == "SCMP_ACT_ERRNO":
        return 0x00050000 | ((default_errno if errno is None else errno) & 0xFFFF)
    if name == "SCMP_ACT_TRACE":
        return 0x7FF00000 | ((default_errno if errno is None else errno) & 0xFFFF)
    return _ACTIONS[name]


def compile_default(dest: Path) -> Path:
    """Writes Docker's default profile, for this machine's architecture and kernel, as a
    raw BPF program at `dest`."""
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    p = profile()
    arch = _ARCH[platform.machine()]
    kernel = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    default_errno = p.get("defaultErrnoRet", 1)   # EPERM, as Docker answers a refused call
    ctx = lib.seccomp_init(_action(p["defaultAction"], None, default_errno))
    try:
        for entry in p["syscalls"]:
            if not _applies(entry, arch, kernel):
                continue
            action = _action(entry["action"], entry.get("errnoRet"), default_errno)
            args = entry.get("args") or []
            array = (_ArgCmp * max(1, len(args)))(*[_ArgCmp(a["index"], _OPS[a["op"]], a["value"], a.get("valueTwo", 0))
                                                     for a in args])
            for name in entry["names"]:
                nr = lib.seccomp_syscall_resolve_name(name.encode())
                if nr < 0:   # not a call of this architecture (Docker skips them too)
                    continue
                rc = lib.seccomp_rule_add_array(ctx, action, nr, len(args), array)
                if rc not in (0, -17):   # -EEXIST: the same rule twice
                    raise RuntimeError(f"seccomp_rule_add {name}: {os.strerror(-rc)}")
        dest = Path(dest)
        with open(dest, "wb") as f:
            rc = lib.seccomp_export_bpf(ctx, f.fileno())
        if rc != 0:
            raise RuntimeError(f"seccomp_export_bpf: {os.strerror(-rc)}")
    finally:
        lib.seccomp_release(ctx)
    return dest
