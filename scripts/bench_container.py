#!/usr/bin/env python3
"""The container image's cost: its size, and the daemon's memory and idle CPU inside it
against the same binary on the host, in one run.

    scripts/bench_container.py [--deb PATH] [--image PATH] [--photos 2000] [--idle-seconds 120]

Sizes: the .deb, the OCI archive (what a NAS downloads and stores once), its layers
compressed (the Debian layer and photolalad's), and the root file system unpacked (what
the engine keeps on disk). The peers' published sizes are in docs/benchmarks.md with
where they come from: they cannot be fetched from here.

Memory and CPU: one folder of --photos small JPEGs in 100 folders is watched by the .deb's
binary twice, signed out (nothing leaves the machine), one after the other:
  host       the binary run directly on this machine, as photolalad.service runs it
  container  the image's root file system under systemd-nspawn with its entrypoint,
             tini, PUID/PGID and the volumes, as `docker run` runs it
Each waits until every photo is hashed and the daemon is idle, then reads its VmRSS and
VmHWM and the CPU it uses in --idle-seconds (utime+stime from /proc). Needs root (nspawn).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if not os.environ.get("VIRTUAL_ENV"):
    os.execvp("bash", ["bash", "-c", '. "$0/scripts/python-env" && photolala_python_env && exec python3 "$@"',
                       str(REPO), str(Path(__file__).resolve()), *sys.argv[1:]])
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from support import images  # noqa: E402
from support.nspawn import ImageContainer, unpack_image  # noqa: E402

MiB = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")


def say(msg: str = ""):
    print(msg, flush=True)


def du(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", "--apparent-size", str(path)], capture_output=True, text=True,
                              check=True).stdout.split()[0])


def status_field(text: str, key: str) -> int:
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def cpu(stat: str) -> float:
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def make_photos(folder: Path, count: int):
    body = images.encode(images.upright_pattern(64, 48), "JPEG")
    for i in range(count):
        d = folder / f"{i % 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        # Each file different (its own MD5), as photos are.
        (d / f"IMG_{i:05d}.jpg").write_bytes(body + i.to_bytes(4, "big"))
    subprocess.run(["chmod", "-R", "a+rX", str(folder)], check=True)


def queue_done(state: Path, count: int) -> bool:
    import sqlite3
    try:
        db = sqlite3.connect(f"file:{state}/queue.db?mode=ro", uri=True, timeout=1)
        try:
            hashed = db.execute("SELECT count(*) FROM file WHERE md5 IS NOT NULL").fetchone()[0]
        finally:
            db.close()
        return hashed >= count
    except sqlite3.Error:
        return False


def daemon_pid(nspawn: int, timeout: float = 60) -> int:
    """The daemon's PID as the host sees it: the descendant of systemd-nspawn named
    photolalad (the image has no pgrep, and the host reads /proc without entering)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        todo = [nspawn]
        while todo:
            pid = todo.pop()
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "photolalad":
                    return pid
                todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
            except OSError:
                continue
        time.sleep(0.5)
    raise RuntimeError("no photolalad process in the container")


def measure(read_status, read_stat, state: Path, count: int, idle: float) -> dict:
    deadline = time.monotonic() + 900
    while not queue_done(state, count):
        if time.monotonic() > deadline:
            raise RuntimeError("the photos were not hashed within 15 minutes")
        time.sleep(1)
    time.sleep(15)   # settle: the WAL checkpoint, the memory release after a scan
    before = cpu(read_stat())
    time.sleep(idle)
    after = cpu(read_stat())
    status = read_status()
    return {"rss": status_field(status, "VmRSS"), "hwm": status_field(status, "VmHWM"),
            "idle_cpu_s": after - before, "idle_s": idle}


