"""The audit trail (cli.md "audit", issue 24) as far as it is hooked today: pause, resume,
rescan and retry by root, calls refused to a group member; `audit --json` lists them in
order with who and how, `audit --verify` proves the chain and names the place once a byte
is edited, a line deleted or two lines swapped; and a signed-in daemon with nothing to do
writes nothing to the trail (a NAS's disks may spin down)."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import time

import pytest

from support.daemon import Daemon


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
