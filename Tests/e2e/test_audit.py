"""The audit trail (cli.md "audit", issue 24): who did what, end to end. A scripted day
(pairing refused then approved, a token sign-in with a bad token, pause by root, resume by
the daemon's own user, a call refused to a group member, a restore, a verify, a reload
with a bad config, logout) is listed by `audit --json` in order with the right actor and
outcome; `audit --verify` proves the chain and names the place once a byte is edited, a
record deleted, two swapped or one forged in between; rotation (a small `audit.max_size`)
keeps the chain across files; no record holds a token the fake backend issued. Logout
tells the backend (the old refresh token is refused afterwards), and with the backend down
still forgets, says so and records it. A signed-in daemon with nothing to do writes nothing to the trail (a
NAS's disks may spin down)."""
from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

import pytest
import requests

from support.daemon import Daemon, raw_request
from support.fake_backend import user_id_for
from support.world import PairingLogin, apple_subject, settled, write_photo


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    assert d.stop() == 0


def trail_path(d: Daemon):
    return d.state_dir / "audit.log"


def records(d: Daemon, *args) -> list[dict]:
    r = d.ctl("audit", "--json", *args, check=True)
    return json.loads(r.stdout)["records"]


def actor_uid(record: dict):
    return record["actor"]["uid"] if isinstance(record["actor"], dict) else record["actor"]


def test_who_did_what_and_a_chain_that_shows_tampering(daemon):
    d = daemon
    for cmd in ["pause", "resume"]:
        d.ctl(cmd, check=True)
    # A member of the socket's group may read the status, not change anything nor read the trail.
    r = d.ctl("pause", user="nobody", groups="users")
    assert r.returncode == 4, (r.stdout, r.stderr)
    r = d.ctl("audit", user="nobody", groups="users")
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "root and the daemon's user" in r.stderr
    d.ctl("rescan", check=True)
    d.ctl("retry", check=True)

    got = records(d)
    assert [(x["event"], x["outcome"], actor_uid(x)) for x in got] == [
        ("pause", "ok", 0), ("resume", "ok", 0),
        ("control.refused", "refused", 65534), ("control.refused", "refused", 65534),
        ("rescan", "ok", 0), ("retry", "ok", 0),
    ], got
    assert [x["seq"] for x in got] == [1, 2, 3, 4, 5, 6]
    assert got[0]["actor"] == {"uid": 0, "user": "root"}
    assert got[2]["actor"] == {"uid": 65534, "user": "nobody"}
    assert got[2]["details"]["call"] == "POST /v1/pause" and got[3]["details"]["call"] == "GET /v1/audit"
    assert got[5]["details"] == {"files": 0, "photos": 0}
    assert got[0]["prev"] == "0" * 64
    # Times are ISO 8601 UTC and in order.
    assert all(x["at"].endswith("Z") for x in got) and [x["at"] for x in got] == sorted(x["at"] for x in got)

    # The file: 0600, one record a line, each line's hash in the next record's prev.
    path = trail_path(d)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    lines = path.read_bytes().split(b"\n")[:-1]
    assert len(lines) == 6
    for before, after in zip(lines, lines[1:]):
        assert json.loads(after)["prev"] == hashlib.sha256(before).hexdigest()

    # The human form: one line a record, with who and what.
    human = d.ctl("audit", check=True).stdout.splitlines()
    assert len(human) == 6
    assert "root (uid 0)" in human[0] and "pause" in human[0] and "ok" in human[0]
    assert "nobody (uid 65534)" in human[2] and "control.refused" in human[2] and "call=POST /v1/pause" in human[2]
    # --limit keeps the newest.
    assert [x["seq"] for x in records(d, "--limit", "2")] == [5, 6]

    r = d.ctl("audit", "--verify")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "whole: 6 records (1–6)" in r.stdout

    original = path.read_bytes()

    def broken(text: bytes) -> str:
        path.write_bytes(text)
        try:
            r = d.ctl("audit", "--verify")
            assert r.returncode == 1, (r.stdout, r.stderr)
            return r.stdout
        finally:
            path.write_bytes(original)

    # One byte of record 2 (a digit of its time's minute) edited.
    edited = lines[1][:30] + bytes([lines[1][30] ^ 1]) + lines[1][31:]
    assert edited != lines[1]
    out = broken(b"\n".join(lines[:1] + [edited] + lines[2:]) + b"\n")
    assert "record 2 (audit.log, line 2) was changed" in out, out
    # Record 3 deleted.
    out = broken(b"\n".join(lines[:2] + lines[3:]) + b"\n")
    assert "record 3 is missing before record 4 (audit.log, line 3)" in out, out
    # Records 4 and 5 swapped.
    out = broken(b"\n".join(lines[:3] + [lines[4], lines[3]] + lines[5:]) + b"\n")
    assert "records 4 and 5 are out of order" in out and "line 4" in out, out
    # The last record cut: only the queue database's seal can tell.
    out = broken(b"\n".join(lines[:5]) + b"\n")
    assert "the trail was cut: record 6 is missing" in out, out
    # The JSON verdict names the place too.
    path.write_bytes(b"\n".join(lines[:2] + lines[3:]) + b"\n")
    r = d.ctl("audit", "--verify", "--json")
    path.write_bytes(original)
    verdict = json.loads(r.stdout)
    assert r.returncode == 1 and verdict["whole"] is False
    assert verdict["problem"]["kind"] == "removed" and verdict["problem"]["line"] == 3 and verdict["problem"]["seq"] == 4

    # Whole again once put back; a restart goes on with the same chain.
    assert d.ctl("audit", "--verify").returncode == 0
    d.stop()
    d.start()
    d.ctl("pause", check=True)
    r = d.ctl("audit", "--verify")
    assert r.returncode == 0 and "whole: 7 records (1–7)" in r.stdout, (r.stdout, r.stderr)
    assert records(d, "--limit", "1")[0]["seq"] == 7


