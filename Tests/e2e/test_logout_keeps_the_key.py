"""Logout never orphans the manifest (privacy.md "No side doors", issue 31 item 8): while
this NAS holds the account key and its recovery key was never shown (nor entered) here
since it was made or last rotated, `logout` refuses with the command that shows it, and
nothing changes; once shown, or with `--forget-key`, it goes, and the key files are
overwritten before they are unlinked (a second link to each, kept by the test, reads
back only zeros: the bytes are gone from the file's blocks as far as a program can see)."""
from __future__ import annotations

import json
import os

from support import vault
from support.world import apple_subject


def login(world, d, sub: str):
    token = world.backend.mint_identity_token(sub)
    r = d.ctl("login", "--identity-token", "-", "--authorization-code", "-",
              input=f"{token}\nac_{os.urandom(8).hex()}\n", timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr)


def ready(d):
    return d.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="the account key made here")


def audit(d) -> list[dict]:
    return json.loads(d.ctl("audit", "--json", check=True).stdout)["records"]


def test_logout_refuses_while_the_recovery_key_was_never_shown(world):
    d = world.daemon()
    login(world, d, apple_subject("never-shown"))
    fingerprint = ready(d)["recovery"]["fingerprint"]
    key_file = d.state_dir / "account-key"
    before = key_file.read_bytes()

    r = d.ctl("logout")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "sudo photolalactl recovery-key" in r.stderr and "--forget-key" in r.stderr and fingerprint in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    # Nothing changed: still signed in, the key file as it was, the refusal in the trail.
    s = d.status()
    assert s["account"]["signedIn"] and s["recovery"]["state"] == "ready"
    assert key_file.read_bytes() == before
    last = audit(d)[-1]
    assert (last["event"], last["outcome"]) == ("logout", "refused"), last
    assert world.backend.revocations() == []

    # Shown once here, the key may go with the sign-in.
    shown = json.loads(d.ctl("recovery-key", "--json", check=True).stdout)
    kept = d.root / "kept-account-key"
    os.link(key_file, kept)
    r = d.ctl("logout")
    assert r.returncode == 0 and "Signed out" in r.stdout, (r.stdout, r.stderr)
    assert not key_file.exists()
    left = kept.read_bytes()
    assert left and set(left) == {0}, "the key file was unlinked with its bytes in place"
    assert shown["recoveryKey"].encode() not in left
    assert d.status()["recovery"]["state"] == "none"


def test_forget_key_logs_out_and_overwrites_every_key_file(world):
    d = world.daemon()
    sub = apple_subject("forget-key")
    login(world, d, sub)
    ready(d)
    key_file, sign_in = d.state_dir / "account-key", d.state_dir / "account.json"
    links = {key_file: d.root / "kept-key", sign_in: d.root / "kept-sign-in"}
    for path, link in links.items():
        os.link(path, link)
    held = json.loads(key_file.read_text())
    secrets = [held["recoveryKey"].encode(), held["accountKey"].encode(), vault.parse_key(held["recoveryKey"])]

    r = d.ctl("logout", "--forget-key")
    assert r.returncode == 0 and "Signed out" in r.stdout, (r.stdout, r.stderr)
    assert not key_file.exists() and not sign_in.exists()
    for path, link in links.items():
        left = link.read_bytes()
        assert left and set(left) == {0}, f"{path.name} was unlinked with its bytes in place"
        for secret in secrets:
            assert secret not in left
    # No version of the key file is left behind, under any name.
    assert sorted(p.name for p in d.state_dir.iterdir() if p.name.startswith("account-key")) == []
    assert audit(d)[-1]["event"] == "logout"


def test_a_key_entered_here_may_go_with_the_sign_in(world):
    first = world.daemon("a")
    sub = apple_subject("entered")
    login(world, first, sub)
    ready(first)
    key = json.loads(first.ctl("recovery-key", "--json", check=True).stdout)["recoveryKey"]
    second = world.daemon("b")
    login(world, second, sub)
    second.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=30, what="the key asked for")
    r = second.ctl("recovery-key", "--enter", input=key + "\n")
    assert r.returncode == 0, (r.stdout, r.stderr)
    # Typed here: the person has it.
    r = second.ctl("logout")
    assert r.returncode == 0, (r.stdout, r.stderr)
