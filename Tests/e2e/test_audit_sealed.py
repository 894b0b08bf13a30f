"""The audit trail's forward seal (cli.md "audit", "Forward sealing"; issue 31 item 7;
docs/audit-seal.md), end to end with the real daemon. `audit --verification-key` shows
root the key once and the NAS forgets it; `audit --verify --verification-key -` proves
the trail. Then, with the daemon stopped, an attacker edits the files as root would: a
record removed, the chain after it recomputed, the queue database's seal row updated and
the seals' fields rewritten to match (their tags cannot be). Without the key that passes;
with it, the first epoch that does not fit is named. A seal deleted, the seals gone or a
tail cut fail without the key. The idle test (test_idle.py) checks nothing is written
while nothing happens."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from support.daemon import Daemon


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    d.stop()


def events(d: Daemon, *commands: str):
    """Each command is one batch, so one epoch of the trail."""
    for c in commands:
        d.ctl(c, check=True)


def take_key(d: Daemon) -> dict:
    r = d.ctl("audit", "--verification-key", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def verify(d: Daemon, key: str | None = None):
    if key is None:
        return d.ctl("audit", "--verify")
    return d.ctl("audit", "--verify", "--verification-key", "-", input=key + "\n")


def seal_row(d: Daemon, value: str | None):
    """The queue database's seal row, as an attacker with the daemon stopped edits it."""
    con = sqlite3.connect(str(d.state_dir / "queue.db"))
    with con:
        if value is None:
            con.execute("DELETE FROM setting WHERE key = 'audit.seal'")
        else:
            con.execute("UPDATE setting SET value = ? WHERE key = 'audit.seal'", (value,))
    con.close()


