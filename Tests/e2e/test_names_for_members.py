"""Names only for those who may read them (privacy.md "No side doors", issue 31 item 6):
a member of the socket group, a real uid under `setpriv`, is shown names only below
folders it could list. One watched folder holds a root-only 0700 folder with photos and a
folder in it; another watched folder sits inside a root-only 0700 folder. Through
`files`, `queue`, `status`, `devices` and `restore --dry-run` the member gets no name
from either; root sees them all. Another NAS of the account shows to the member without
its name and folders, and its manifest is not the member's to dry-run."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from support.world import apple_subject, write_photo

MEMBER = {"user": "nobody", "groups": "users"}
SECRETS = ("IMG_SECRET", "hidden-album", "private-photos", "IMG_VAULT", "nas-other")


@pytest.fixture
def folders():
    base = Path(tempfile.mkdtemp(prefix="pl-names-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def member(d, *args):
    return d.ctl(*args, **MEMBER)


def no_secret(text: str, where: str):
    for name in SECRETS:
        assert name not in text, f"{where} names {name}:\n{text}"


def test_a_member_gets_no_name_of_a_folder_it_cannot_list(world, folders):
    public = folders / "photos"
    closed = public / "secret-place"          # 0700 root, inside a watched folder
    vault = folders / "vault"                 # 0700 root, holding a watched folder
    hidden_watch = vault / "private-photos"
    write_photo(public / "family" / "IMG_PUBLIC_1.jpg", 30_000)
    write_photo(closed / "IMG_SECRET_1.jpg", 30_001)
    write_photo(closed / "hidden-album" / "IMG_SECRET_2.jpg", 30_002)
    write_photo(hidden_watch / "IMG_VAULT_1.jpg", 30_003)
    for p in (folders, public, public / "family"):
        os.chmod(p, 0o755)
    for p in (closed, vault):
        os.chmod(p, 0o700)
    d = world.daemon(config={"watch": {"folders": [str(public), str(hidden_watch)]},
                             "account": {"device_name": "nas-names"}})
    sub = apple_subject("names")
    world.login(d, sub=sub)
    d.wait_for(lambda s: s["queue"]["uploaded"] == 4 and (s.get("manifest") or {}).get("files") == 4,
               timeout=120, what="four photos backed up and in the manifest")

    # files: the member sees the public photo, nothing of the closed folder.
    r = member(d, "files", str(public), "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    paths = [i["path"] for i in json.loads(r.stdout)["items"]]
    assert paths == [str(public / "family" / "IMG_PUBLIC_1.jpg")], paths
    no_secret(r.stdout + r.stderr, "files (member)")
    for asked in (closed, closed / "IMG_SECRET_1.jpg", closed / "hidden-album"):
        r = member(d, "files", str(asked))
        assert r.returncode == 4, (asked, r.stdout, r.stderr)
        assert "IMG_SECRET_2" not in r.stdout + r.stderr and "hidden-album" not in r.stdout.replace(str(asked), "")
    r = member(d, "files", str(hidden_watch))
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "IMG_VAULT" not in r.stdout + r.stderr
    # Root sees them all.
    root = d.ctl("files", str(public), "--json", check=True).stdout
    assert "IMG_SECRET_1" in root and "hidden-album/IMG_SECRET_2" in root

    # status: neither the folder inside the closed one nor anything in it.
    r = member(d, "status", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    no_secret(r.stdout, "status --json (member)")
    assert json.loads(r.stdout)["watch"]["paths"] == [str(public)]
    no_secret(member(d, "status").stdout, "status (member)")
    assert str(hidden_watch) in json.dumps(d.status()["watch"]["paths"])

    # queue: a photo waiting in the closed folder is not listed to the member.
    d.ctl("pause", check=True)
    write_photo(closed / "IMG_SECRET_3.jpg", 30_004)
    write_photo(public / "IMG_PUBLIC_2.jpg", 30_005)
    d.wait_for(lambda s: s["queue"]["pending"] == 2 and s["queue"]["hashing"] == 0, timeout=60, what="two photos waiting")
    r = member(d, "queue", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    listed = [i["path"] for i in json.loads(r.stdout)["items"]]
    assert listed == [str(public / "IMG_PUBLIC_2.jpg")], listed
    no_secret(r.stdout, "queue (member)")
    assert "IMG_SECRET_3" in d.ctl("queue", "--json", check=True).stdout
    d.ctl("resume", check=True)

    # Another NAS of the account, with a manifest of its own.
    other = world.daemon("other", config={"account": {"device_name": "nas-other"}})
    world.login(other, sub=sub)
    key = json.loads(d.ctl("recovery-key", "--json", check=True).stdout)["recoveryKey"]
    other.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=30, what="the key asked for")
    assert other.ctl("recovery-key", "--enter", input=key + "\n").returncode == 0
    write_photo(other.photos / "IMG_OTHER.jpg", 30_006)
    other.wait_for(lambda s: (s.get("manifest") or {}).get("files") == 1, timeout=120, what="the other NAS's manifest")

    # restore --dry-run: this NAS's manifest without the closed folder's records; the other
    # NAS's not at all.
    device = json.loads(d.ctl("status", "--json", check=True).stdout)["manifest"]["deviceId"]
    to = folders / "dry"
    r = member(d, "restore", "--device", device, "--to", str(to), "--dry-run", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    no_secret(r.stdout + r.stderr, "restore --dry-run (member)")
    assert "IMG_PUBLIC_1" in r.stdout
    root_plan = d.ctl("restore", "--device", device, "--to", str(to), "--dry-run", "--json", check=True).stdout
    assert "IMG_SECRET_2" in root_plan and "IMG_VAULT_1" in root_plan
    other_id = json.loads(other.ctl("status", "--json", check=True).stdout)["manifest"]["deviceId"]
    r = member(d, "restore", "--device", other_id, "--to", str(to), "--dry-run")
    assert r.returncode == 4 and "root and the daemon's user" in r.stderr, (r.stdout, r.stderr)
    assert "IMG_OTHER" not in r.stdout + r.stderr
    assert not to.exists()

    # devices: this NAS's open folder only; the other NAS without its name or folders.
    r = member(d, "devices", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    no_secret(r.stdout, "devices (member)")
    devices = json.loads(r.stdout)["devices"]
    mine = next(x for x in devices if x["current"])
    assert mine["folders"] == [str(public)] and mine["name"] == "nas-names"
    theirs = next(x for x in devices if not x["current"])
    assert theirs["name"] is None and theirs["folders"] == []
    assert "root and the daemon's user" in json.loads(r.stdout)["note"]
    no_secret(member(d, "devices").stdout, "devices (member)")
    as_root = json.loads(d.ctl("devices", "--json", check=True).stdout)["devices"]
    assert sorted(x["name"] for x in as_root) == ["nas-names", "nas-other"]
    assert sorted(next(x for x in as_root if x["current"])["folders"]) == sorted([str(public), str(hidden_watch)])