def config(folder: str, state: str, socket: str) -> str:
    return (f'[watch]\nfolders = ["{folder}"]\nrescan_interval = "off"\n'
            f'[daemon]\nstate_dir = "{state}"\nsocket = "{socket}"\nsocket_group = "root"\n'
            '[catalog]\nenabled = true\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deb", help="the .deb (default: scripts/build-deb)")
    ap.add_argument("--image", help="the OCI archive (default: scripts/build-image of the .deb)")
    ap.add_argument("--photos", type=int, default=2000)
    ap.add_argument("--idle-seconds", type=float, default=120)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="photolala-bench-container-"))
    try:
        deb = Path(args.deb) if args.deb else Path(subprocess.run([str(REPO / "scripts/build-deb"), "--out", str(work / "deb")],
                                                                   capture_output=True, text=True, check=True).stdout.split()[-1])
        image = Path(args.image) if args.image else Path(subprocess.run(
            [str(REPO / "scripts/build-image"), "--deb", str(deb), "--out", str(work / "dist")],
            capture_output=True, text=True, check=True).stdout.split()[-1])
        root, cfg = unpack_image(image, work / "image")
        index = json.loads(subprocess.run(["tar", "-xOf", str(image), "index.json"], capture_output=True, text=True,
                                          check=True).stdout)
        manifest = json.loads(subprocess.run(["tar", "-xOf", str(image), "blobs/sha256/" + index["manifests"][0]["digest"][7:]],
                                             capture_output=True, text=True, check=True).stdout)
        layers = [layer["size"] for layer in manifest["layers"]]
        figures = {"deb": deb.stat().st_size, "oci_archive": image.stat().st_size,
                   "layers": layers, "unpacked": du(root)}
        docker = image.with_name(image.name.replace(".oci.tar", ".docker.tar"))
        if docker.exists():
            figures["docker_archive"] = docker.stat().st_size
        say(f"image {image.name}")
        say(f"  .deb                     {figures['deb'] / MiB:8.1f} MiB")
        say(f"  OCI archive              {figures['oci_archive'] / MiB:8.1f} MiB")
        say(f"  layers compressed        {sum(layers) / MiB:8.1f} MiB  (Debian {layers[0] / MiB:.1f} + photolalad {layers[1] / MiB:.1f})")
        say(f"  root file system         {figures['unpacked'] / MiB:8.1f} MiB unpacked")

        photos = work / "photos"
        make_photos(photos, args.photos)
        say(f"\n{args.photos} photos in 100 folders, signed out, idle window {args.idle_seconds:.0f} s")

        # The host: the image's own binary (the .deb's), run as photolalad.service would.
        binary = root / "usr/bin/photolalad"
        host_state = work / "host-state"
        (work / "host.toml").write_text(config(str(photos), str(host_state), str(work / "host.sock")))
        log = open(work / "host.log", "w")
        proc = subprocess.Popen([str(binary), "--config", str(work / "host.toml")], stdout=log, stderr=subprocess.STDOUT)
        try:
            host = measure(lambda: Path(f"/proc/{proc.pid}/status").read_text(),
                           lambda: Path(f"/proc/{proc.pid}/stat").read_text(), host_state, args.photos, args.idle_seconds)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            log.close()

        # The container: entrypoint, tini, PUID/PGID, the volumes.
        vols = {n: work / f"c-{n}" for n in ("config", "state", "run")}
        for d in vols.values():
            d.mkdir()
        (vols["config"] / "photolalad.toml").write_text(config("/photos", "/state", "/run/photolala/photolalad.sock"))
        c = ImageContainer.start(work / "container", root, cfg, env={"PUID": "1000", "PGID": "1000"},
                                 binds={"/config": (vols["config"], False), "/state": (vols["state"], False),
                                        "/photos": (photos, True), "/run/photolala": (vols["run"], False)})
        try:
            pid = daemon_pid(c.proc.pid)
            inside = measure(lambda: Path(f"/proc/{pid}/status").read_text(),
                             lambda: Path(f"/proc/{pid}/stat").read_text(), vols["state"], args.photos, args.idle_seconds)
        finally:
            c.cleanup()
        figures["host"], figures["container"] = host, inside
        say(f"  {'':10} {'RSS':>10} {'peak RSS':>10} {'idle CPU':>14}")
        for name, f in (("host", host), ("container", inside)):
            say(f"  {name:10} {f['rss'] / MiB:7.1f} MiB {f['hwm'] / MiB:7.1f} MiB {f['idle_cpu_s']:7.2f} s/{f['idle_s']:.0f} s")
        say(f"  container/host RSS ratio {inside['rss'] / host['rss']:.2f}")
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
