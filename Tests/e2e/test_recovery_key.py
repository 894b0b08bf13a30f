"""The account key and the recovery key (privacy.md, issue 23 item 1), end to end: the
first NAS of an account makes the key at its first sign-in and `login` says to keep the
recovery key; `recovery-key --json` shows it to root and refuses a group member (exit 4);
a second NAS of the same Apple ID says `needed`, keeps uploading photos, refuses a typo
and a wrong key and takes the right one; `--rotate` leaves the account key as it was and
makes the old recovery key useless on a third NAS; kill -9 while the key is made and
while it is rotated leaves the account readable with a key `recovery-key` shows. The key
object is checked with the independent reader (support/vault.py, Python's
`cryptography`), and the recovery key is searched for in every log, status, audit trail
and bucket object."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from support import vault
from support.daemon import binary
from support.fake_backend import user_id_for
from support.kill_triggers import IN_CREATE, IN_MOVED_TO, kill_on_file
from support.world import apple_subject, settled, write_photo

HINT = "sudo photolalactl recovery-key"
ENTER = "sudo photolalactl recovery-key --enter"


def login(world, d, sub: str):
    """`login` with the secrets on standard input; the completed process (not checked)."""
    token = world.backend.mint_identity_token(sub)
    return d.ctl("login", "--identity-token", "-", "--authorization-code", "-",
                 input=f"{token}\nac_{os.urandom(8).hex()}\n", timeout=90)


def shown(d) -> dict:
    r = d.ctl("recovery-key", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def key_object(world, uid: str) -> bytes:
    return world.moto.s3_admin().get_object(Bucket=world.moto.bucket, Key=vault.key_object_key(uid))["Body"].read()


def account_key(world, uid: str, recovery_key: str) -> bytes:
    """The account key the bucket's key object holds, opened with `recovery_key` alone."""
    key, _created = vault.unwrap(key_object(world, uid), vault.parse_key(recovery_key), uid)
    return key


def recovery(d) -> dict:
    return d.status()["recovery"]


def wait_recovery(d, state: str, timeout: float = 30) -> dict:
    return d.wait_for(lambda s: s["recovery"]["state"] == state, timeout=timeout, what=f"recovery.state {state}")["recovery"]


def assert_key_nowhere(world, daemons, keys):
    """No recovery key in any daemon's log, status (JSON and human), audit trail, or in
    any object of the bucket (bytes or key)."""
    secrets = []
    raw = []
    for k in keys:
        secrets += [k, k.replace("-", ""), k.lower(), k.replace("-", "").lower()]
        raw.append(vault.parse_key(k))
    for d in daemons:
        texts = {"log": d.log()}
        if d.proc and d.proc.poll() is None:
            texts["status"] = d.ctl("status", "--json").stdout + d.ctl("status").stdout
        for name in ("audit.log", "audit.log.1", "audit.log.2"):
            p = d.state_dir / name
            if p.exists():
                texts[name] = p.read_text(errors="replace")
        for where, text in texts.items():
            for s in secrets:
                assert s not in text, f"a recovery key appears in {d.root}'s {where}"
    s3 = world.moto.s3_admin()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=world.moto.bucket):
        for o in page.get("Contents", []):
            body = s3.get_object(Bucket=world.moto.bucket, Key=o["Key"])["Body"].read()
            for s in secrets:
                assert s not in o["Key"] and s.encode() not in body, f"a recovery key appears in {o['Key']}"
            for r in raw:
                assert r not in body, f"a recovery key's bytes appear in {o['Key']}"


