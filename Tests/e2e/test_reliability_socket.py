"""Reliability, control-socket abuse (issue 7, suite 5). The socket is open to members
of `daemon.socket_group`, so a member's broken or hostile program is the threat: random
bytes and every kind of malformed request, oversized requests, slowloris, thousands of
concurrent connections, clients that ask for the largest answer and never read it — all
at once, from another uid — while legitimate clients (root and another member) keep
asking for status. And every write command from a non-member and from a member, many
times over, which must change nothing.

Measured: the legitimate clients' success rate and latency, the daemon's RSS (VmRSS,
VmHWM from /proc) and descriptors during and after, and whether anything changed."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from support.daemon import binary
from support.world import write_photo

SUPPORT = Path(__file__).resolve().parent / "support"
ATTACKER_UID = 65534          # nobody, given the socket group below
OTHER_MEMBER_UID = 65533      # a second member: the legitimate one


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM", "Threads"):
            out[k] = int(v.split()[0])
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def as_user(uid: int, groups: str | None) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}"] + ([f"--groups={groups}"] if groups else ["--clear-groups"])


def attacker(d, mode: str, seconds: float, connections: int = 100, uid: int = ATTACKER_UID,
             groups: str | None = "users", token: str | None = None) -> subprocess.Popen:
    cmd = as_user(uid, groups) + [sys.executable, str(SUPPORT / "socket_abuse.py"), "--socket", d.socket,
                                  "--mode", mode, "--seconds", str(seconds), "--connections", str(connections)]
    if token:
        cmd += ["--token", token]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p: subprocess.Popen, timeout: float = 120) -> dict:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


class Legit:
    """A legitimate client asking for status every `interval`: success and latency."""

    def __init__(self, d, uid: int | None, groups: str | None, interval: float = 0.5):
        self.d, self.uid, self.groups, self.interval = d, uid, groups, interval
        self.results: list[tuple[bool, float, str]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            cmd = [binary(), "ctl", "status", "--json", "--socket", self.d.socket]
            if self.uid is not None:
                cmd = as_user(self.uid, self.groups) + cmd
            t0 = time.monotonic()
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
                ok = r.returncode == 0 and json.loads(r.stdout)["state"] in ("running", "paused")
                why = "" if ok else (r.stdout + r.stderr)[-200:]
            except Exception as e:  # noqa: BLE001 - counted as a failure
                ok, why = False, f"{type(e).__name__}: {e}"
            self.results.append((ok, time.monotonic() - t0, why))
            self._stop.wait(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(60)

    @property
    def success(self) -> float:
        return sum(ok for ok, _, _ in self.results) / max(1, len(self.results))

    @property
    def p95(self) -> float:
        lat = sorted(dt for _, dt, _ in self.results)
        return lat[int(0.95 * (len(lat) - 1))] if lat else 0.0


class Monitor:
    """Samples the daemon's memory and descriptors."""

    def __init__(self, pid: int, interval: float = 0.25):
        self.pid, self.interval = pid, interval
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.samples.append(proc_status(self.pid))
            except OSError:
                pass
            self._stop.wait(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(10)

    def peak(self, key: str) -> int:
        return max(s[key] for s in self.samples)


def systemd_fd_limit():
    """What systemd gives a service by default: 1024 descriptors (soft)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def wait_settled_fds(d, baseline: int, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    n = proc_status(d.proc.pid)["fds"]
    while n > baseline + 8 and time.monotonic() < deadline:
        time.sleep(0.5)
        n = proc_status(d.proc.pid)["fds"]
    return n


# ---- everything at once ------------------------------------------------------------------------

@pytest.mark.reliability("socket")
# Alone: it measures the legitimate clients' latency and the daemon's memory.
@pytest.mark.alone
def test_abuse_from_a_member_leaves_others_served_within_memory(world, reliability, long_run):
    seconds = 300.0 if long_run else 30.0
    d = world.daemon(start=False)
    d.popen_kwargs = {"preexec_fn": systemd_fd_limit}
    d.start()
    world.login(d)
    # A queue worth listing: uploads paused, 4,000 photos with long names waiting.
    assert d.ctl("pause").returncode == 0
    names = [d.photos / f"album{i % 20:02d}" / (f"IMG_{i:05d}_" + "x" * 120 + ".jpg") for i in range(4000)]
    for i, p in enumerate(names):
        write_photo(p, 0, i.to_bytes(4, "little") + b"photo")
    d.wait_for(lambda s: s["queue"]["pending"] == len(names) and s["queue"]["hashing"] == 0
               and not s["watch"]["scanning"], timeout=120, interval=0.5, what="the photos queued")
    time.sleep(2)
    base = proc_status(d.proc.pid)

    with Monitor(d.proc.pid) as mon, Legit(d, None, None) as root, Legit(d, OTHER_MEMBER_UID, "users") as member:
        # Each attack from its own member uid (several users' programs misbehaving at
        # once), so each meets the parser and the limits by itself.
        attacks = {
            "fuzz": attacker(d, "fuzz", seconds, uid=60001),
            "oversized": attacker(d, "oversized", seconds, uid=60002),
            "slowloris": attacker(d, "slowloris", seconds, connections=400, uid=60003),
            "flood": attacker(d, "flood", seconds, connections=2000, uid=60004),
            "unread": attacker(d, "unread", seconds, connections=64, uid=60005),
            "stream": attacker(d, "stream", seconds, connections=8, uid=60006),
            # Valid requests for the largest answer, 32 at once, read and asked again:
            # the requests a uid may have in flight are capped (issue 31 item 9).
            "busy": attacker(d, "busy", seconds, connections=32, uid=60007),
        }
        results = {k: finish(p, timeout=seconds + 120) for k, p in attacks.items()}
    assert d.proc.poll() is None, "the daemon died"
    after_fds = wait_settled_fds(d, base["fds"])
    peak_rss = mon.peak("VmRSS")
    peak_fds = mon.peak("fds")
    hwm = proc_status(d.proc.pid)["VmHWM"]

    # Legitimate clients were served throughout: every request of theirs (issue 31 item 9:
    # no uid crowds out another; the bound was 95%, and root once got 29 of 31).
    fails = [w for ok, _, w in root.results + member.results if not ok]
    assert root.success == 1.0 and member.success == 1.0, (
        f"root {sum(ok for ok, _, _ in root.results)} of {len(root.results)}, "
        f"member {sum(ok for ok, _, _ in member.results)} of {len(member.results)}", Counter(fails).most_common(3))
    # The busy member was answered, and told to wait past its share.
    busy = results["busy"]
    assert busy.get("busy 200", 0) > 0 and busy.get("busy 503", 0) > 0, busy
    assert root.p95 < 3 and member.p95 < 3, (root.p95, member.p95)
    # Memory and descriptors bounded while under attack, and given back afterwards.
    assert hwm - base["VmHWM"] < 64 * 1024, f"VmHWM grew {base['VmHWM']} -> {hwm} kB"
    # Under systemd's 1024: room left for the hasher, the database and S3 (the accept
    # throttle holds at 384 connections).
    assert peak_fds < base["fds"] + 384 + 40, (base["fds"], peak_fds)
    assert "Too many open files" not in d.log()
    assert after_fds <= base["fds"] + 8, (base["fds"], after_fds)
    # Nothing changed: still paused by the user, signed in, the queue as it was.
    s = d.status()
    assert s["state"] == "paused" and s["pauseReason"] == "user" and s["account"]["signedIn"]
    assert s["queue"]["pending"] == len(names) and s["queue"]["failed"] == 0
    # And it still works: resumed, every photo goes up.
    assert d.ctl("resume").returncode == 0
    d.wait_for(lambda s: s["queue"]["uploaded"] == len(names), timeout=180, interval=1, what="the uploads after the abuse")

    total = sum(sum(v for k, v in r.items() if k not in ("held at the end", "bytes taken", "send blocked"))
                for r in results.values())
    reliability.describe(
        injected=f"for {seconds:.0f} s from seven members' uids, all at once: random bytes and 26 kinds of malformed "
                 "request (4 threads); 2 MB request lines, 100,000 headers, 20 MB bodies after a declared 1 GB; "
                 "400 slowloris connections; 2,000 silent connections; 64 clients asking for a 4,000-item queue "
                 "listing and never reading it; 8 that then send an endless second request as fast as it is taken; "
                 "32 asking for that listing again and again, reading each",
        times=f"{total} connections or requests",
        checked="root and another member asking for status every 0.5 s: every request answered, p95 < 3 s; "
                "the busy member answered and refused past its share (503); VmHWM growth "
                "< 64 MiB; with systemd's 1024-descriptor limit: < baseline + 424 during (the accept throttle holds at 384), none refused for want of "
                "one, back to baseline after; the daemon alive, still "
                "paused and signed in, queue unchanged; afterwards every photo uploaded")
    reliability.figure("root ok %", round(100 * root.success, 1))
    reliability.figure("member ok %", round(100 * member.success, 1))
    reliability.figure("p95 s", round(max(root.p95, member.p95), 2))
    reliability.figure("VmHWM kB", f"{base['VmHWM']} → {hwm}")
    reliability.figure("peak fds", f"{base['fds']} → {peak_fds}")
    reliability.figure("attacks", json.dumps({k: dict(sorted(v.items())[:6]) for k, v in results.items()}))


# ---- writes from those who may not ---------------------------------------------------------------

@pytest.mark.reliability("socket")
def test_every_write_command_from_a_non_member_or_member_changes_nothing(world, reliability, long_run):
    seconds = 60.0 if long_run else 10.0
    d = world.daemon()
    uid = world.login(d)
    bodies = [write_photo(d.photos / f"w{i}.jpg", 20_000 + i) for i in range(5)]
    d.wait_for(lambda s: s["queue"]["uploaded"] == len(bodies), timeout=60, what="the photos uploaded")
    account_before = (d.state_dir / "account.json").read_bytes()
    calls_before = world.backend.stats()["calls"]
    log_before = len(d.log())
    # A valid identity token for another Apple ID: signing the NAS in as the attacker.
    token = world.backend.mint_identity_token("attacker-apple-subject-000000000000000000")

    # The socket is 0660 root:users, so a non-member cannot even connect. Make it
    # connectable (a mistaken chmod, an ACL) so the daemon's own SO_PEERCRED check is
    # what stands in the way.
    os.chmod(d.socket, 0o666)
    refused = Counter()
    for user, groups in ((ATTACKER_UID, None), (OTHER_MEMBER_UID, "users")):
        for cmd in (["pause"], ["resume"], ["rescan"], ["retry"], ["logout"], ["verify"],
                    ["login", "--identity-token", token, "--authorization-code", "ac_x"]):
            cmd_line = as_user(user, groups) + [binary(), "ctl", *cmd, "--socket", d.socket]
            r = subprocess.run(cmd_line, capture_output=True, text=True, timeout=30)
            assert r.returncode == 4, (user, cmd, r.returncode, r.stdout, r.stderr)
            refused[f"ctl {cmd[0]}"] += 1
        # A non-member may not read either.
        r = subprocess.run(as_user(user, groups) + [binary(), "ctl", "status", "--socket", d.socket],
                           capture_output=True, text=True, timeout=30)
        assert (r.returncode == 0) == (groups is not None), (user, r.stdout, r.stderr)
    # Then every write route, raw, with forged identity headers, over and over.
    raw = {}
    for user, groups in ((ATTACKER_UID, None), (OTHER_MEMBER_UID, "users")):
        raw[user] = finish(attacker(d, "writes", seconds, uid=user, groups=groups, token=token))
    statuses = Counter(k.rsplit(" ", 1)[1] for r in raw.values() for k in r)
    answers = sum(raw[u][k] for u in raw for k in raw[u])
    assert set(statuses) == {"403"}, raw
    os.chmod(d.socket, 0o660)

    # Nothing changed.
    s = d.status()
    assert s["state"] == "running" and s["pauseReason"] is None
    assert s["account"] == {"signedIn": True, "userId": uid}
    assert (d.state_dir / "account.json").read_bytes() == account_before
    calls = world.backend.stats()["calls"]
    for name in ("apple", "device", "device-token", "refresh"):
        assert calls[name]["count"] == calls_before[name]["count"], (name, calls[name], calls_before[name])
    log = d.log()[log_before:]
    assert "photolalactl rescan" not in log and "signed out" not in log and "paused by the user" not in log
    assert "verify:" not in log
    # Refusals are logged, but a flood of them must not flood the journal.
    refusals = log.count("refused a control request")
    assert refusals >= 1
    assert refusals <= 50, f"{refusals} log lines for {answers} refused requests"
    # Still works for root.
    more = write_photo(d.photos / "after.jpg", 30_000)
    d.wait_for(lambda s: s["queue"]["uploaded"] == len(bodies) + 1, timeout=30, what="a photo after the attempts")
    assert world.key(uid, more) in world.objects(uid)

    reliability.describe(
        injected="every write command (pause, resume, rescan, retry, logout, verify, login with a valid identity token for "
                 "another Apple ID, pairing start and cancel) from a non-member uid and from a member, through "
                 f"photolalactl and raw for {seconds:.0f} s with forged identity headers; the socket made 0666 so the "
                 "daemon's own check decides",
        times=f"{sum(refused.values()) + answers} attempts",
        checked="every one refused (exit 4 / HTTP 403), a non-member cannot read; afterwards not paused, same user "
                "signed in, account.json byte for byte the same, no backend sign-in or pairing call, no rescan; "
                "refusals logged but at most 50 lines; uploads go on")
    reliability.figure("refused", sum(refused.values()) + answers)
    reliability.figure("log lines", refusals)
