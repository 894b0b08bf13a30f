"""Being told when backups stop (config.md "Notifications", issue 25), end to end: the real
daemon against the fake backend and moto, with local receivers for every channel (a webhook
in each format, a command writing its environment to a file, a Healthchecks-style dead
man's switch; support/notify_receivers.py). A revoked Apple ID is one `problem` on each
channel within 5 s and `/fail` on the switch; its end one `recovered`; a lasting problem is
repeated every `repeat`; a restart resends nothing; a receiver answering 500 gets it again;
a missing folder, a full state directory and S3 failing past the threshold are each their
own reason; `notify --test` says what each channel answered; and the bandwidth timetable's
`0` slot pauses uploads with `pauseReason` `schedule`, a rate slot's limit is kept within 10 %. No notification holds a token, key,
Apple id or user id.

(test_notify.py is about the systemd notify protocol, not this.)"""
from __future__ import annotations

import datetime as dt
import json
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.daemon import binary
from support.notify_receivers import CommandRecorder, Receiver, wait_until
from support.prom import parse as parse_metrics, scrape_socket, value as metric
from support.tls import TestCA
from support.world import settled, write_photo

# The 30 s a problem must stay clear before `recovered` is sent, shortened for the tests
# (NotifyPolicyTests checks the real number on plain dates).
CLEAR = "3s"


class Channels:
    """A daemon with every channel pointed at this test's receivers."""

    def __init__(self, world, tmp_path: Path):
        self.world, self.tmp_path = world, tmp_path
        self.receivers: list[Receiver] = []

    def receiver(self, fmt: str = "json") -> Receiver:
        r = Receiver(fmt).start()
        self.receivers.append(r)
        return r

    def daemon(self, fmt: str = "json", notify: dict | None = None, config: dict | None = None, env: dict | None = None,
               name: str = "d", start: bool = True):
        self.hook = self.receiver(fmt)
        self.hc = self.receiver()
        self.cmd = CommandRecorder(self.tmp_path / f"cmd-{name}")
        cfg = {
            "account": {"device_name": "nas-livingroom"},
            "credentials": {"apple_check_interval": "1s"},
            "notify": {"webhook": self.hook.url("/topic"), "webhook_format": fmt, "command": str(self.cmd.path),
                       "healthcheck_url": self.hc.url("/ping/4f1c"), "healthcheck_interval": "2s", **(notify or {})},
        }
        for section, keys in (config or {}).items():
            cfg.setdefault(section, {}).update(keys)
        self.d = self.world.daemon(name=name, config=cfg, env={"PHOTOLALAD_NOTIFY_CLEAR_AFTER": CLEAR, **(env or {})},
                                   start=start)
        return self.d

    def close(self):
        for r in self.receivers:
            r.stop()


@pytest.fixture
def channels(world, tmp_path):
    c = Channels(world, tmp_path)
    yield c
    c.close()


def of(events: list[dict], kind: str, reason: str | None = None) -> list[dict]:
    return [e for e in events if e.get("event") == kind and (reason is None or e.get("reason") == reason)]


def command_events(cmd: CommandRecorder, kind: str, reason: str | None = None) -> list[dict]:
    return [e for e in cmd.events() if e.get("PHOTOLALA_EVENT") == kind
            and (reason is None or e.get("PHOTOLALA_REASON") == reason)]


def assert_no_secret_in_notifications(world, uid: str, c: Channels):
    """No token, key, code, Apple subject or user id in anything that left the NAS."""
    payloads = [r["body"].decode(errors="replace") + json.dumps(r["headers"]) + r["path"]
                for r in c.hook.received() + c.hc.received()]
    payloads += [json.dumps(e) for e in c.cmd.events()]
    secrets = [s for s in world.backend.all_secrets() if s]
    assert secrets, "the backend issued secrets to look for"
    for text in payloads:
        for s in secrets:
            assert s not in text, f"a secret ({s[:6]}…) left in a notification: {text[:300]}"
        assert uid.lower() not in text.lower(), f"the user id left in a notification: {text[:300]}"


# ---- an Apple ID revoked, then authorized again -------------------------------------------