def test_first_login_makes_the_key_and_shows_it_to_root_only(world):
    d = world.daemon("a")
    sub = apple_subject("keys")
    uid = user_id_for(sub)
    r = login(world, d, sub)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert HINT in r.stdout and "somewhere other than this NAS" in r.stdout, r.stdout
    rec = wait_recovery(d, "ready")

    k = shown(d)
    assert set(k) >= {"recoveryKey", "fingerprint", "createdAt"}
    assert k["outdated"] is False and k["fingerprint"] == rec["fingerprint"]
    # The bucket's key object opens with the key alone, and holds the key the fingerprint names.
    assert vault.fingerprint(account_key(world, uid, k["recoveryKey"])) == k["fingerprint"]
    assert (d.state_dir / "account-key").stat().st_mode & 0o777 == 0o600
    human = d.ctl("recovery-key", check=True).stdout
    assert k["recoveryKey"] in human and "somewhere other than this NAS" in human

    # A member of the socket's group may read the status, not the key, nor change it.
    for args in (["recovery-key"], ["recovery-key", "--json"], ["recovery-key", "--rotate"]):
        g = d.ctl(*args, user="nobody", groups="users")
        assert g.returncode == 4, (args, g.stdout, g.stderr)
        assert k["recoveryKey"] not in g.stdout + g.stderr
    assert recovery(d)["fingerprint"] == k["fingerprint"]

    events = [(x["event"], x["outcome"]) for x in json.loads(d.ctl("audit", "--json", check=True).stdout)["records"]]
    assert ("recovery-key.shown", "ok") in events and ("control.refused", "refused") in events
    # A login again (the same account) makes nothing new and says nothing of the key.
    again = login(world, d, sub)
    assert again.returncode == 0 and again.stdout.rstrip().endswith("Uploads start now."), again.stdout
    assert shown(d)["recoveryKey"] == k["recoveryKey"]
    assert_key_nowhere(world, [d], [k["recoveryKey"]])


def test_a_second_nas_asks_for_the_key_and_keeps_backing_up(world):
    sub = apple_subject("second")
    uid = user_id_for(sub)
    a = world.daemon("a")
    assert login(world, a, sub).returncode == 0
    wait_recovery(a, "ready")
    key = shown(a)

    b = world.daemon("b")
    r = login(world, b, sub)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert ENTER in r.stdout and "keep the recovery key" not in r.stdout, r.stdout
    rec = wait_recovery(b, "needed")
    assert rec["fingerprint"] is None
    human = b.ctl("status", check=True).stdout
    assert "Action needed:" in human and f"enter this account's recovery key: {ENTER}" in human.lower(), human
    attention = b.status()["attention"]
    assert [x["reason"] for x in attention] == ["recoveryKeyNeeded"] and attention[0]["run"] == ENTER
    nope = b.ctl("recovery-key")
    assert nope.returncode == 1 and "--enter" in nope.stderr, (nope.stdout, nope.stderr)

    # Photos go on meanwhile.
    body = write_photo(b.photos / "while needed.jpg", 54_321)
    b.wait_for(settled(1), timeout=30, what="a photo uploaded while the key is needed")
    assert world.key(uid, body) in world.objects(uid)

    # A typo: caught by the command, nothing sent.
    typo = list(key["recoveryKey"])
    typo[0] = "A" if typo[0] != "A" else "B"
    t = b.ctl("recovery-key", "--enter", input="".join(typo) + "\n")
    assert t.returncode == 1 and "typo" in t.stderr and "Nothing was changed" in t.stderr, (t.stdout, t.stderr)
    # Another key, well formed: the key object does not open with it.
    w = b.ctl("recovery-key", "--enter", input=vault.format_key(os.urandom(16)) + "\n")
    assert w.returncode == 1 and "does not open this account's key" in w.stderr, (w.stdout, w.stderr)
    assert recovery(b)["state"] == "needed" and not (b.state_dir / "account-key").exists()
    # The right one, as a person might type it.
    ok = b.ctl("recovery-key", "--enter", input=key["recoveryKey"].lower().replace("-", " ") + "\n")
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    assert key["fingerprint"] in ok.stdout
    rec = wait_recovery(b, "ready")
    assert rec["fingerprint"] == key["fingerprint"]
    assert b.status()["attention"] == []
    assert shown(b)["recoveryKey"] == key["recoveryKey"]

    events = [(x["event"], x["outcome"], x["details"]) for x in json.loads(b.ctl("audit", "--json", check=True).stdout)["records"]]
    keyed = [(e, o, dt.get("reason")) for e, o, dt in events if e.startswith("recovery-key")]
    assert keyed[:3] == [("recovery-key.refused", "refused", "not_held"), ("recovery-key.refused", "refused", "wrong_key"),
                         ("recovery-key.entered", "ok", None)], keyed
    assert_key_nowhere(world, [a, b], [key["recoveryKey"]])