def test_a_damaged_trail_never_stops_the_daemon(daemon):
    d = daemon
    d.ctl("pause", check=True)
    d.ctl("resume", check=True)
    d.stop()
    # Cut while the daemon was stopped: it starts, says so once, and goes on after the sealed record.
    path = trail_path(d)
    path.write_bytes(path.read_bytes().split(b"\n")[0] + b"\n")
    d.start()
    d.ctl("pause", check=True)
    assert d.status()["state"] == "needsLogin"  # answering as before: the trail stopped nothing
    r = d.ctl("audit", "--verify")
    assert r.returncode == 1 and "record 2 is missing before record 3" in r.stdout, (r.stdout, r.stderr)
    assert d.log().count("does not end with the record the queue database sealed") == 1
    assert [x["seq"] for x in records(d)] == [1, 3]


def test_idle_signed_in_writes_nothing(world):
    d = world.daemon()
    world.login(d)
    d.wait_for(lambda s: s["state"] == "running" and s["account"]["signedIn"], what="signed in")
    d.ctl("pause", check=True)
    d.ctl("resume", check=True)
    d.wait_for(lambda s: s["state"] == "running", what="running again")
    path = trail_path(d)
    before = os.stat(path)
    time.sleep(60)
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert [x["event"] for x in records(d)][-2:] == ["pause", "resume"]
    # Nothing the backend issued is in the trail.
    text = path.read_text()
    for secret in world.backend.all_secrets():
        if secret:
            assert secret not in text


# ---- the scripted day -------------------------------------------------------------------

# The daemon's own user in the scripted day: a system user every Debian has, so that
# "the daemon's user" and root are two actors (the other tests run the daemon as root).
DAEMON_USER = "backup"


@pytest.fixture
def daemon_as_user(world):
    """Starts a daemon of `world` running as DAEMON_USER (with the socket group `users`),
    in a folder that user may write."""
    pw = pwd.getpwnam(DAEMON_USER)
    users = grp.getgrnam("users").gr_gid
    roots = []

    def start(config: dict | None = None) -> Daemon:
        root = Path(tempfile.mkdtemp(prefix="pl-audit-day-"))
        roots.append(root)
        os.chmod(root, 0o755)
        cfg = {"account": {"api_url": world.backend.url}}
        for section, keys in (config or {}).items():
            cfg.setdefault(section, {}).update(keys)
        d = Daemon(root / "nas", config=cfg, name="day")
        for path in (d.root, d.photos, Path(d.socket).parent):
            os.chown(path, pw.pw_uid, pw.pw_gid)

        def drop_to_daemon_user():
            os.setgroups([users])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)

        d.popen_kwargs = {"preexec_fn": drop_to_daemon_user}
        world.daemons.append(d)
        return d.start()

    yield start
    for d in world.daemons:
        d.stop()
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


def trail_files(d: Daemon) -> list[Path]:
    """The trail's files, oldest first."""
    return [p for p in (d.state_dir / "audit.log.2", d.state_dir / "audit.log.1", trail_path(d)) if p.exists()]