@pytest.mark.parametrize("fmt", ["json", "ntfy", "slack"])
def test_revoked_apple_id_is_one_problem_on_each_channel_then_one_recovered(world, channels, fmt):
    d = channels.daemon(fmt)
    hook, hc, cmd = channels.hook, channels.hc, channels.cmd
    uid = world.login(d)
    wait_until(lambda: ("ok", "") in hc.pings(), 10, "the first healthy ping")
    assert hook.received() == [] and cmd.events() == []
    s = d.status()
    assert s["notify"] == s["notify"] | {"channels": ["webhook", "command", "healthcheck"], "lastError": None}
    assert s["attention"] == []

    world.backend.set_apple_state("revoked")
    t0 = time.time()
    wait_until(lambda: of(hook.events(), "problem") and command_events(cmd, "problem")
               and any(k == "fail" for k, _ in hc.pings()), 5, "a problem on every channel")
    assert time.time() - t0 <= 5.0
    time.sleep(3)   # nothing more comes: one event, not one per check
    problems = of(hook.events(), "problem")
    assert len(problems) == 1, hook.events()
    p = problems[0]
    assert p["title"] == "Photolala backup paused on nas-livingroom"
    assert "no longer authorizes" in p["message"] and "sudo photolalactl login" in p["message"]
    if fmt != "slack":
        assert p["reason"] == "appleRevoked"
    if fmt == "json":
        assert p["severity"] == "critical" and p["device"] == "nas-livingroom"
        assert p["status"]["state"] == "paused" and set(p["status"]) == {"state", "pending", "uploaded"}
        dt.datetime.fromisoformat(p["at"].replace("Z", "+00:00"))
    if fmt == "ntfy":
        assert p["priority"] == "4"
    ran = command_events(cmd, "problem")
    assert len(ran) == 1 and ran[0]["PHOTOLALA_REASON"] == "appleRevoked" and ran[0]["PHOTOLALA_SEVERITY"] == "critical"
    assert ran[0]["PHOTOLALA_TITLE"] == "Photolala backup paused on nas-livingroom"
    fails = [body for k, body in hc.pings() if k == "fail"]
    assert fails and "no longer authorizes" in fails[0]
    s = d.status()
    assert s["pauseReason"] == "appleRevoked"
    assert [a["reason"] for a in s["attention"]] == ["appleRevoked"]
    human = d.ctl("status", check=True).stdout
    assert "Action needed: The Apple ID no longer authorizes Photolala" in human
    assert s["notify"]["lastSentAt"] is not None and s["notify"]["lastError"] is None

    world.backend.set_apple_state("authorized")
    wait_until(lambda: of(hook.events(), "recovered") and command_events(cmd, "recovered"), 15, "recovered on every channel")
    time.sleep(3)
    assert len(of(hook.events(), "recovered")) == 1 and len(command_events(cmd, "recovered")) == 1
    assert len(of(hook.events(), "problem")) == 1
    recovered = of(hook.events(), "recovered")[0]
    assert "running again on nas-livingroom" in recovered["title"]
    # The switch is told the good news at once, then pinged plainly again.
    last_fail = max(i for i, (k, _) in enumerate(hc.pings()) if k == "fail")
    assert any(k == "ok" for k, _ in hc.pings()[last_fail + 1:])
    assert d.status()["attention"] == []
    assert_no_secret_in_notifications(world, uid, channels)


def test_a_lasting_problem_is_repeated_every_repeat(world, channels):
    d = channels.daemon("json", notify={"repeat": "3s"})
    world.login(d)
    world.backend.set_apple_state("revoked")
    wait_until(lambda: of(channels.hook.events(), "problem"), 5, "the first problem")
    time.sleep(10.5)
    told = [r["time"] for r in channels.hook.accepted() if json.loads(r["body"])["event"] == "problem"]
    assert 4 <= len(told) <= 5, told
    gaps = [b - a for a, b in zip(told, told[1:])]
    assert all(2.5 <= g <= 4.2 for g in gaps), gaps
    # As often by command as by webhook: both counted at one moment once the command (a process
    # to start, on its own sender) has caught up with the webhook's last repeat.
    def problems_told() -> int:
        return sum(1 for r in channels.hook.accepted() if json.loads(r["body"])["event"] == "problem")
    wait_until(lambda: len(command_events(channels.cmd, "problem")) == problems_told(), 3,
               "the command told each repeat the webhook was told")
    assert all(json.loads(r["body"])["reason"] == "appleRevoked" for r in channels.hook.accepted())