def sha(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def remove_with_care(d: Daemon, seq: int, seals_too: bool):
    """Record `seq` removed from audit.log, every later record renumbered and re-chained;
    the seal row set to the new last record; with `seals_too`, each seal's from/seq/hash
    (and the key file's `sealed`) rewritten to match, its tag left (nobody has its key)."""
    path = d.state_dir / "audit.log"
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    del records[seq - 1]
    prev, hashes, out = "0" * 64, {0: "0" * 64}, []
    for i, r in enumerate(records, start=1):
        r["seq"], r["prev"] = i, prev
        # The daemon's own layout (keys in cli.md's order, compact): the attacker's tools can do it too.
        line = json.dumps(r, separators=(",", ":"), ensure_ascii=False).encode()
        out.append(line)
        prev = hashes[i] = sha(line)
    path.write_bytes(b"".join(line + b"\n" for line in out))
    seal_row(d, f"{len(out)} {prev}")
    if seals_too:
        seals_path = d.state_dir / "audit.seals"
        seals = [json.loads(line) for line in seals_path.read_bytes().splitlines()]
        for s in seals:
            if s["seq"] >= seq:
                s["seq"] -= 1
            if s["from"] >= seq:
                s["from"] -= 1
            s["hash"] = hashes[s["seq"]]
        # An epoch left sealing nothing goes, and the epochs after it are numbered down,
        # the key file's epoch with them (its key cannot be: nobody has the earlier one).
        kept = [s for s in seals if s["epoch"] == 0 or s["seq"] > s["from"]]
        for i, s in enumerate(kept):
            s["epoch"] = kept[0]["epoch"] + i
        seals_path.write_bytes(b"".join(json.dumps(s, separators=(",", ":")).encode() + b"\n" for s in kept))
        key_path = d.state_dir / "audit-seal.key"
        fields = {p.split("=", 1)[0]: p for p in key_path.read_text().split() if "=" in p}
        text = key_path.read_text().replace(fields["sealed"], f"sealed={kept[-1]['seq']:020d}")
        text = text.replace(fields["epoch"], f"epoch={kept[-1]['epoch'] + 1:020d}")
        key_path.write_text(text)


def test_the_key_is_shown_once_and_proves_what_a_careful_rewrite_hides(daemon):
    d = daemon
    events(d, "pause", "resume", "rescan", "retry", "pause", "resume")
    # Before it is shown, root alone may ask for it: not a member, nor (here) anyone else.
    r = d.ctl("audit", "--verification-key", user="nobody", groups="users")
    assert r.returncode == 4 and "root only" in r.stderr, (r.stdout, r.stderr)
    pending = d.state_dir / "audit-verification-key"
    assert stat.S_IMODE(pending.stat().st_mode) == 0o600
    kept = d.state_dir.parent / "kept-link"
    os.link(pending, kept)
    shown = take_key(d)
    key, fingerprint = shown["verificationKey"], shown["fingerprint"]
    assert len(key.replace("-", "")) == 64 and shown["createdAt"].endswith("Z")
    # Shown once: the file is gone, its bytes overwritten first; asked again, when and which.
    assert not pending.exists()
    assert set(kept.read_bytes()) == {0}
    again = d.ctl("audit", "--verification-key")
    assert again.returncode == 1 and fingerprint in again.stdout and "shown" in again.stdout, (again.stdout, again.stderr)
    assert key not in again.stdout
    # Kept nowhere on the NAS in a form that opens it (nor in the journal).
    raw = bytes.fromhex(key_hex(key))
    for f in d.state_dir.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert key.encode() not in data and raw.hex().encode() not in data and raw not in data, f
    assert key not in d.log()
    shown_records = [x for x in json.loads(d.ctl("audit", "--json", check=True).stdout)["records"]
                     if x["event"] == "audit.verification-key.shown"]
    assert len(shown_records) == 1 and shown_records[0]["details"] == {"fingerprint": fingerprint}

    events(d, "rescan")
    ok = verify(d, key)
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    assert "checked with the verification key" in ok.stdout and fingerprint in ok.stdout
    assert verify(d).returncode == 0
    # A typo in the key is refused before anything is asked.
    typo = ("1" if key[0] != "1" else "2") + key[1:]
    r = verify(d, typo)
    assert r.returncode == 1 and "typo" in r.stderr, (r.stdout, r.stderr)

    # The attack, as root with the daemon stopped: record 3 removed, the chain after it
    # recomputed, the seal row and the seals' fields rewritten to match.
    d.stop()
    seals = [json.loads(line) for line in (d.state_dir / "audit.seals").read_bytes().splitlines()]
    epoch = next(s["epoch"] for s in seals if s["from"] < 3 <= s["seq"])
    remove_with_care(d, 3, seals_too=True)
    d.start()
    plain = verify(d)
    assert plain.returncode == 0, ("a careful rewrite passes the keyless check", plain.stdout, plain.stderr)
    proven = verify(d, key)
    assert proven.returncode == 1, (proven.stdout, proven.stderr)
    # The first epoch that does not fit: the one that sealed record 3.
    assert f"epoch {epoch} " in proven.stdout and "does not check out with the verification key" in proven.stdout, proven.stdout
    verdict = json.loads(d.ctl("audit", "--verify", "--verification-key", "-", "--json", input=key + "\n").stdout)
    assert verdict["whole"] is False and verdict["problem"]["kind"] == "sealForged"


def test_a_rewrite_of_the_trail_and_its_seal_row_alone_fails_even_without_the_key(daemon):
    d = daemon
    events(d, "pause", "resume", "rescan", "retry")
    key = take_key(d)["verificationKey"]
    d.stop()
    remove_with_care(d, 2, seals_too=False)
    d.start()
    for r in (verify(d), verify(d, key)):
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert "broken" in r.stdout


@pytest.mark.parametrize("attack", ["seal row deleted, tail cut", "seals file deleted", "last seal deleted, tail cut",
                                    "sealing key deleted"])
def test_without_the_key_a_missing_seal_or_a_cut_tail_fails(daemon, attack):
    d = daemon
    events(d, "pause", "resume", "rescan", "retry")
    key = take_key(d)["verificationKey"]
    assert verify(d).returncode == 0
    d.stop()
    log = d.state_dir / "audit.log"
    seals = d.state_dir / "audit.seals"
    lines = log.read_bytes().splitlines(keepends=True)
    if attack == "seal row deleted, tail cut":
        seal_row(d, None)
        log.write_bytes(b"".join(lines[:-1]))
    elif attack == "seals file deleted":
        seals.unlink()
    elif attack == "last seal deleted, tail cut":
        before_last = lines[-2].rstrip(b"\n")
        seal_row(d, f"{len(lines) - 1} {sha(before_last)}")
        log.write_bytes(b"".join(lines[:-1]))
        seals.write_bytes(b"".join(seals.read_bytes().splitlines(keepends=True)[:-1]))
    else:
        (d.state_dir / "audit-seal.key").unlink()
    d.start()
    r = verify(d)
    assert r.returncode == 1, (attack, r.stdout, r.stderr)
    assert "broken" in r.stdout and "whole" not in r.stdout, r.stdout
    # The daemon goes on: records after the break are written and sealed.
    events(d, "pause")
    assert verify(d).returncode == 1
    assert verify(d, key).returncode == 1
    assert d.status()["state"] in ("needsLogin", "paused")


def key_hex(text: str) -> str:
    """The 32 bytes a verification key's text holds (its first 256 of 320 bits), as hex."""
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    value = 0
    for c in text.replace("-", ""):
        value = value * 32 + alphabet.index(c)
    return (value >> 64).to_bytes(32, "big").hex()
