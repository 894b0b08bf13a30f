"""No side doors (issue 31, privacy.md "No side doors"): each attack of the issue performed
with boto3 by someone who can write the account's prefix but holds no key (the storage
operator, a leaked STS credential), against a NAS that is running. Each test checks that
nothing is written outside or beyond what the manifest authenticates, the exit code, one
sentence naming the device (or the key) and what to do, an audit record, and the
notification.

- The key object substituted (item 2): the NAS that holds the key puts its own back and
  says so (attention `keyObjectReplaced`, audit `key-object.repaired`); `--enter` of the
  attacker's key is refused there and on a new NAS; the user's own key opens the account
  on a new NAS through a device record.
- A NAS's own manifest downgraded (item 1, the writer's side): a plaintext device.json
  and a forged `.plm` segment are refused, never read, and replaced (attention
  `manifestDowngrade`, audit `manifest.refused`)."""
from __future__ import annotations

import hashlib
import json
import os
import time

from support import manifest_reader, vault
from support.fake_backend import user_id_for
from support.notify_receivers import Receiver
from support.world import apple_subject, write_photo

ENTER = "sudo photolalactl recovery-key --enter"


def login(world, d, sub: str):
    token = world.backend.mint_identity_token(sub)
    r = d.ctl("login", "--identity-token", "-", "--authorization-code", "-",
              input=f"{token}\nac_{os.urandom(8).hex()}\n", timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr)


def manifest_idle(files: int):
    def check(s: dict) -> bool:
        m = s.get("manifest") or {}
        return m.get("state") == "idle" and m.get("files") == files and m.get("format") == 2
    return check


def shown(d) -> dict:
    r = d.ctl("recovery-key", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def audit_events(d) -> list[dict]:
    return json.loads(d.ctl("audit", "--json", check=True).stdout)["records"]


def wait_for_event(hook: Receiver, reason: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in hook.events():
            if e.get("event") == "problem" and e.get("reason") == reason:
                return e
        time.sleep(0.2)
    raise AssertionError(f"no {reason} notification in {timeout}s: {hook.events()}")


def a_nas(world, tag: str, hook: Receiver, env: dict | None = None):
    sub = apple_subject(tag)
    uid = user_id_for(sub)
    a = world.daemon("a", config={"notify": {"webhook": hook.url("/a")}}, env=env)
    write_photo(a.photos / "one.jpg", 20_000)
    login(world, a, sub)
    a.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="the account key made")
    a.wait_for(manifest_idle(1), timeout=90, what="the manifest written")
    return sub, uid, a


def put(world, key: str, body: bytes):
    world.moto.s3_admin().put_object(Bucket=world.moto.bucket, Key=key, Body=body)


def get(world, key: str) -> bytes:
    return world.moto.s3_admin().get_object(Bucket=world.moto.bucket, Key=key)["Body"].read()


def test_a_substituted_key_object_is_put_back_and_the_users_key_keeps_working(world):
    hook = Receiver("json").start()
    try:
        sub, uid, a = a_nas(world, "keyswap", hook)
        key = shown(a)
        account = manifest_reader.account_key(world.moto.s3_admin(), world.moto.bucket, uid, key["recoveryKey"])
        # The attack: one PUT of a key object of the attacker's own key under their own
        # recovery key (what an earlier release would have taken for a rotation elsewhere).
        evil_secret, evil_key = os.urandom(16), os.urandom(32)
        evil = vault.format_key(evil_secret)
        evil_object = vault.wrap_key_object(evil_key, int(time.time() * 1000), evil_secret, uid, 99)
        put(world, vault.key_object_key(uid), evil_object)

        # The NAS finds it at its next write and puts its own back.
        write_photo(a.photos / "two.jpg", 21_000)
        rec = a.wait_for(lambda s: s["recovery"].get("keyObjectReplaced"), timeout=90, what="the substitution found")["recovery"]
        assert rec["state"] == "ready" and not rec["outdated"] and rec["fingerprint"] == key["fingerprint"]
        assert "was replaced" in rec["keyObjectReplaced"] and "photolalactl audit" in rec["keyObjectReplaced"]
        back = get(world, vault.key_object_key(uid))
        assert vault.unwrap(back, vault.parse_key(key["recoveryKey"]), uid)[0] == account
        assert vault.proof(back, account, uid) is not None
        attention = [x for x in a.status()["attention"] if x["reason"] == "keyObjectReplaced"]
        assert len(attention) == 1 and attention[0]["action"], attention
        assert "keyObjectReplaced" in (e["reason"] for e in [wait_for_event(hook, "keyObjectReplaced")])
        assert any(e["event"] == "key-object.repaired" and e["actor"] == "daemon" for e in audit_events(a))
        # Nothing was sealed under the attacker's key.
        a.wait_for(manifest_idle(2), timeout=90, what="the manifest goes on under the account's own key")
        s3 = world.moto.s3_admin()
        for k in manifest_reader.list_keys(s3, world.moto.bucket, f"metadata/{uid}/devices/"):
            vault.open_sealed(get(world, k), account, k)
            try:
                vault.open_sealed(get(world, k), evil_key, k)
                raise AssertionError(f"{k} opens under the attacker's key")
            except vault.Refused:
                pass

        # The attacker's object put back, and their key entered on the NAS that holds the
        # account's (the swap): refused, one sentence, nothing changed.
        put(world, vault.key_object_key(uid), evil_object)
        r = a.ctl("recovery-key", "--enter", input=evil + "\n")
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert f"this NAS already holds the account's key (fingerprint {key['fingerprint']}); the key entered opens another one; " \
               "nothing was changed" in r.stderr, r.stderr
        assert shown(a)["fingerprint"] == key["fingerprint"]

        # A new NAS, with the attacker's object in place: their key is refused, the user's own
        # opens the account through a device record, and the key object is put back.
        b = world.daemon("b")
        login(world, b, sub)
        b.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=30, what="b needs the key")
        r = b.ctl("recovery-key", "--enter", input=evil + "\n")
        assert r.returncode == 1 and "the key object was replaced" in r.stderr, (r.stdout, r.stderr)
        assert not (b.state_dir / "account-key").exists()
        r = b.ctl("recovery-key", "--enter", input=key["recoveryKey"] + "\n")
        assert r.returncode == 0 and key["fingerprint"] in r.stdout, (r.stdout, r.stderr)
        b.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="b holds the key")
        assert vault.unwrap(get(world, vault.key_object_key(uid)), vault.parse_key(key["recoveryKey"]), uid)[0] == account
        assert any(e["event"] == "key-object.repaired" for e in audit_events(b))
    finally:
        hook.stop()