def test_a_restart_during_a_problem_sends_nothing_twice(world, channels):
    d = channels.daemon("json")
    uid = world.login(d)
    world.backend.set_apple_state("revoked")
    wait_until(lambda: of(channels.hook.events(), "problem") and command_events(channels.cmd, "problem"), 5, "the problem")
    assert d.stop() == 0
    d.start()
    d.wait_for(lambda s: s["pauseReason"] == "appleRevoked", timeout=10, what="revoked again after the restart")
    time.sleep(5)
    assert len(of(channels.hook.events(), "problem")) == 1, channels.hook.events()
    assert len(command_events(channels.cmd, "problem")) == 1
    assert of(channels.hook.events(), "recovered") == []
    world.backend.set_apple_state("authorized")
    wait_until(lambda: of(channels.hook.events(), "recovered"), 15, "recovered after the restart")
    time.sleep(2)
    assert len(of(channels.hook.events(), "recovered")) == 1
    assert_no_secret_in_notifications(world, uid, channels)


# ---- a receiver that fails first; each problem its own reason -----------------------------

def test_a_receiver_answering_500_gets_it_again_and_backups_go_on(world, channels, tmp_path):
    other = tmp_path / "d" / "usb"
    other.mkdir(parents=True)
    d = channels.daemon("json", config={"watch": {"folders": [str(tmp_path / "d" / "photos"), str(other)]}})
    uid = world.login(d)
    # The third try is held until the test saw the failure: on a loaded machine a status
    # can take longer than the two 500s' second between tries (seen in CI).
    channels.hook.answer(500, 500, then_hold=True)
    shutil.rmtree(other)
    bodies = [write_photo(d.photos / f"p{i}.jpg", 30_000 + i) for i in range(5)]
    try:
        failing = d.wait_for(lambda s: s["notify"]["lastError"] is not None, timeout=30, interval=0.05,
                             what="the failing webhook in status")
    finally:
        channels.hook.release()
    assert failing["notify"]["lastError"].startswith("webhook: HTTP 500 from 127.0.0.1:"), failing["notify"]
    wait_until(lambda: channels.hook.accepted(), 15, "the event delivered after the 500s")
    # Backups went on meanwhile, untouched by the failing receiver.
    s = d.wait_for(settled(len(bodies)), timeout=30, what="the photos uploaded")
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    time.sleep(2)
    got = channels.hook.received()
    assert [r["status"] for r in got] == [500, 500, 200], [(r["status"], r["body"][:80]) for r in got]
    assert len({r["body"] for r in got}) == 1, "the same event each time"
    event = json.loads(got[-1]["body"])
    assert event["event"] == "problem" and event["reason"] == "folderMissing" and event["severity"] == "warning"
    assert str(other) in event["message"]
    assert got[1]["time"] - got[0]["time"] >= 0.9
    s = d.status()
    assert s["notify"]["lastError"] is None and s["notify"]["lastSentAt"]
    hook = next(c for c in s["notify"]["perChannel"] if c["channel"] == "webhook")
    assert hook["sent"] == 1 and hook["pending"] == 0
    samples = parse_metrics(scrape_socket(d.socket))
    assert metric(samples, "photolala_notifications_total", channel="webhook", result="failed") == 2
    assert metric(samples, "photolala_notifications_total", channel="webhook", result="sent") == 1
    assert metric(samples, "photolala_attention", reason="folderMissing") == 1
    # The human status names the folder under "Action needed".
    assert f"Action needed: The watched folder {other} is missing" in d.ctl("status", check=True).stdout