def test_rotate_keeps_the_account_key_and_voids_the_old_recovery_key(world):
    sub = apple_subject("rotate")
    uid = user_id_for(sub)
    a = world.daemon("a")
    assert login(world, a, sub).returncode == 0
    wait_recovery(a, "ready")
    old = shown(a)
    # B holds the old key when A rotates.
    b = world.daemon("b")
    assert login(world, b, sub).returncode == 0
    wait_recovery(b, "needed")
    b.ctl("recovery-key", "--enter", input=old["recoveryKey"] + "\n", check=True)

    r = a.ctl("recovery-key", "--rotate", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    new = json.loads(r.stdout)
    assert new["recoveryKey"] != old["recoveryKey"] and new["fingerprint"] == old["fingerprint"]
    assert shown(a)["recoveryKey"] == new["recoveryKey"]
    assert vault.fingerprint(account_key(world, uid, new["recoveryKey"])) == old["fingerprint"]
    with pytest.raises(vault.Refused):
        account_key(world, uid, old["recoveryKey"])

    # B keeps the account key; once it looks again (here: a restart), its copy is outdated.
    assert b.stop() == 0
    b.start()
    rec = b.wait_for(lambda s: s["recovery"]["state"] == "ready" and s["recovery"]["outdated"], what="B's copy outdated")["recovery"]
    assert rec["fingerprint"] == old["fingerprint"]
    assert shown(b)["outdated"] is True
    assert "outdated" in b.ctl("recovery-key", check=True).stdout

    # A third NAS: the old key is refused, the new one accepted.
    c = world.daemon("c")
    assert login(world, c, sub).returncode == 0
    wait_recovery(c, "needed")
    refused = c.ctl("recovery-key", "--enter", input=old["recoveryKey"] + "\n")
    assert refused.returncode == 1 and "does not open this account's key" in refused.stderr, refused.stderr
    c.ctl("recovery-key", "--enter", input=new["recoveryKey"] + "\n", check=True)
    assert wait_recovery(c, "ready")["fingerprint"] == old["fingerprint"]
    events = [x["event"] for x in json.loads(a.ctl("audit", "--json", check=True).stdout)["records"]]
    assert "recovery-key.rotated" in events
    assert_key_nowhere(world, [a, b, c], [old["recoveryKey"], new["recoveryKey"]])


def test_two_nases_signing_in_at_once_make_one_key(world):
    sub = apple_subject("race")
    uid = user_id_for(sub)
    a, b = world.daemon("a"), world.daemon("b")
    logins = {}
    threads = [threading.Thread(target=lambda d=d: logins.__setitem__(d.root, login(world, d, sub))) for d in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for d in (a, b):
        assert logins[d.root].returncode == 0, (logins[d.root].stdout, logins[d.root].stderr)
    settle = {d.root: d.wait_for(lambda s: s["recovery"]["state"] in ("ready", "needed"), what="the key settled")["recovery"]
              for d in (a, b)}
    assert sorted(r["state"] for r in settle.values()) == ["needed", "ready"], settle
    winner, loser = (a, b) if settle[a.root]["state"] == "ready" else (b, a)
    # The winner's login says to keep the key, the loser's to enter it.
    assert "somewhere other than this NAS" in logins[winner.root].stdout, logins[winner.root].stdout
    assert ENTER in logins[loser.root].stdout and "somewhere other than this NAS" not in logins[loser.root].stdout
    k = shown(winner)
    assert vault.fingerprint(account_key(world, uid, k["recoveryKey"])) == k["fingerprint"]
    assert not (loser.state_dir / "account-key").exists()
    keys = world.moto.s3_admin().list_objects_v2(Bucket=world.moto.bucket, Prefix=f"metadata/{uid}/keys/").get("Contents", [])
    assert [o["Key"] for o in keys] == [vault.key_object_key(uid)]
    loser.ctl("recovery-key", "--enter", input=k["recoveryKey"] + "\n", check=True)
    assert wait_recovery(loser, "ready")["fingerprint"] == k["fingerprint"]
    assert_key_nowhere(world, [a, b], [k["recoveryKey"]])


def test_logout_erases_the_key_file_and_the_key_object_stays(world):
    sub = apple_subject("logout")
    uid = user_id_for(sub)
    d = world.daemon("a")
    assert login(world, d, sub).returncode == 0
    wait_recovery(d, "ready")
    k = shown(d)
    d.ctl("logout", check=True)
    assert not (d.state_dir / "account-key").exists()
    assert recovery(d)["state"] == "none"
    nope = d.ctl("recovery-key")
    assert nope.returncode == 1 and "login" in nope.stderr, (nope.stdout, nope.stderr)
    # The account's other NASes and the recovery key still need the key object.
    assert vault.fingerprint(account_key(world, uid, k["recoveryKey"])) == k["fingerprint"]
    # Signed in again, this NAS is one that asks for the key, and takes it.
    again = login(world, d, sub)
    assert again.returncode == 0 and ENTER in again.stdout, again.stdout
    wait_recovery(d, "needed")
    d.ctl("recovery-key", "--enter", input=k["recoveryKey"] + "\n", check=True)
    assert wait_recovery(d, "ready")["fingerprint"] == k["fingerprint"]
    assert_key_nowhere(world, [d], [k["recoveryKey"]])


# Where a kill lands in a write of the key file: its temporary file made (the step before it
# done, this one not), the file renamed into place (this step saved, the bucket maybe not
# written yet), the second temporary file (the bucket written, the last step not saved).
KILL_POINTS = {
    "before the first save": ("account-key.tmp", IN_CREATE, 0),
    "after the first save": ("account-key", IN_MOVED_TO, 0),
    "after the bucket's write": ("account-key.tmp", IN_CREATE, 1),
}


def kill_at(d, point: str, action) -> bool:
    """Runs `action` while a watcher kills `d` at `point`; True when it fired."""
    name, mask, skip = KILL_POINTS[point]
    fired = []
    watcher = threading.Thread(target=lambda: fired.append(kill_on_file(d.proc.pid, d.state_dir, name, mask, 30, skip)))
    watcher.start()
    time.sleep(0.2)   # the watch is in place
    try:
        action()
    except subprocess.TimeoutExpired:
        pass
    watcher.join()
    d.kill9()
    return bool(fired and fired[0])


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill9_while_the_key_is_made(world, point):
    sub = apple_subject("kill-make")
    uid = user_id_for(sub)
    d = world.daemon("a")
    assert kill_at(d, point, lambda: login(world, d, sub)), f"the daemon was not killed {point}"
    d.start()
    rec = wait_recovery(d, "ready")
    k = shown(d)
    assert k["fingerprint"] == rec["fingerprint"]
    assert vault.fingerprint(account_key(world, uid, k["recoveryKey"])) == k["fingerprint"]
    assert not (d.state_dir / "account-key.tmp").exists()
    # Another NAS of the account asks for that very key, and takes it.
    b = world.daemon("b")
    assert login(world, b, sub).returncode == 0
    wait_recovery(b, "needed")
    b.ctl("recovery-key", "--enter", input=k["recoveryKey"] + "\n", check=True)
    assert_key_nowhere(world, [d, b], [k["recoveryKey"]])


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill9_while_the_key_is_rotated(world, point):
    sub = apple_subject("kill-rotate")
    uid = user_id_for(sub)
    d = world.daemon("a")
    assert login(world, d, sub).returncode == 0
    wait_recovery(d, "ready")
    old = shown(d)

    def rotate():
        subprocess.run([binary(), "ctl", "recovery-key", "--rotate", "--json", "--socket", d.socket],
                       capture_output=True, timeout=30)

    assert kill_at(d, point, rotate), f"the daemon was not killed {point}"
    d.start()
    rec = wait_recovery(d, "ready")
    now = shown(d)
    # The same account key, and the recovery key recovery-key shows now opens it in the bucket.
    assert now["fingerprint"] == rec["fingerprint"] == old["fingerprint"]
    assert vault.fingerprint(account_key(world, uid, now["recoveryKey"])) == old["fingerprint"]
    if now["recoveryKey"] != old["recoveryKey"]:
        with pytest.raises(vault.Refused):
            account_key(world, uid, old["recoveryKey"])
    assert_key_nowhere(world, [d], [old["recoveryKey"], now["recoveryKey"]])