def wait_for_record(d: Daemon, event: str, step: str | None = None, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for r in reversed(records(d, "--limit", "50")):
            if r["event"] == event and (step is None or r["details"].get("step") == step):
                return r
        time.sleep(0.2)
    raise AssertionError(f"no {event} {step or ''} record: {records(d)}")


def verify_fails_at(d: Daemon, path: Path, text: bytes) -> str:
    """Writes `text` into `path`, asks `audit --verify` (which must fail), puts it back."""
    original = path.read_bytes()
    path.write_bytes(text)
    try:
        r = d.ctl("audit", "--verify")
        assert r.returncode == 1, (r.stdout, r.stderr)
        return r.stdout
    finally:
        path.write_bytes(original)


def test_a_scripted_day_lists_who_did_what_in_order(world, daemon_as_user, tmp_path):
    world.backend.configure(pairing_interval=1)
    d = daemon_as_user({"account": {"device_name": "nas-day"}})
    daemon_uid = pwd.getpwnam(DAEMON_USER).pw_uid

    # Pairing, refused on the phone; then again, approved.
    login = PairingLogin(d)
    try:
        world.backend.deny_pairing(login.code())
        rc, out, err = login.wait(30)
    finally:
        login.kill()
    assert rc == 1 and "declined" in err, (out, err)
    sub = apple_subject("day")
    login = PairingLogin(d)
    try:
        world.backend.approve_pairing(login.code(), sub)
        rc, out, err = login.wait(30)
    finally:
        login.kill()
    uid = user_id_for(sub)
    assert rc == 0 and uid in out, (out, err)
    bodies = [write_photo(d.photos / f"day/{i}.jpg", 20_000 + i) for i in range(3)]
    d.wait_for(lambda s: settled(3)(s) and (s.get("manifest") or {}).get("state") == "idle"
               and s["manifest"]["files"] == 3, timeout=120, what="three photos backed up and in the manifest")

    # A token sign-in with a token signed by someone else: refused (the sign-in in place stays).
    forged = world.backend.mint_identity_token(apple_subject("forger"), bad_signature=True)
    r = d.ctl("login", "--identity-token", "-", input=forged + "\n")
    assert r.returncode == 1, (r.stdout, r.stderr)
    d.ctl("pause", check=True)
    d.ctl("resume", user=DAEMON_USER, check=True)
    r = d.ctl("retry", user="nobody", groups="users")
    assert r.returncode == 4, (r.stdout, r.stderr)

    restored = tmp_path / "restored"
    r = d.ctl("restore", "--to", str(restored), timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert sorted(p.read_bytes() for p in restored.rglob("*.jpg")) == sorted(bodies)
    r = d.ctl("verify", timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)

    # A reload with a bad config: refused, the old settings stay; systemd's, in the trail.
    d.sections["upload"] = {"concurrency": "many"}
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_for_record(d, "config.reload")
    del d.sections["upload"]
    d.write_config()
    held = json.loads((d.state_dir / "account.json").read_text())["refreshToken"]
    # The account's key was made here and its recovery key never shown: --forget-key.
    r = d.ctl("logout", "--forget-key", check=True)
    assert "Signed out" in r.stdout and "revoked" in r.stdout, r.stdout

    got = records(d)
    day = [(x["event"], x["details"].get("step"), actor_uid(x), x["outcome"]) for x in got]
    assert day == [
        ("login", "started", 0, "ok"), ("login", "refused", 0, "refused"),
        ("login", "started", 0, "ok"), ("login", "approved", 0, "ok"),
        ("login", "refused", 0, "refused"),
        ("pause", None, 0, "ok"), ("resume", None, daemon_uid, "ok"),
        ("control.refused", None, 65534, "refused"),
        ("restore", "started", 0, "ok"), ("restore", "finished", 0, "ok"),
        ("verify", "started", 0, "ok"), ("verify", "finished", 0, "ok"),
        ("config.reload", None, "systemd", "failed"),
        ("logout", None, 0, "ok"),
    ], json.dumps(got, indent=1)
    assert [x["seq"] for x in got] == list(range(1, len(got) + 1))
    assert [x["at"] for x in got] == sorted(x["at"] for x in got)
    by = {(x["event"], x["details"].get("step")): x for x in got}
    assert got[0]["actor"] == {"uid": 0, "user": "root"}
    assert got[6]["actor"] == {"uid": daemon_uid, "user": DAEMON_USER}
    assert got[7]["actor"] == {"uid": 65534, "user": "nobody"} and got[7]["details"]["call"] == "POST /v1/retry"
    assert all(x["details"]["method"] == "pairing" for x in got[:4]) and got[4]["details"]["method"] == "token"
    assert by[("login", "approved")]["details"]["userId"] == uid
    assert "invalid_token" in got[4]["details"]["why"], got[4]
    started, finished = by[("restore", "started")], by[("restore", "finished")]
    assert {k: v for k, v in started["details"].items() if k != "step"}.items() <= finished["details"].items()
    assert finished["details"]["device"] == "nas-day" and finished["details"]["destination"] == str(restored)
    assert (finished["details"]["files"], finished["details"]["restored"], finished["details"]["failed"]) == (3, 3, 0)
    verified = by[("verify", "finished")]["details"]
    assert (verified["checked"], verified["missing"], verified["mismatched"]) == (3, 0, 0), verified
    reload = got[12]
    assert reload["details"]["path"] == str(d.config_path) and "upload.concurrency" in reload["details"]["problem"]
    assert got[13]["details"] == {"wasSignedIn": True, "userId": uid, "backendHeard": True}
    assert [x["refreshToken"] for x in world.backend.revocations()] == [held]

    # The human form names people: who signed in, the restore and who ran it.
    human = d.ctl("audit", check=True).stdout.splitlines()
    assert "root (uid 0)" in human[3] and "approved" in human[3] and uid in human[3]
    assert f"{DAEMON_USER} (uid {daemon_uid})" in human[6] and "resume" in human[6]
    assert "root (uid 0)" in human[9] and "restore" in human[9] and str(restored) in human[9]

    # The chain is whole; an edited byte, a deleted record, two records swapped each break it, named.
    r = d.ctl("audit", "--verify")
    assert r.returncode == 0 and f"whole: {len(got)} records (1–{len(got)})" in r.stdout, (r.stdout, r.stderr)
    path = trail_path(d)
    lines = path.read_bytes().split(b"\n")[:-1]
    assert len(lines) == len(got)
    i = 8   # record 9, the restore's start: its destination's first byte
    at = lines[i].index(str(restored).encode()) + 1   # a letter: the line stays JSON
    edited = lines[i][:at] + bytes([lines[i][at] ^ 0x20]) + lines[i][at + 1:]
    out = verify_fails_at(d, path, b"\n".join(lines[:i] + [edited] + lines[i + 1:]) + b"\n")
    assert "record 9 (audit.log, line 9) was changed" in out, out
    out = verify_fails_at(d, path, b"\n".join(lines[:11] + lines[12:]) + b"\n")
    assert "record 12 is missing before record 13 (audit.log, line 12)" in out, out
    out = verify_fails_at(d, path, b"\n".join(lines[:5] + [lines[6], lines[5]] + lines[7:]) + b"\n")
    assert "records 6 and 7 are out of order" in out and "line 6" in out, out
    # A record forged in between, numbered and chained to the one before as if real: the
    # real one after it does not chain to it.
    fake = json.dumps({"seq": 6, "at": got[5]["at"], "event": "resume", "actor": {"uid": 0, "user": "root"},
                         "outcome": "ok", "details": {}, "prev": hashlib.sha256(lines[4]).hexdigest()},
                        separators=(",", ":")).encode()
    out = verify_fails_at(d, path, b"\n".join(lines[:5] + [fake] + lines[5:]) + b"\n")
    assert "record 6 (audit.log, line 6) was inserted" in out, out
    assert d.ctl("audit", "--verify").returncode == 0

    # No record holds a token, code, key or Apple subject the backend issued or received.
    text = b"".join(p.read_bytes() for p in trail_files(d))
    for secret in world.backend.all_secrets() + [forged]:
        assert secret.encode() not in text, secret[:12]
    assert held.encode() not in text


def test_rotation_keeps_the_chain_across_files(world):
    d = world.daemon(config={"audit": {"max_size": "64KiB"}})
    # Enough records for four files' worth: the oldest file is dropped, the chain goes on.
    for i in range(1300):
        call = b"POST /v1/pause" if i % 2 == 0 else b"POST /v1/resume"
        answer = raw_request(d.socket, call + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    r = d.ctl("audit", "--verify", "--json")
    verdict = json.loads(r.stdout)
    assert r.returncode == 0 and verdict["whole"], r.stdout
    assert verdict["files"] == ["audit.log.2", "audit.log.1", "audit.log"] and verdict["lastSeq"] == 1300
    assert verdict["firstSeq"] > 1 and verdict["records"] == 1300 - verdict["firstSeq"] + 1
    files = trail_files(d)
    for f in files:
        assert f.stat().st_size <= 64 << 10 and stat.S_IMODE(f.stat().st_mode) == 0o600
    # Each file's first record carries the hash of the previous file's last line.
    for older, newer in zip(files, files[1:]):
        last = older.read_bytes().split(b"\n")[-2]
        first = json.loads(newer.read_bytes().split(b"\n")[0])
        assert first["prev"] == hashlib.sha256(last).hexdigest() and first["seq"] == json.loads(last)["seq"] + 1
    assert [x["seq"] for x in records(d, "--limit", "10000")] == list(range(verdict["firstSeq"], 1301))
    # The last record of audit.log.1 deleted: caught where the next file begins.
    middle = files[1]
    lines = middle.read_bytes().split(b"\n")[:-1]
    seq = json.loads(lines[-1])["seq"]
    out = verify_fails_at(d, middle, b"\n".join(lines[:-1]) + b"\n")
    assert f"record {seq} is missing before record {seq + 1} (audit.log, line 1)" in out, out
    # The oldest file gone: the start is cut, which the queue database's head tells.
    oldest = files[0]
    kept = oldest.read_bytes()
    oldest.unlink()
    try:
        r = d.ctl("audit", "--verify")
        assert r.returncode == 1 and "missing at the start" in r.stdout, r.stdout
    finally:
        oldest.write_bytes(kept)
        os.chmod(oldest, 0o600)
    assert d.ctl("audit", "--verify").returncode == 0


# ---- a sign-out the backend hears ---------------------------------------------------------

def test_logout_with_the_backend_up_revokes_the_sign_in(world):
    d = world.daemon()
    uid = world.login(d)
    d.wait_for(lambda s: s["state"] == "running", what="signed in")
    saved = json.loads((d.state_dir / "account.json").read_text())
    device = (d.state_dir / "device-id").read_text().strip()
    r = d.ctl("logout", "--forget-key", check=True)
    assert "Signed out. The backend revoked this NAS's sign-in" in r.stdout, r.stdout
    assert not (d.state_dir / "account.json").exists()
    revoked = world.backend.revocations()
    assert len(revoked) == 1 and revoked[0]["refreshToken"] == saved["refreshToken"]
    assert revoked[0]["known"] and revoked[0]["deviceHeader"] == device and revoked[0]["userId"] == uid
    # The old refresh token, and the access token issued with it, are refused from now on.
    answer = requests.post(world.backend.url + "/api/auth/refresh", json={"refreshToken": saved["refreshToken"]},
                           headers={"X-Device-ID": device}, timeout=10)
    assert answer.status_code in (400, 401) and answer.json()["error"] == "invalid_grant", answer.text
    answer = requests.post(world.backend.url + "/api/v1/auth/sts-token", headers={
        "Authorization": f"Bearer {saved['accessToken']}", "X-Device-ID": device}, timeout=10)
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_token", answer.text
    last = records(d)[-1]
    assert (last["event"], last["outcome"], actor_uid(last)) == ("logout", "ok", 0)
    assert last["details"] == {"wasSignedIn": True, "userId": uid, "backendHeard": True}
    assert d.status()["account"] == {"signedIn": False, "userId": None}


@pytest.mark.parametrize("down", ["stopped", "dropped"])
def test_logout_with_the_backend_down_still_forgets_and_says_so(world, down):
    d = world.daemon()
    uid = world.login(d)
    d.wait_for(lambda s: s["state"] == "running", what="signed in")
    if down == "stopped":
        world.backend.stop()          # connection refused
    else:
        world.backend.fail("revoke", drop=True)   # connection closed without an answer
    began = time.monotonic()
    r = d.ctl("logout", "--forget-key")
    took = time.monotonic() - began
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "this NAS forgot its sign-in; the backend could not be told" in r.stdout and len(r.stdout.splitlines()) == 1, r.stdout
    assert took < 12, took
    assert not (d.state_dir / "account.json").exists()
    s = d.status()
    assert s["account"] == {"signedIn": False, "userId": None} and s["state"] == "needsLogin"
    last = records(d)[-1]
    assert (last["event"], last["outcome"], actor_uid(last)) == ("logout", "failed", 0)
    assert last["details"]["backendHeard"] is False and last["details"]["userId"] == uid
    assert "could not be reached" in last["details"]["why"], last
    assert "the backend could not be told" in d.log()
    # The backend is back: the daemon never asks again (the sign-in is gone from this NAS).
    if down == "stopped":
        world.backend.start()
    else:
        world.backend.clear_faults()
    time.sleep(3)
    assert world.backend.revocations() == []
