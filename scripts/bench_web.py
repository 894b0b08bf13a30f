#!/usr/bin/env python3
"""Status page benchmark (issue 35), every figure from one run, each beside its peer:

1. weight: the bytes of everything the page loads (HTML, CSS, script, icon; nothing else
   is fetched, checked) against the issue's budget of 150 KB.
2. first render: from navigation to the first status drawn (the `state` field filled) in
   Debian's headless chromium (Playwright), median of --loads cold loads, each in a new
   browser context; the peer is the same browser drawing the same HTML from a static file
   server (`python3 -m http.server`, nothing fetched after it).
3. CPU with one page open: the daemon's utime + stime (/proc/PID/stat) over --minutes with
   the page open and following the status (server-sent events), against the same daemon
   over the same time with no page; scaled to an hour (measured over minutes, not an
   hour: say so when quoting it).
4. the chart for a big library: a queue database seeded with --library photos (files,
   objects and catalog dates spread over ten years), `GET /api/history` timed cold (the
   one aggregated query) and warm (cached until the data changes). The daemon runs signed
   out, so the inventory's rows are not joined (no user id: see docs/benchmarks.md).

Usage: scripts/bench web [--loads 10] [--minutes 5] [--library 1000000] [--bin PATH]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))
sys.path.insert(0, str(REPO / "scripts"))

from bench_upload import proc_cpu_s, release_binary  # noqa: E402
from support.browser import Browser  # noqa: E402
from support.daemon import Daemon  # noqa: E402
from support.run import free_port  # noqa: E402


def get(port: int, path: str) -> tuple[int, bytes, float]:
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body, time.perf_counter() - t0


def start(binary: str, root: Path, port: int) -> Daemon:
    d = Daemon(root, config={"web": {"listen": f"127.0.0.1:{port}"}, "daemon": {"log_level": "info"}})
    d.binary = binary
    d.start()
    d.wait_for(lambda s: (s.get("web") or {}).get("url"), timeout=30, what="the page served")
    return d


def weight(port: int) -> int:
    with Browser() as browser:
        page = browser.page()
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("[data-field='state'][data-value]")
        page.wait_for_timeout(500)
        assets = [u for u in browser.requests if not u.startswith(f"http://127.0.0.1:{port}/api/")]
        foreign = [u for u in browser.requests if not u.startswith(f"http://127.0.0.1:{port}/")]
        assert not foreign, foreign
    total = 0
    for u in sorted(set(assets)):
        status, body, _ = get(port, u.split(str(port), 1)[1])
        print(f"   {u.split(str(port), 1)[1]:<14} {len(body):>7} bytes")
        total += len(body)
    return total


def first_render(port: int, loads: int) -> tuple[float, float]:
    static = Path(tempfile.mkdtemp(prefix="pl-web-static-"))
    for name in ("", "app.css", "favicon.svg"):
        _, body, _ = get(port, "/" + name)
        (static / (name or "index.html")).write_bytes(body)
    # The peer: the same HTML and CSS with a script that draws nothing but the state.
    (static / "app.js").write_text("document.querySelector('[data-field=state]').dataset.value='\"running\"';")
    sport = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(sport), "--bind", "127.0.0.1", "-d", str(static)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    try:
        with Browser() as browser:
            def load(url: str) -> float:
                page = browser.page()
                page.goto(url, wait_until="commit")
                page.wait_for_selector("[data-field='state'][data-value]")
                ms = page.evaluate("performance.now()")
                page.context.close()
                return ms
            load(f"http://127.0.0.1:{port}/")  # the browser's own start-up is not the page's
            ours = statistics.median(load(f"http://127.0.0.1:{port}/") for _ in range(loads))
            peer = statistics.median(load(f"http://127.0.0.1:{sport}/") for _ in range(loads))
    finally:
        server.terminate()
    return ours, peer


def cpu_per_hour(d: Daemon, port: int, minutes: float) -> tuple[float, float]:
    seconds = minutes * 60
    time.sleep(5)
    c0 = proc_cpu_s(d.proc.pid)
    time.sleep(seconds)
    without = proc_cpu_s(d.proc.pid) - c0
    with Browser() as browser:
        page = browser.page()
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("[data-field='state'][data-value]")
        time.sleep(5)
        c0 = proc_cpu_s(d.proc.pid)
        time.sleep(seconds)
        with_page = proc_cpu_s(d.proc.pid) - c0
    return with_page * 3600 / seconds, without * 3600 / seconds


def seed_library(state_dir: Path, n: int):
    db = sqlite3.connect(state_dir / "queue.db")
    rng = random.Random(35)
    start = 1_483_228_800  # 2017-01-01
    span = 10 * 365 * 86400
    db.execute("BEGIN")
    for i in range(n):
        md5 = f"{i:032x}"
        t = start + rng.randrange(span)
        uploaded = i % 10 != 0
        db.execute("INSERT INTO object(md5, size, state, updatedAt, uploadedAt) VALUES (?, 3000000, ?, 0, ?)",
                   (md5, "uploaded" if uploaded else "pending", t + 86400 if uploaded else None))
        db.execute("INSERT INTO file(path, dir, size, mtimeSec, md5, state, updatedAt) VALUES (?, ?, 3000000, ?, ?, ?, 0)",
                   (f"/srv/photos/{t // 31536000}/{i:07d}.jpg", f"/srv/photos/{t // 31536000}", t, md5,
                    "uploaded" if uploaded else "queued"))
        if i % 3 == 0:
            db.execute("INSERT INTO photo(md5, state, takenAt, updatedAt) VALUES (?, 'ready', ?, 0)", (md5, t))
    db.commit()
    db.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="photolalad to measure (default: the release build)")
    ap.add_argument("--loads", type=int, default=10)
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--library", type=int, default=1_000_000)
    args = ap.parse_args()
    binary = args.bin or os.environ.get("PHOTOLALAD_BIN") or release_binary()
    work = Path(tempfile.mkdtemp(prefix="pl-bench-web-"))
    port = free_port()
    d = start(binary, work / "page", port)
    try:
        print("== weight: everything the page loads")
        total = weight(port)
        print(f"   total {total} bytes = {total / 1000:.1f} KB, {100 * total / 150_000:.0f}% of the 150 KB budget")
        print(f"== first render in headless chromium, median of {args.loads} loads")
        ours, peer = first_render(port, args.loads)
        print(f"   the page {ours:.0f} ms, the same HTML from a static server {peer:.0f} ms (ratio {ours / peer:.2f})")
        print(f"== the daemon's CPU with one page open, over {args.minutes:g} min each (scaled to an hour)")
        with_page, without = cpu_per_hour(d, port, args.minutes)
        print(f"   with the page {with_page:.2f} CPU-s/h, without {without:.2f} CPU-s/h (the page adds {with_page - without:.2f} CPU-s/h)")
    finally:
        d.stop()
    if args.library:
        print(f"== the chart for {args.library:,} photos: GET /api/history")
        lib = Daemon(work / "library", config={"web": {"listen": "off"}})
        lib.binary = binary
        lib.start()
        lib.stop()
        seed_library(lib.state_dir, args.library)
        port = free_port()
        lib.sections["web"]["listen"] = f"127.0.0.1:{port}"
        lib.write_config()
        lib.start()
        try:
            lib.wait_for(lambda s: (s.get("web") or {}).get("url"), timeout=60, what="the page served")
            status, body, cold = get(port, "/api/history")
            months = json.loads(body)
            _, _, warm = get(port, "/api/history")
            print(f"   {len(months)} months, {sum(m['here'] for m in months):,} photos here: cold {cold * 1000:.0f} ms, "
                  f"cached {warm * 1000:.1f} ms; RSS {open(f'/proc/{lib.proc.pid}/status').read().split('VmHWM:')[1].split()[0]} kB peak")
        finally:
            lib.stop()


if __name__ == "__main__":
    main()
