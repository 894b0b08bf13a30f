"""`recovery-key --rotate --new-account-key` (issue 31 item 10, privacy.md "No side doors"):
a new account key; every object under `metadata/{userId}/devices/` of every device sealed
again under it; afterwards the old recovery key and any old copy of the key object open
nothing written since, and the account's other NASes ask for the new recovery key (status
`needed`, a notification), take it, and go on writing their manifests. kill -9 at each
step leaves the account readable (every device's manifest whole, read by the independent
reader from the bucket alone) with one of the keys the user was shown, and the next
start finishes the step. The attack it answers: anyone who ever held an old recovery key
and a copy of the key object (the storage operator always has one) kept the account key
for good, since `--rotate` alone never changes it."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from support import manifest_reader, vault
from support.daemon import binary
from support.fake_backend import user_id_for
from support.kill_triggers import IN_CREATE, IN_MOVED_TO, ResponseTrigger, kill_on_file
from support.notify_receivers import Receiver
from support.world import apple_subject, settled, write_photo

ENTER = "sudo photolalactl recovery-key --enter"


def login(world, d, sub: str):
    token = world.backend.mint_identity_token(sub)
    r = d.ctl("login", "--identity-token", "-", "--authorization-code", "-",
              input=f"{token}\nac_{os.urandom(8).hex()}\n", timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr)


def shown(d) -> dict:
    r = d.ctl("recovery-key", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def manifest_idle(files: int):
    def check(s: dict) -> bool:
        m = s.get("manifest") or {}
        return m.get("state") == "idle" and m.get("files") == files and m.get("format") == 2
    return check


def device_id(d) -> str:
    return d.status()["manifest"]["deviceId"]


def two_nases(world, tag: str, hook: Receiver | None = None):
    """A with two photos and B with one, of one account, both holding the key, both
    manifests in the bucket."""
    sub = apple_subject(tag)
    uid = user_id_for(sub)
    a = world.daemon("a")
    write_photo(a.photos / "a1.jpg", 21_000)
    write_photo(a.photos / "a2.jpg", 22_000)
    login(world, a, sub)
    a.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="the account key made")
    a.wait_for(manifest_idle(2), timeout=90, what="a's manifest")
    key = shown(a)
    config = {"notify": {"webhook": hook.url("/b")}} if hook else None
    b = world.daemon("b", config=config)
    write_photo(b.photos / "b1.jpg", 23_000)
    login(world, b, sub)
    b.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=30, what="b needs the key")
    b.ctl("recovery-key", "--enter", input=key["recoveryKey"] + "\n", check=True)
    b.wait_for(manifest_idle(1), timeout=90, what="b's manifest")
    return uid, a, b, key


def wait_for_event(hook: Receiver, reason: str, timeout: float = 60) -> dict:
    """The first `problem` event for `reason` the receiver got (waiting for it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in hook.events():
            if e.get("event") == "problem" and e.get("reason") == reason:
                return e
        time.sleep(0.2)
    raise AssertionError(f"no {reason} notification in {timeout}s: {hook.events()}")


def readable_with(world, uid: str, recovery_text: str, devices: dict[str, int]) -> bool:
    """Every device's manifest whole with `devices[id]` files, read from the bucket and the
    recovery key alone (the independent reader)."""
    s3 = world.moto.s3_admin()
    try:
        keys = manifest_reader.account_keys(s3, world.moto.bucket, uid, recovery_text)
        for device, files in devices.items():
            m = manifest_reader.read(s3, world.moto.bucket, uid, device, key=keys)
            if len(manifest_reader.replay(m["records"])) != files:
                return False
    except (vault.Refused, manifest_reader.Damaged):
        return False
    return True


def sealed_objects(world, uid: str) -> dict[str, bytes]:
    s3 = world.moto.s3_admin()
    return {k: s3.get_object(Bucket=world.moto.bucket, Key=k)["Body"].read()
            for k in manifest_reader.list_keys(s3, world.moto.bucket, f"metadata/{uid}/devices/")}


def test_a_new_account_key_seals_everything_again_and_the_other_nas_asks_for_it(world):
    hook = Receiver("json").start()
    try:
        uid, a, b, old = two_nases(world, "newkey", hook)
        da, db = device_id(a), device_id(b)
        s3 = world.moto.s3_admin()
        old_object = s3.get_object(Bucket=world.moto.bucket, Key=vault.key_object_key(uid))["Body"].read()
        old_account = manifest_reader.account_key(s3, world.moto.bucket, uid, old["recoveryKey"])

        r = a.ctl("recovery-key", "--rotate", "--new-account-key", "--json", timeout=300)
        assert r.returncode == 0, (r.stdout, r.stderr)
        new = json.loads(r.stdout)
        assert new["fingerprint"] != old["fingerprint"] and new["previousFingerprint"] == old["fingerprint"]
        assert new["recoveryKey"] != old["recoveryKey"] and new["devices"] == 2 and new["sealed"] >= 4
        human = a.ctl("recovery-key", check=True).stdout
        assert new["recoveryKey"] in human and new["fingerprint"] in human

        # The new recovery key reads every device whole; the old one and the old key object
        # open nothing written since.
        assert readable_with(world, uid, new["recoveryKey"], {da: 2, db: 1})
        assert not readable_with(world, uid, old["recoveryKey"], {da: 2, db: 1})
        assert vault.unwrap(old_object, vault.parse_key(old["recoveryKey"]), uid)[0] == old_account
        for k, body in sealed_objects(world, uid).items():
            with pytest.raises(vault.Refused):
                vault.open_sealed(body, old_account, k)
        events = [x["event"] for x in json.loads(a.ctl("audit", "--json", check=True).stdout)["records"]]
        assert "recovery-key.new-account-key" in events

        # B held the old key: at its next write it asks for the new one, says so, keeps backing up.
        write_photo(b.photos / "b2.jpg", 24_000)
        rec = b.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=60, what="b asks for the new key")["recovery"]
        assert "new account key" in rec["message"] and ENTER in rec["message"], rec
        b.wait_for(settled(2), timeout=60, what="b's photo uploaded meanwhile")
        wait_for_event(hook, "recoveryKeyNeeded")
        # Its manifest waits; nothing of it was sealed under the old key after the switch.
        for k, body in sealed_objects(world, uid).items():
            with pytest.raises(vault.Refused):
                vault.open_sealed(body, old_account, k)
        # The old key entered on B: refused (it was replaced).
        stale = b.ctl("recovery-key", "--enter", input=old["recoveryKey"] + "\n")
        assert stale.returncode == 1, (stale.stdout, stale.stderr)
        ok = b.ctl("recovery-key", "--enter", input=new["recoveryKey"] + "\n")
        assert ok.returncode == 0 and new["fingerprint"] in ok.stdout, (ok.stdout, ok.stderr)
        b.wait_for(manifest_idle(2), timeout=90, what="b's manifest goes on under the new key")
        assert readable_with(world, uid, new["recoveryKey"], {da: 2, db: 2})
    finally:
        hook.stop()


