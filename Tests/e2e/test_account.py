"""The account side, end to end: pairing and identity-token sign-in through
`photolalactl login`, the saved sign-in across restarts and logout, the Apple
credential-state schedule (revocation, re-authorization, a backend outage) and what
`photolalactl status` says in each state. The real daemon talks to the fake backend
(shared/spec/backend-api.md) and, through the fault proxy, to moto. Every test ends by
checking that no daemon log line holds a token, code, STS key or Apple subject."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from support.daemon import binary
from support.fake_backend import user_id_for
from support.world import (PairingLogin, apple_subject, assert_no_secrets_in_files, files_under, mode, settled,
                           write_photo)

MiB = 1 << 20


def human(d) -> str:
    return d.ctl("status", check=True).stdout


def s3_writes(world, since: float = 0.0) -> list[dict]:
    return [r for r in world.s3_ops(since) if r["method"] in ("PUT", "POST", "DELETE")]


# ---- pairing ---------------------------------------------------------------------------

def test_pairing_approved_after_a_few_polls(world):
    world.backend.configure(pairing_interval=1)
    d = world.daemon(config={"account": {"device_name": "nas-livingroom"}})
    text = human(d)
    assert "not signed in" in text.lower() and "photolalactl login" in text

    login = PairingLogin(d)
    try:
        code = login.code()
        assert f"{world.backend.url}/pair" in login.text
        # The user takes a while: the daemon keeps polling, no faster than the interval.
        deadline = time.monotonic() + 15
        while len(world.backend.pairings()[0]["polls"]) < 3:
            assert time.monotonic() < deadline, world.backend.pairings()
            time.sleep(0.1)
        sub = apple_subject("pairing")
        world.backend.approve_pairing(code, sub)
        rc, out, err = login.wait(30)
    finally:
        login.kill()
    uid = user_id_for(sub)
    assert rc == 0, (out, err)
    assert "Signed in" in out and uid in out

    p = world.backend.stats()["pairings"][0]
    assert p["deviceName"] == "nas-livingroom"
    assert set(p["answers"][:-1]) == {"authorization_pending"} and p["answers"][-1] == "paired"
    assert len(p["polls"]) >= 4
    gaps = [b - a for a, b in zip(p["polls"], p["polls"][1:])]
    assert min(gaps) >= 0.95, gaps
    s = d.status()
    assert s["account"] == {"signedIn": True, "userId": uid} and s["state"] == "running"
    # Signed in for real: a photo goes up under the paired user's prefix.
    body = write_photo(d.photos / "first.jpg", 12_345)
    d.wait_for(settled(1), timeout=20)
    assert set(world.objects(uid)) == {world.key(uid, body)}
    assert f"signed in as {uid}" in human(d)


@pytest.mark.parametrize("outcome", ["denied", "expired"])
def test_pairing_denied_or_expired_fails_with_a_reason(world, outcome):
    world.backend.configure(pairing_interval=1)
    d = world.daemon()
    login = PairingLogin(d)
    try:
        code = login.code()
        time.sleep(1.5)
        if outcome == "denied":
            world.backend.deny_pairing(code)
        else:
            world.backend.expire_pairing(code)
        rc, out, err = login.wait(20)
    finally:
        login.kill()
    assert rc == 1, (out, err)
    assert "sign-in failed" in err
    assert ("declined" if outcome == "denied" else "expired") in err, err
    answers = world.backend.stats()["pairings"][0]["answers"]
    assert answers[-1] == ("access_denied" if outcome == "denied" else "expired_token")
    # It stopped polling after the final answer.
    n = world.backend.stats()["calls"]["device-token"]["count"]
    time.sleep(2.5)
    assert world.backend.stats()["calls"]["device-token"]["count"] == n
    s = d.status()
    assert s["state"] == "needsLogin" and not s["account"]["signedIn"]
    assert not (d.state_dir / "account.json").exists()


def test_pairing_slow_down_adds_five_seconds(world):
    world.backend.configure(pairing_interval=1)
    # The backend's first answer is slow_down (RFC 8628: add 5 s and keep polling).
    world.backend.fail("device-token", status=400, error="slow_down", message="polling too fast", count=1)
    d = world.daemon()
    login = PairingLogin(d)
    try:
        code = login.code()
        calls = lambda: world.backend.stats()["calls"]["device-token"]
        deadline = time.monotonic() + 20
        while calls()["count"] < 3:   # slow_down, then two pending polls at the new pace
            assert time.monotonic() < deadline, calls()
            time.sleep(0.1)
        world.backend.approve_pairing(code, apple_subject("slow"))
        rc, out, err = login.wait(20)
    finally:
        login.kill()
    assert rc == 0, (out, err)
    c = calls()
    assert c["statuses"][0] == 400 and c["statuses"][-1] == 200
    gaps = [b - a for a, b in zip(c["times"], c["times"][1:])]
    # Every poll after the slow_down is at least 1 + 5 s after the one before.
    assert len(gaps) >= 2 and min(gaps) >= 5.9, gaps
    assert max(gaps) <= 8, gaps
    # ... and the backend itself never had to say slow_down.
    assert "slow_down" not in world.backend.stats()["pairings"][0]["answers"]


def test_pairing_code_shows_when_stdout_is_a_pipe(world):
    world.backend.configure(pairing_interval=1)
    d = world.daemon()
    proc = subprocess.Popen([binary(), "ctl", "login", "--socket", d.socket], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not world.backend.pairings():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        code = world.backend.pairings()[0]["userCode"]
        os.set_blocking(proc.stdout.fileno(), False)
        time.sleep(2)
        early = proc.stdout.read() or b""
        world.backend.approve_pairing(code, apple_subject("pipe"))
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert code.encode() in early, early


def test_status_reads_well_while_pairing(world):
    world.backend.configure(pairing_interval=1)
    d = world.daemon()
    login = PairingLogin(d)
    try:
        code = login.code()
        text = human(d)
    finally:
        login.kill()
    assert code in text and "Pairing" in text, text


# ---- identity tokens -------------------------------------------------------------------

def test_login_by_identity_token(world):
    d = world.daemon()
    uid = world.login(d)
    s = d.status()
    assert s["state"] == "running" and s["account"] == {"signedIn": True, "userId": uid}
    assert s["appleCredential"]["state"] in ("unknown", "authorized")
    d.wait_for(lambda s: s["appleCredential"]["state"] == "authorized", timeout=10)
    text = human(d)
    assert f"signed in as {uid}" in text and "Apple ID   authorized" in text
    assert mode(d.state_dir) == 0o700
    assert mode(d.state_dir / "account.json") == 0o600
    apple = world.backend.stats()["calls"]["apple"]
    assert apple["statuses"] == [200]


@pytest.mark.parametrize("mint,why", [
    ({"aud": "com.example.someone-else"}, "audience"),
    ({"bad_signature": True}, "signature"),
    ({"expires_in": -60}, "expired"),
])
def test_bad_identity_token_is_refused_clearly(world, mint, why):
    d = world.daemon()
    token = world.backend.mint_identity_token(apple_subject("refused"), **mint)
    r = d.ctl("login", "--identity-token", "-", input=token + "\n")
    assert r.returncode == 1, r
    assert r.stdout == ""
    msg = r.stderr.strip()
    assert msg.startswith("photolalactl: sign-in failed:") and "refused" in msg and why in msg, msg
    assert len(msg.splitlines()) == 1
    assert token not in r.stderr
    s = d.status()
    assert s["state"] == "needsLogin" and s["account"]["signedIn"] is False
    assert not (d.state_dir / "account.json").exists()


# ---- restarts, logout, file modes ------------------------------------------------------

def test_sign_in_and_pause_survive_a_restart(world):
    d = world.daemon()
    uid = world.login(d)
    r = d.ctl("pause", check=True)
    assert "paused" in r.stdout.lower()
    text = human(d)
    assert "Paused (user)" in text and "Paused by you" in text and "photolalactl resume" in text
    write_photo(d.photos / "held.jpg", 40_000)
    d.wait_for(lambda s: s["queue"]["pending"] == 1 and s["queue"]["hashing"] == 0, timeout=15)
    assert d.stop() == 0

    d.start()
    s = d.status()
    assert s["account"] == {"signedIn": True, "userId": uid}
    assert s["state"] == "paused" and s["pauseReason"] == "user"
    assert "Paused by you" in human(d)
    time.sleep(1.5)
    assert s3_writes(world) == []
    # The state directory and every file in it are private to the daemon's user.
    assert mode(d.state_dir) == 0o700
    names = {p.name for p in files_under(d.state_dir)}
    assert {"account.json", "queue.db"} <= names, names
    for f in files_under(d.state_dir):
        assert mode(f) == 0o600, (f, oct(mode(f)))

    d.ctl("resume", check=True)
    d.wait_for(lambda s: settled(1)(s) and s["state"] == "running", timeout=20)
    assert len(world.objects(uid)) == 1
    assert "All 1 files backed up" in human(d)
    # The restarted daemon used the saved sign-in: one sign-in only.
    assert world.backend.stats()["calls"]["apple"]["count"] == 1


def test_logout_leaves_no_secret_under_the_state_dir(world):
    world.backend.configure(rotate_refresh_tokens=True)
    d = world.daemon()
    uid = world.login(d)
    write_photo(d.photos / "a.jpg", 20_000)
    d.wait_for(settled(1), timeout=20)
    # A refresh too, so that several generations of tokens were issued and saved.
    world.backend.expire_access_tokens()
    d.stop()
    d.start()
    d.wait_for(lambda s: world.backend.stats()["calls"]["refresh"]["count"] >= 1
               and s["appleCredential"]["state"] == "authorized", timeout=15)
    saved = (d.state_dir / "account.json").read_bytes()
    assert world.backend.secrets()["refreshTokens"][-1].encode() in saved   # the search below can find things

    # This sign-in made the account's key here and never showed its recovery key: the sign-in
    # is what this test is about, so the key goes too (privacy.md "No side doors").
    r = d.ctl("logout", "--forget-key", check=True)
    assert "Signed out" in r.stdout
    s = d.status()
    assert s["state"] == "needsLogin" and s["account"] == {"signedIn": False, "userId": None}
    assert s["credentials"] == s["credentials"] | {"state": "none", "expiresAt": None}
    text = human(d)
    assert "not signed in" in text.lower() and "photolalactl login" in text
    assert_no_secrets_in_files(world.backend, d.state_dir)
    # Also after the daemon closed its database (WAL checkpointed into queue.db).
    d.stop()
    assert_no_secrets_in_files(world.backend, d.state_dir)
    d.start()
    assert d.status()["account"]["signedIn"] is False
    n = len(s3_writes(world))
    write_photo(d.photos / "after-logout.jpg", 9_999)
    time.sleep(2.5)
    assert len(s3_writes(world)) == n
    assert len(world.objects(uid)) == 1   # only the photo from before the logout


# ---- Apple credential state -------------------------------------------------------------

def test_revocation_pauses_within_one_check_interval_and_reauthorization_resumes(world):
    # A bandwidth limit keeps uploads under way when the revocation lands.
    d = world.daemon(config={"credentials": {"apple_check_interval": "2s"},
                             "upload": {"bandwidth_limit": "2MiB/s", "concurrency": 2}})
    uid = world.login(d)
    pid = d.proc.pid
    bodies = [write_photo(d.photos / f"burst/{i:02d}.jpg", MiB + i) for i in range(12)]
    deadline = time.monotonic() + 20
    while len([r for r in s3_writes(world) if r["status"] == 200]) < 2:
        assert time.monotonic() < deadline, world.s3_ops()
        time.sleep(0.05)

    world.backend.set_apple_state("revoked")
    revoked_at = time.time()
    s = d.wait_for(lambda s: s["state"] == "paused", timeout=10, interval=0.05, what="the revocation pause")
    seen_at = time.time()
    # Within one check interval (2 s, up to 10% jitter), plus the call and the status poll.
    assert seen_at - revoked_at <= 2.2 + 0.8, seen_at - revoked_at
    assert s["pauseReason"] == "appleRevoked" and s["appleCredential"]["state"] == "revoked"
    assert s["credentials"]["state"] == "none" and s["credentials"]["expiresAt"] is None
    text = human(d)
    assert "Paused (appleRevoked)" in text and "no longer authorizes" in text and "photolalactl login" in text

    # Nothing reaches S3 any more, new photos included (they are still read and queued).
    more = [write_photo(d.photos / f"later/{i}.jpg", 50_000 + i) for i in range(3)]
    time.sleep(5)
    late = s3_writes(world, since=seen_at)
    assert late == [], late
    s = d.status()
    assert s["state"] == "paused" and s["queue"]["failed"] == 0
    uploaded_during_pause = s["queue"]["uploaded"]
    assert uploaded_during_pause < len(bodies)

    # Re-authorized: uploading resumes by itself, without a restart.
    world.backend.set_apple_state("authorized")
    d.wait_for(lambda s: s["state"] == "running", timeout=3.5, interval=0.1, what="the lifted pause")
    d.wait_for(settled(len(bodies) + len(more)), timeout=60, what="every file after re-authorization")
    assert d.proc.pid == pid and d.proc.poll() is None
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies + more}
    assert d.status()["queue"]["failed"] == 0


def test_a_shorter_check_interval_applies_at_reload(world):
    # Started with the default six hours: a user who wants revocations seen sooner lowers
    # the interval and reloads; it counts from the last check, not after the six hours.
    d = world.daemon()
    world.login(d)
    s = d.wait_for(lambda s: s["appleCredential"]["state"] == "authorized", timeout=10, what="the first check")
    assert s["appleCredential"]["nextCheckAt"] > s["appleCredential"]["checkedAt"]
    world.backend.set_apple_state("revoked")
    d.sections.setdefault("credentials", {})["apple_check_interval"] = "2s"
    d.write_config()
    d.signal(signal.SIGHUP)
    s = d.wait_for(lambda s: s["state"] == "paused", timeout=8, interval=0.1, what="the revocation after the reload")
    assert s["pauseReason"] == "appleRevoked"
    assert "configuration reloaded" in d.log()
    # And every two seconds from then on: re-authorization is seen as soon.
    world.backend.set_apple_state("authorized")
    d.wait_for(lambda s: s["state"] == "running", timeout=5, interval=0.1, what="the lifted pause")


def test_backend_outage_during_a_check_changes_nothing(world):
    d = world.daemon(config={"credentials": {"apple_check_interval": "2s"}})
    uid = world.login(d)
    first = write_photo(d.photos / "before.jpg", 10_000)
    d.wait_for(lambda s: settled(1)(s) and s["appleCredential"]["state"] == "authorized", timeout=20)
    before = d.status()

    for endpoint in ("credential-state", "refresh", "sts-token", "apple"):
        world.backend.fail(endpoint, status=503, error="unavailable", message="backend down")
    s = d.wait_for(lambda s: s["appleCredential"]["lastError"] is not None, timeout=8, what="a failed check")
    assert s["state"] == "running" and s["pauseReason"] is None
    assert s["appleCredential"]["state"] == "authorized"
    assert s["account"] == before["account"]
    assert s["credentials"]["state"] == "valid" and s["credentials"]["expiresAt"] == before["credentials"]["expiresAt"]
    assert "last check failed" in human(d)
    # Uploads go on with the credentials held.
    second = write_photo(d.photos / "during.jpg", 10_000)
    d.wait_for(settled(2), timeout=20)
    time.sleep(2.5)   # more failed checks, backing off
    s = d.status()
    assert s["state"] == "running" and s["appleCredential"]["state"] == "authorized"
    failed_checks = world.backend.stats()["calls"]["credential-state"]["statuses"].count(503)
    assert 1 <= failed_checks <= 8, failed_checks   # retried with backoff, not in a loop

    world.backend.clear_faults()
    d.wait_for(lambda s: s["appleCredential"]["lastError"] is None, timeout=10, what="a good check again")
    assert d.status()["state"] == "running"
    assert set(world.objects(uid)) == {world.key(uid, first), world.key(uid, second)}


# ---- refresh tokens ----------------------------------------------------------------------

def test_concurrent_expired_access_token_refreshes_keep_the_sign_in(world):
    """The STS fetch and the Apple check both meet the expired access token; with
    rotating refresh tokens, two refreshes would sign the NAS out (the second one's
    refresh token died with the first answer). One refresh must serve both."""
    d = world.daemon()
    uid = world.login(d)
    d.ctl("pause", check=True)
    bodies = [write_photo(d.photos / f"p{i}.jpg", 5_000 + i) for i in range(3)]
    d.wait_for(lambda s: s["queue"]["pending"] == 3 and s["queue"]["hashing"] == 0, timeout=15)
    d.stop()
    world.backend.expire_access_tokens()
    # A slow refresh widens the window in which both callers need it.
    world.backend.fail("refresh", status=None, hang=1.5)
    d.start()
    d.ctl("resume", check=True)
    d.wait_for(lambda s: settled(3)(s) or s["state"] == "needsLogin", timeout=20)
    s = d.status()
    assert s["state"] == "running" and s["account"]["signedIn"], s
    refresh = world.backend.stats()["calls"]["refresh"]
    assert refresh["statuses"] == [200], refresh
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    saved = json.loads((d.state_dir / "account.json").read_text())
    assert saved["refreshToken"] == world.backend.secrets()["refreshTokens"][-1]


def test_revoked_refresh_token_asks_for_a_new_login(world):
    d = world.daemon()
    world.login(d)
    d.stop()
    world.backend.expire_access_tokens()
    world.backend.revoke_refresh_tokens()
    d.start()
    s = d.wait_for(lambda s: s["state"] == "needsLogin", timeout=15, what="needsLogin")
    assert s["account"]["signedIn"] is False
    text = human(d)
    assert "not signed in" in text.lower() and "photolalactl login" in text
    assert_no_secrets_in_files(world.backend, d.state_dir)