def test_a_nas_whose_own_manifest_is_downgraded_refuses_it_and_writes_it_again(world):
    hook = Receiver("json").start()
    try:
        _sub, uid, a = a_nas(world, "downgrade-own", hook, env={"PHOTOLALAD_MANIFEST_CHECK_INTERVAL": "3"})
        device = a.status()["manifest"]["deviceId"]
        prefix = manifest_reader.device_prefix(uid, device)
        key = shown(a)
        account = manifest_reader.account_key(world.moto.s3_admin(), world.moto.bucket, uid, key["recoveryKey"])
        # The attack of issue 31 item 1: a plaintext device.json naming the attacker, and a
        # forged format-1 segment whose SHA-256 checks out.
        marker = "PWNED-" + os.urandom(4).hex()
        put(world, prefix + "device.json", json.dumps({
            "format": 1, "deviceId": device, "name": marker, "folders": ["/root"], "lastBackupAt": "2026-11-22T07:00:00Z",
            "files": 1, "bytes": 10, "logSeq": 1, "snapshotSeq": 0, "updatedAt": "2026-11-22T07:00:00Z",
            "software": "forger"}).encode())
        header = json.dumps({"format": 1, "kind": "log", "device": device, "seq": 1, "entries": 0, "folders": ["/root"],
                             "createdAt": "2026-11-22T07:00:00Z"}).encode()
        rest = len(header).to_bytes(4, "big") + header
        put(world, prefix + "log/000000000001.plm", manifest_reader.MAGIC + hashlib.sha256(rest).digest() + rest)

        rec = a.wait_for(lambda s: any(x["device"] == device and x["kind"] == "downgrade" for x in s["manifestAlarms"]),
                         timeout=60, what="the downgrade found")
        alarm = [x for x in rec["attention"] if x["reason"] == "manifestDowngrade"]
        assert len(alarm) == 1 and alarm[0]["subject"] == device and device in alarm[0]["message"], alarm
        assert "sealed for good" in alarm[0]["message"] and alarm[0]["action"]
        event = wait_for_event(hook, "manifestDowngrade")
        assert device in event["message"] and marker not in event["message"]
        refused = [e for e in audit_events(a) if e["event"] == "manifest.refused"]
        assert refused and refused[0]["details"]["device"] == device and refused[0]["details"]["why"] == "downgrade"
        # Written again sealed, and the forgery gone.
        def sealed_again(_s) -> bool:
            keys = manifest_reader.list_keys(world.moto.s3_admin(), world.moto.bucket, prefix)
            return not any(k.endswith(".plm") for k in keys) and get(world, prefix + "device.json")[:7] == b"PLMANIF"
        a.wait_for(sealed_again, timeout=60, what="the record written again and the plaintext deleted")
        m = manifest_reader.read(world.moto.s3_admin(), world.moto.bucket, uid, device, key=account)
        assert m["record"]["name"] != marker and len(manifest_reader.replay(m["records"])) == 1
        assert not (a.photos.parent / marker).exists()
    finally:
        hook.stop()