# The steps of `--new-account-key`, each a moment to kill the daemon at:
# the key file's first save (both keys), the transitional key object's PUT, the key file's
# second save (resealing), a sealed object's PUT mid-way, the final key object's PUT, the
# last save (the new keys alone).
def key_file(event: int, skip: int):
    return ("file", "account-key.tmp" if event == IN_CREATE else "account-key", event, skip)


KILL_POINTS = {
    "before the key file keeps both keys": key_file(IN_CREATE, 0),
    "once the key file keeps both keys": key_file(IN_MOVED_TO, 0),
    "once the transitional key object is in the bucket": ("put", "keys/account-key", 0),
    "once the key file says resealing": key_file(IN_MOVED_TO, 1),
    "after the first object sealed again": ("put", "/devices/", 0),
    "after the third object sealed again": ("put", "/devices/", 2),
    "once the final key object is in the bucket": ("put", "keys/account-key", 1),
    "before the key file keeps the new keys alone": key_file(IN_CREATE, 2),
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill9_at_each_step_leaves_the_account_readable_with_a_key_shown(world, point):
    uid, a, b, old = two_nases(world, "newkey-kill")
    da, db = device_id(a), device_id(b)
    files = {da: 2, db: 1}
    kind, what, n, *rest = KILL_POINTS[point]
    fired: list[bool] = []
    if kind == "file":
        watcher = threading.Thread(target=lambda: fired.append(kill_on_file(a.proc.pid, a.state_dir, what, n, 60, rest[0])))
        watcher.start()
        time.sleep(0.2)
    else:
        seen = {"n": 0}

        def match(r: dict) -> bool:
            if r["method"] != "PUT" or what not in r["path"]:
                return False
            seen["n"] += 1
            return seen["n"] > n
        trigger = ResponseTrigger(world.proxy, a.proc.pid, match)
    cmd = subprocess.run([binary(), "ctl", "recovery-key", "--rotate", "--new-account-key", "--json", "--socket", a.socket],
                         capture_output=True, timeout=300)
    if kind == "file":
        watcher.join()
    else:
        fired.append(trigger.wait(5))
    assert fired and fired[0], f"the daemon was not killed {point}"
    a.kill9()
    assert cmd.returncode != 0, "the command said it was done although the daemon was killed"
    # At the kill: the account is readable, whole, with the old key or the new one (the one
    # the key file holds, which `recovery-key` shows once the step is finished).
    state = json.loads((a.state_dir / "account-key").read_text())
    new_text = state["recoveryKey"]
    assert readable_with(world, uid, old["recoveryKey"], files) or readable_with(world, uid, new_text, files), point
    # The next start finishes it; the key `recovery-key` then shows reads everything.
    a.start()
    rec = a.wait_for(lambda s: s["recovery"]["state"] == "ready" and not s["recovery"].get("resealed")
                     and not (s["recovery"].get("message") or "").startswith("A new account key"), timeout=120,
                     what="the step finished after the restart")["recovery"]
    now = shown(a)
    assert now["fingerprint"] == rec["fingerprint"]
    assert readable_with(world, uid, now["recoveryKey"], files)
    if now["recoveryKey"] != old["recoveryKey"]:
        assert now["fingerprint"] != old["fingerprint"]
        assert not readable_with(world, uid, old["recoveryKey"], files)
        s3 = world.moto.s3_admin()
        opened = vault.open_key_object(s3.get_object(Bucket=world.moto.bucket, Key=vault.key_object_key(uid))["Body"].read(),
                                       vault.parse_key(now["recoveryKey"]), uid)
        assert opened["previous"] is None
    else:
        # Killed before anything reached the bucket: the old key stays, nothing changed.
        assert now["fingerprint"] == old["fingerprint"]
    assert not (a.state_dir / "account-key.tmp").exists()