@contextmanager
def tmpfs(path: Path, size: str):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> Path:
    filler = path / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (64 << 10, 4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    return filler


def test_a_full_state_directory_is_its_own_reason(world, channels):
    d = channels.daemon("json", start=False)
    with tmpfs(d.state_dir, "16m"):
        d.start()
        world.login(d)
        write_photo(d.photos / "first.jpg", 20_000)
        d.wait_for(settled(1), timeout=30, what="the first photo")
        filler = fill(d.state_dir)
        for i in range(50):
            write_photo(d.photos / "full" / f"f{i:02d}-{'x' * 60}.jpg", 10_000 + i)
        wait_until(lambda: of(channels.hook.events(), "problem", "stateDirectoryFull"), 60, "stateDirectoryFull")
        event = of(channels.hook.events(), "problem", "stateDirectoryFull")[0]
        assert event["message"].startswith("Nothing new can be recorded (disk full)") and event["title"].startswith("Photolala backup stopped on")
        # Each channel has its own sender: the command (a process to start) may come after the webhook.
        wait_until(lambda: command_events(channels.cmd, "problem", "stateDirectoryFull"), 15, "stateDirectoryFull by the command")
        filler.unlink()
        wait_until(lambda: of(channels.hook.events(), "recovered", "stateDirectoryFull"), 60, "its recovery")
        assert len(of(channels.hook.events(), "problem", "stateDirectoryFull")) == 1
        assert d.stop() == 0


def test_s3_failing_past_the_threshold_is_its_own_reason(world, channels):
    d = channels.daemon("json", env={"PHOTOLALAD_S3_FAILING_AFTER": "4s"})
    uid = world.login(d)
    # One photo first, so the bucket's listing is done and the storm meets the uploader.
    write_photo(d.photos / "first.jpg", 30_000)
    d.wait_for(settled(1), timeout=30, what="the first photo")
    world.proxy.set_faults(slowdown_rate=1.0)
    t0 = time.time()
    write_photo(d.photos / "stuck.jpg", 40_000)
    d.wait_for(lambda s: (s.get("s3") or {}).get("state") == "backoff", timeout=20, what="S3 backing off")
    assert not of(channels.hook.events(), "problem", "s3Failing"), "not before the threshold"
    wait_until(lambda: of(channels.hook.events(), "problem", "s3Failing"), 20, "s3Failing")
    assert time.time() - t0 >= 4
    event = of(channels.hook.events(), "problem", "s3Failing")[0]
    assert "S3 has been failing" in event["message"] and "503" in event["message"]
    world.proxy.clear_faults()
    d.wait_for(settled(2), timeout=90, what="the photo after the storm")
    wait_until(lambda: of(channels.hook.events(), "recovered", "s3Failing"), 20, "s3Failing recovered")
    assert_no_secret_in_notifications(world, uid, channels)


# ---- photolalactl notify --test -----------------------------------------------------------

def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_notify_test_sends_through_each_channel_and_says_what_each_answered(world, channels):
    d = channels.daemon("ntfy")
    r = d.ctl("notify", "--test", timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert [l.split()[0] for l in lines] == ["webhook", "command", "healthcheck"], r.stdout
    assert all(l.split()[1] == "ok" for l in lines), r.stdout
    assert "HTTP 200 from 127.0.0.1:" in lines[0] and "exit 0: delivered" in lines[1]
    test = channels.hook.events()
    assert len(test) == 1 and test[0]["event"] == "test" and "nas-livingroom" in test[0]["title"]
    assert command_events(channels.cmd, "test")
    assert [k for k, _ in channels.hc.pings()].count("log") == 1, "a test is logged, not a ping that changes the state"
    # Group members may read status, not make the NAS send: notify --test needs root or the daemon's user.
    denied = d.ctl("notify", "--test", user="nobody", groups="users")
    assert denied.returncode == 4, (denied.stdout, denied.stderr)


def test_notify_test_says_which_channel_failed_and_why(world, channels, tmp_path):
    bad = CommandRecorder(tmp_path / "bad", exit_status=3, line="msmtp: cannot connect to smtp.example")
    port = closed_port()
    d = channels.daemon("json", notify={"webhook": f"http://127.0.0.1:{port}/topic", "command": str(bad.path)})
    r = d.ctl("notify", "--test", timeout=90)
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = {l.split()[0]: l for l in r.stdout.splitlines()}
    assert "FAILED" in lines["webhook"] and f"127.0.0.1:{port}" in lines["webhook"] and "refused" in lines["webhook"], r.stdout
    assert "FAILED" in lines["command"] and "exited with 3: msmtp: cannot connect to smtp.example" in lines["command"], r.stdout
    assert "ok" in lines["healthcheck"].split()[1]
    # A test touches no channel's status: only real events count there.
    assert d.status()["notify"]["lastError"] is None


def test_https_receivers_are_checked_with_the_daemons_trust(world, channels, loopback_cert, test_ca, tmp_path):
    """tls.ca_file vouches for one receiver's CA; another's certificate, from a CA nobody
    trusts, is refused and `notify --test` says why."""
    trusted = Receiver("json", tls=loopback_cert).start()
    stranger = Receiver("json", tls=TestCA(tmp_path / "other-ca", name="Stranger CA").issue("stranger")).start()
    channels.receivers += [trusted, stranger]
    d = channels.daemon("json", notify={"webhook": trusted.url("/topic"), "healthcheck_url": stranger.url("/ping/1")},
                        config={"tls": {"ca_file": str(test_ca.path)}})
    r = d.ctl("notify", "--test", timeout=90)
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = {l.split()[0]: l for l in r.stdout.splitlines()}
    assert lines["webhook"].split()[1] == "ok" and "HTTP 200 from 127.0.0.1:" in lines["webhook"], r.stdout
    assert trusted.events()[0]["event"] == "test"
    assert "FAILED" in lines["healthcheck"] and "certificate for 127.0.0.1 is not trusted" in lines["healthcheck"], r.stdout
    assert "Stranger CA" in lines["healthcheck"] and stranger.accepted() == []


def test_notify_test_without_channels_says_how_to_set_one(world):
    d = world.daemon()
    r = d.ctl("notify", "--test")
    assert r.returncode == 1 and "No notification channel is configured" in r.stdout
    assert d.status()["notify"] == {"channels": [], "lastSentAt": None, "lastError": None, "perChannel": []}


# ---- the bandwidth timetable --------------------------------------------------------------

def in_day_order(table: str) -> str:
    """A timetable of `HH:MM,RATE` entries as status shows it: sorted by time of day
    (the two-digit times sort as text), whatever order it was written in."""
    return " ".join(sorted(table.split()))


def test_a_zero_slot_pauses_uploads_within_a_second_and_the_next_slot_resumes(world):
    d = world.daemon()
    uid = world.login(d)
    write_photo(d.photos / "before.jpg", 20_000)
    d.wait_for(settled(1), timeout=30, what="a photo before the timetable")
    # Far enough from a minute's end that the pause is seen before the next slot.
    while dt.datetime.now().second >= 45:
        time.sleep(0.5)
    now = dt.datetime.now()
    nxt = now + dt.timedelta(minutes=1)
    d.sections["upload"] = {"bandwidth_limit": f"{now:%H:%M},0 {nxt:%H:%M},off"}
    d.write_config()
    d.signal(signal.SIGHUP)
    t0 = time.time()
    s = d.wait_for(lambda s: s["state"] == "paused", timeout=5, interval=0.05, what="the schedule's pause")
    assert time.time() - t0 <= 1.5
    assert s["pauseReason"] == "schedule"
    # Status shows the timetable in the order of the day: after 23:59 the next slot comes first.
    assert s["bandwidth"]["limit"] == 0 and s["bandwidth"]["timetable"] == in_day_order(f"{now:%H:%M},0 {nxt:%H:%M},off")
    until = dt.datetime.fromisoformat(s["bandwidth"]["until"].replace("Z", "+00:00")).astimezone()
    assert until.strftime("%H:%M") == f"{nxt:%H:%M}" and until.second == 0
    human = d.ctl("status", check=True).stdout
    assert "Paused (schedule)" in human and f"Uploads resume at {nxt:%H:%M}" in human
    assert s["attention"] == [], "a timetable's pause needs nobody"
    # Hashing goes on; the upload waits for the slot's end.
    body = write_photo(d.photos / "evening.jpg", 25_000)
    d.wait_for(lambda s: s["queue"]["pending"] == 1 and s["queue"]["hashing"] == 0, timeout=15, what="the photo hashed")
    time.sleep(1.5)
    assert d.status()["queue"]["uploaded"] == 1
    # The next slot resumes within a second of its start.
    d.wait_for(lambda s: s["state"] == "running", timeout=70, interval=0.1, what="the next slot")
    assert abs(time.time() - until.timestamp()) <= 1.5, time.time() - until.timestamp()
    d.wait_for(settled(2), timeout=30, what="the photo uploaded after the pause")
    assert world.key(uid, body) in world.objects(uid)
    assert "the bandwidth timetable pauses uploads until" in d.log()


def test_a_zero_slot_stops_an_upload_in_flight_and_it_goes_again_later(world):
    """config.md: a change takes effect within a second, in-flight uploads included. A
    photo uploading under a slow slot (its bytes waiting on the rate) must not go out at
    full speed when a `0` slot begins: it stops, goes back to the queue, and is sent once
    the timetable allows it."""
    now = dt.datetime.now()
    later = now + dt.timedelta(hours=2)
    d = world.daemon(config={"upload": {"bandwidth_limit": f"{now:%H:%M},64KiB/s {later:%H:%M},off",
                                        "multipart_threshold": "16MiB"}})
    uid = world.login(d)
    body = write_photo(d.photos / "big.jpg", 4 << 20)  # a minute at 64 KiB/s
    d.wait_for(lambda s: s["queue"]["uploading"] == 1, timeout=60, interval=0.1, what="the photo on the wire")
    d.sections["upload"]["bandwidth_limit"] = f"{now:%H:%M},0 {later:%H:%M},off"
    d.write_config()
    d.signal(signal.SIGHUP)
    t0 = time.time()
    d.wait_for(lambda s: s["state"] == "paused" and s["queue"]["uploading"] == 0, timeout=10, interval=0.05,
               what="the upload in flight stopped by the 0 slot")
    assert time.time() - t0 <= 2.5, time.time() - t0
    time.sleep(3)
    s = d.status()
    assert s["queue"]["uploaded"] == 0 and s["queue"]["pending"] == 1 and s["queue"]["failed"] == 0, s["queue"]
    assert world.key(uid, body) not in world.objects(uid), "the 0 slot let the photo go out at full speed"
    # The timetable taken away: the photo goes, once.
    del d.sections["upload"]["bandwidth_limit"]
    d.write_config()
    d.signal(signal.SIGHUP)
    d.wait_for(settled(1), timeout=60, what="the photo uploaded once the slot is gone")
    assert world.key(uid, body) in world.objects(uid)


def test_a_rate_slot_is_kept_within_ten_percent(world):
    """A timetable slot's rate, measured: the bytes S3 accepted over 10 s (the daemon's own
    counter) within 10 % of the limit. Many small photos, so what is in flight when the
    counter is read is a small share of the window's bytes."""
    limit = 512 << 10
    now = dt.datetime.now()
    table = f"{now:%H:%M},512KiB/s {now + dt.timedelta(hours=2):%H:%M},off"
    d = world.daemon(config={"upload": {"bandwidth_limit": table, "concurrency": 2}})
    size, count = 32 << 10, 320  # 10 MiB: 20 s at the limit
    for i in range(count):
        write_photo(d.photos / f"IMG_{i:04d}.jpg", size)
    d.wait_for(lambda s: s["queue"]["pending"] == count and s["queue"]["hashing"] == 0, timeout=120,
               what="every photo hashed, waiting for a sign-in")
    world.login(d)
    s = d.wait_for(lambda s: s["queue"]["uploaded"] >= 32, timeout=60, what="uploads under way")
    assert s["bandwidth"]["limit"] == limit and s["bandwidth"]["timetable"] == in_day_order(table) and s["state"] == "running"

    def sent() -> tuple[float, float]:
        return time.monotonic(), metric(parse_metrics(scrape_socket(d.socket)), "photolala_uploaded_bytes_total")

    t0, b0 = sent()
    time.sleep(10)
    t1, b1 = sent()
    assert d.status()["queue"]["pending"] > 0, "the photos ran out before the window ended: the rate was not the limit"
    rate = (b1 - b0) / (t1 - t0)
    print(f"a slot of {limit} bytes/s: {b1 - b0:.0f} bytes accepted in {t1 - t0:.2f} s = {rate:.0f} bytes/s")
    assert abs(rate - limit) <= 0.10 * limit, f"{rate:.0f} bytes/s against a slot of {limit}"


def test_a_malformed_timetable_is_refused_naming_the_entry(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[watch]\nfolders = ["/a"]\n[upload]\nbandwidth_limit = "08:00,2MiB/s 18:00,zero 23:00,off"\n')
    r = subprocess.run([binary(), "--check-config", "--config", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 78, r
    assert "upload.bandwidth_limit" in r.stderr and '"18:00,zero"' in r.stderr and "a rate after the comma" in r.stderr, r.stderr
    path.write_text('[watch]\nfolders = ["/a"]\n[upload]\nbandwidth_limit = "Mon-08:00,1MiB/s Sat-00:00,off"\n')
    r = subprocess.run([binary(), "--check-config", "--config", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and 'bandwidth_limit = "Mon-08:00,1MiB/s Sat-00:00,off"' in r.stdout, r
