#!/usr/bin/env python3
"""PTM-256 thumbnails: the preview worker against `vipsthumbnail` and ImageMagick.

    scripts/bench_thumbnails.py [--jpegs 200] [--heics 50] [--bin PATH] [--workdir DIR]

Makes --jpegs 12-megapixel JPEGs (4032 × 3024, camera-like detail) and --heics HEICs of
the same size with Pillow/pillow-heif, then makes each one's thumbnail three ways, one
photo at a time on one core (taskset -c 0), and reports photos per CPU-second:

  worker       `photolalad __preview-worker`, sandboxed, driven as the daemon drives it
               (one descriptor a photo over its socket pair): the full PTM-256 job
               (orientation, crop, sRGB, quality ladder, optimised baseline JPEG).
  vipsthumbnail  the same library's own tool, one process for all files
               (`vipsthumbnail -s 341x256 --vips-concurrency=1 FILES…`).
  convert      ImageMagick, what a naive tool does: `convert FILE -thumbnail 341x256 OUT`,
               one process per photo.

CPU is the children's utime+stime. Also the worker's peak RSS (VmHWM). The goal: the
worker ≥ 0.8× vipsthumbnail's photos per CPU-second.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from PIL import Image, ImageFilter  # noqa: E402

from support.preview_worker import PreviewWorker  # noqa: E402

try:
    import pillow_heif  # noqa: E402
    pillow_heif.register_heif_opener()
except ImportError:
    pillow_heif = None


def make_photos(root: Path, jpegs: int, heics: int) -> tuple[list[Path], list[Path]]:
    """Camera-like detail: a few distinct smooth scenes with noise, so files are 3–5 MB."""
    rng = random.Random(15)
    bases = []
    for i in range(4):
        small = Image.frombytes("RGB", (126, 95), rng.randbytes(126 * 95 * 3)).resize((4032, 3024), Image.Resampling.BICUBIC)
        grain = Image.frombytes("RGB", (4032, 3024), rng.randbytes(4032 * 3024 * 3)).filter(ImageFilter.GaussianBlur(1.2))
        bases.append(Image.blend(small, grain, 0.25))
    jpg, heic = [], []
    for i in range(jpegs):
        p = root / f"j{i:03d}.jpg"
        if not p.exists():
            bases[i % 4].rotate(i % 7, resample=Image.Resampling.NEAREST).save(p, "JPEG", quality=92)
        jpg.append(p)
    if pillow_heif:
        for i in range(heics):
            p = root / f"h{i:03d}.heic"
            if not p.exists():
                # x265's fastest preset: making the files is not what is measured.
                bases[i % 4].rotate(i % 5, resample=Image.Resampling.NEAREST).save(
                    p, "HEIF", quality=80, enc_params={"preset": "ultrafast"})
            heic.append(p)
    return jpg, heic


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_tool(cmd: list[str]) -> float:
    before = children_cpu()
    subprocess.run(["taskset", "-c", "0", *cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return children_cpu() - before


def bench_worker(binary: str, files: list[Path], fmt: str) -> tuple[float, float, int]:
    w = PreviewWorker(binary)
    os.sched_setaffinity(w.proc.pid, {0})
    # Only the photos count, not starting libvips.
    start_cpu = w.cpu_seconds()
    started = time.monotonic()
    for f in files:
        r = w.read(f, fmt)
        assert r.jpeg and not r.failure, (f, r.failure)
    wall = time.monotonic() - started
    cpu = w.cpu_seconds() - start_cpu
    rss = w.peak_rss_kib()
    w.close()
    return cpu, wall, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jpegs", type=int, default=200)
    ap.add_argument("--heics", type=int, default=50)
    ap.add_argument("--bin", default=str(REPO / ".build" / "release" / "photolalad"))
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "photolala-bench-thumbnails"))
    args = ap.parse_args()
    for tool in ("vipsthumbnail", "convert", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: apt-get install libvips-tools imagemagick util-linux")
    root = Path(args.workdir)
    photos = root / "photos"
    out = root / "out"
    photos.mkdir(parents=True, exist_ok=True)
    out.mkdir(exist_ok=True)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min); making {args.jpegs} JPEGs and {args.heics} HEICs of 4032 × 3024 …", flush=True)
    jpg, heic = make_photos(photos, args.jpegs, args.heics)
    mb = sum(p.stat().st_size for p in jpg) / len(jpg) / 1e6
    print(f"JPEGs average {mb:.1f} MB", flush=True)
    rows = []
    for label, files, fmt in (("JPEG", jpg, "jpeg"), ("HEIC", heic, "heif")):
        if not files:
            continue
        cpu_w, wall_w, rss = bench_worker(args.bin, files, fmt)
        cpu_v = run_tool(["vipsthumbnail", "--vips-concurrency=1", "-s", "341x256", "-o", str(out / "%s-vips.jpg"), *map(str, files)])
        if fmt == "jpeg":
            before = children_cpu()
            for f in files:
                subprocess.run(["taskset", "-c", "0", "convert", str(f), "-thumbnail", "341x256", str(out / (f.stem + "-im.jpg"))],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cpu_c = children_cpu() - before
        else:
            cpu_c = None
        n = len(files)
        line = (f"{label} ×{n}: worker {n / cpu_w:.2f} photos/CPU-s ({wall_w:.1f} s wall), "
                f"vipsthumbnail {n / cpu_v:.2f}, ratio {cpu_v / cpu_w:.2f}×")
        if cpu_c:
            line += f"; convert -thumbnail {n / cpu_c:.2f} photos/CPU-s (worker {cpu_c / cpu_w:.1f}× faster)"
        line += f"; worker peak RSS {rss / 1024:.0f} MiB"
        rows.append(line)
        print(line, flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
