"""The .deb on Debian 13 (trixie), and one instance per account: a minimal Debian 13 made
with mmdebstrap (cached per machine), booted under a real systemd with systemd-nspawn.

The same .deb as on Debian 12 installs with apt, which takes Debian 13's libraries for
its alternatives (libraw23t64, libvips42t64); the daemon starts, signs in against the
fake backend on the host's loopback, backs up a folder, and its preview worker makes
thumbnails with LibRaw 0.21 (a DNG's orientation and date read through the API that is
the same in 0.20 and 0.21) and libvips 8.16; a missing LibRaw is named by Debian 13's
package; it stops cleanly and quickly.

Then several accounts on one NAS (config.md "Instances"): photolalad@alice and
photolalad@bob, two accounts, each folder in its own account's prefix and nowhere
else; `photolalactl --instance`, `status --all` and `status --check`; a member of one
instance's group reads nothing of the other's; `--check-config` warns when two
instances watch the same folder; one instance stopping leaves the other's socket.

The tests run in file order against one container (a module fixture)."""
from __future__ import annotations

import hashlib
import io
import json
import re
import sqlite3
import time

import pytest
from PIL import Image

from support import dng, images
from support.fake_backend import FakeBackend, user_id_for
from support.nspawn import REPO, Container, Unavailable, built_deb, prerequisites

pytestmark = [pytest.mark.packaging, pytest.mark.xdist_group("nspawn-trixie")]

CONFIG = "/etc/photolala/photolalad.toml"
UNIT = "photolalad.service"


@pytest.fixture(scope="module")
def ct(tmp_path_factory):
    why = prerequisites()
    if why:
        pytest.skip(f"systemd-nspawn tests cannot run here: {why}")
    deb = built_deb()
    try:
        container = Container.boot(tmp_path_factory.mktemp("trixie"), deb=deb.path, suite="trixie")
    except Unavailable as e:
        pytest.skip(f"systemd-nspawn cannot boot a Debian 13 container on this machine: {e}")
    container.deb = deb.path
    try:
        yield container
    finally:
        try:
            (container.workdir / "journal.txt").write_text(container.journal())
            print(f"\ncontainer journal: {container.workdir / 'journal.txt'}")
        except Exception:
            pass
        container.cleanup()


@pytest.fixture(scope="module")
def accounts(moto_http):
    """One fake backend for the module: every account signs in through it."""
    moto_http.empty_bucket()
    backend = FakeBackend(moto_http).start()
    yield backend
    backend.stop()


def status_json(ct, *args: str, user: str | None = None) -> dict:
    r = ct.run(["photolalactl", *args, "status", "--json"], user=user)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def bucket(moto) -> dict[str, bytes]:
    s3 = moto.s3_admin()
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=moto.bucket):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return {k: s3.get_object(Bucket=moto.bucket, Key=k)["Body"].read() for k in keys}


def config_text(ct, folders: list[str], api_url: str, extra: str = "") -> str:
    """The shipped config (test_packaging.py checks the .deb's is this one) with folders set."""
    shipped = (REPO / "etc/photolala/photolalad.toml").read_text()
    text = re.sub(r"^folders = .*$", "folders = " + json.dumps(folders), shipped, count=1, flags=re.M)
    text = re.sub(r"^#api_url = .*$", f'api_url = "{api_url}"', text, count=1, flags=re.M)
    # Quick tests: settle for a second, not five.
    text = re.sub(r"^#settle = .*$", 'settle = "1s"', text, count=1, flags=re.M)
    return text + extra


def put_photo(ct, tmp_path, path: str, body: bytes, mode: str = "644") -> str:
    staged = tmp_path / hashlib.md5(path.encode()).hexdigest()
    staged.write_bytes(body)
    inside = ct.copy_in(staged, f"/var/cache/photolala-test/{staged.name}")
    ct.sh(f"install -D -m {mode} {inside} {path}")
    return hashlib.md5(body).hexdigest()


# -- Debian 13: the .deb -------------------------------------------------------------


def test_the_same_deb_installs_with_debian_13s_libraries(ct):
    assert "13" in ct.sh(". /etc/os-release; echo $VERSION_ID"), ct.sh("cat /etc/os-release")
    r = ct.install_deb(ct.deb)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "set watch.folders in /etc/photolala/photolalad.toml" in r.stdout + r.stderr
    installed = ct.sh("dpkg-query -W -f '${Package} ${Status}\\n' libraw23t64 libvips42t64 libssl3t64 photolalad")
    assert installed.count("install ok installed") == 4, installed
    # Its state, not dpkg-query's exit code: apt leaves dpkg a record of the alternative it
    # did not take ("not-installed"), which dpkg-query -W lists and exits 0 for.
    libraw20 = ct.run("dpkg-query -W -f '${db:Status-Status}' libraw20").stdout.strip()
    assert libraw20 in ("", "not-installed"), f"Debian 12's LibRaw on Debian 13: {libraw20}"
    assert ct.sh("photolalactl --version").strip() == "0.1.0"
    assert ct.sh("systemctl is-enabled photolalad").strip() == "enabled"
    verify = ct.run("systemd-analyze verify --man=no photolalad.service photolalad@test.service")
    assert verify.returncode == 0 and not (verify.stdout + verify.stderr).strip(), verify
    assert ct.run("systemctl --failed --no-legend").stdout.strip() == ""


def test_start_back_up_thumbnails_with_libraw_0_21_and_stop(ct, accounts, moto_http, tmp_path):
    ct.sh("mkdir -p /srv/photos && useradd -m -s /bin/sh alice")
    ct.write_file(CONFIG, config_text(ct, ["/srv/photos"], accounts.url))
    ct.sh("photolalad --check-config >/dev/null")
    ct.sh("systemctl start photolalad")
    token = accounts.mint_identity_token("trixie-owner")
    r = ct.run(["photolalactl", "login", "--identity-token", "-"], input=token + "\n")
    assert r.returncode == 0 and "Signed in" in r.stdout, r
    uid = user_id_for("trixie-owner")

    upright = images.upright_pattern(900, 1200)
    sensor = images.stored_for_orientation_6(upright)
    raw = dng.dng(images.encode(sensor, "JPEG", quality=90), sensor.size, orientation=6, date="2020:07:08 09:10:11")
    jpeg = images.encode(images.upright_pattern(1200, 900), "JPEG", exif=images.exif("2021:05:06 07:08:09"))
    md5 = {"camera.dng": put_photo(ct, tmp_path, "/srv/photos/2020/camera.dng", raw),
           "shot.jpg": put_photo(ct, tmp_path, "/srv/photos/2021/shot.jpg", jpeg)}

    def done():
        keys = bucket(moto_http)
        return all(f"photos/{uid}/{m}.dat" in keys and f"thumbnails/{uid}/{m}.jpg" in keys for m in md5.values()) and keys
    keys = ct.wait_for("both photos and their thumbnails in the host's moto", done, timeout=180)
    assert keys[f"photos/{uid}/{md5['camera.dng']}.dat"] == raw
    thumb = Image.open(io.BytesIO(keys[f"thumbnails/{uid}/{md5['camera.dng']}.jpg"]))
    assert thumb.size[1] > thumb.size[0], f"the DNG's orientation 6 was lost: {thumb.size}"
    # The photo's date, as LibRaw 0.21 read it (through libraw_get_imgother), in the
    # container's local time.
    expected = int(ct.sh("date -d '2020-07-08 09:10:11' +%s"))
    db = sqlite3.connect(f"file:{ct.root}/var/lib/photolala/queue.db?mode=ro", uri=True)
    try:
        taken = db.execute("SELECT takenAt FROM photo WHERE md5 = ?", (md5["camera.dng"],)).fetchone()
    finally:
        db.close()
    assert taken and taken[0] == expected, (taken, expected)

    # Only the preview worker maps the decoders, Debian 13's.
    daemon = int(ct.show(UNIT, "MainPID")["MainPID"])
    worker = int(ct.sh("pgrep -u photolala -f '^photolalad __preview-worker'").split()[0])
    maps = ct.sh(f"cat /proc/{worker}/maps")
    assert "libraw.so.23" in maps and "libvips.so.42" in maps and "libraw.so.20" not in maps
    assert "libvips" not in ct.sh(f"cat /proc/{daemon}/maps")
    assert ct.run(["photolalactl", "status", "--check"]).returncode == 0, status_json(ct)["attention"]

    start = time.monotonic()
    ct.sh("systemctl stop photolalad")
    took = time.monotonic() - start
    p = ct.show(UNIT, "ActiveState", "Result", "ExecMainStatus")
    assert p == {"ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0"}, p
    assert took < 10, f"stop took {took:.1f}s"
    assert ct.run("test -e /run/photolala/photolalad.sock").returncode != 0
    assert ct.run(["photolalactl", "status", "--check"]).returncode == 3
    log = ct.journal("-u", "photolalad", "-o", "cat")
    for failure in ("no preview", "thumbnails are off", "Bad system call", "SIGSYS"):
        assert failure not in log, f"{failure!r} in the journal:\n{log[-3000:]}"


def test_a_missing_libraw_is_named_by_debian_13s_package(ct, accounts, moto_http, tmp_path):
    hidden = "/root/hidden-libraw"
    ct.sh(f"mkdir -p {hidden} && mv /usr/lib/*-linux-gnu/libraw.so.23* {hidden}/ && ldconfig")
    try:
        ct.sh("systemctl start photolalad")
        uid = user_id_for("trixie-owner")
        md5 = put_photo(ct, tmp_path, "/srv/photos/2022/later.jpg", images.encode(images.upright_pattern(600, 400), "JPEG"))

        def problem():
            s = status_json(ct)
            return (f"photos/{uid}/{md5}.dat" in bucket(moto_http)
                    and [p for p in s["problems"] if p.startswith("Thumbnails are off:")])
        said = ct.wait_for("the problem in status", problem, timeout=120)[0]
        assert "libraw23t64 is not installed: libraw.so.23: cannot open shared object file" in said, said
        assert "apt-get install libraw23t64" in said, said
        assert ct.run(["photolalactl", "status", "--check"]).returncode == 1
    finally:
        ct.run(f"mv {hidden}/* $(dirname $(ls -d /usr/lib/*-linux-gnu/libvips.so.42)); ldconfig")
        ct.run("systemctl stop photolalad")
        # photolalad.service as shipped (folders = []): the instances' tests find it so.
        ct.write_file(CONFIG, (REPO / "etc/photolala/photolalad.toml").read_text())


# -- instances: one daemon per account ------------------------------------------------


def test_two_instances_back_up_two_accounts_each_in_its_own_prefix(ct, accounts, moto_http, tmp_path):
    moto_http.empty_bucket()
    for name in ("alice", "bob"):
        ct.sh(f"mkdir -p /srv/{name} && chmod 755 /srv/{name}")
        ct.write_file(f"/etc/photolala/{name}.toml", config_text(ct, [f"/srv/{name}"], accounts.url))
        assert ct.run(["photolalad", "--instance", name, "--check-config"]).returncode == 0
    ct.sh("systemctl enable --now photolalad@alice photolalad@bob")
    for name in ("alice", "bob"):
        assert ct.show(f"photolalad@{name}.service", "ActiveState")["ActiveState"] == "active"
        # Its own group, state and socket.
        gid = ct.sh(f"getent group photolala-{name}").split(":")[2]
        pid = int(ct.show(f"photolalad@{name}.service", "MainPID")["MainPID"])
        groups = re.search(r"^Groups:(.*)$", ct.sh(f"cat /proc/{pid}/status"), re.M).group(1).split()
        assert gid in groups
        assert ct.sh(f"stat -c '%a %U %G' /var/lib/photolala/{name}").split() == ["700", "photolala", "photolala"]
        assert ct.run(f"test -f /var/lib/photolala/{name}/queue.db").returncode == 0
        assert ct.sh(f"stat -c '%a %U %G' /run/photolala/{name}.sock").split() == ["660", "photolala", f"photolala-{name}"]
        token = accounts.mint_identity_token(f"apple-{name}")
        r = ct.run(["photolalactl", "--instance", name, "login", "--identity-token", "-"], input=token + "\n")
        assert r.returncode == 0 and "Signed in" in r.stdout, r
    assert ct.sh("stat -c %a /run/photolala").strip() == "711"

    md5 = {"alice": put_photo(ct, tmp_path, "/srv/alice/beach.jpg", images.encode(images.upright_pattern(640, 480), "JPEG")),
           "bob": put_photo(ct, tmp_path, "/srv/bob/hike.jpg", images.encode(images.bands(480, 640, True, 40), "JPEG"))}
    uids = {name: user_id_for(f"apple-{name}") for name in md5}
    assert uids["alice"] != uids["bob"]

    def both():
        keys = bucket(moto_http)
        return all(f"photos/{uids[n]}/{md5[n]}.dat" in keys for n in md5) and keys
    keys = ct.wait_for("each photo in its account", both, timeout=120)
    for name, other in (("alice", "bob"), ("bob", "alice")):
        mine = [k for k in keys if uids[name] in k]
        assert f"photos/{uids[name]}/{md5[name]}.dat" in mine
        assert not [k for k in mine if md5[other] in k], f"{other}'s photo in {name}'s account: {mine}"
    assert status_json(ct, "--instance", "alice")["instance"] == "alice"
    assert status_json(ct, "--instance", "bob")["account"]["userId"] == uids["bob"]
    # $PHOTOLALA_INSTANCE does the same as --instance.
    r = ct.run(["photolalactl", "status", "--json"], env={"PHOTOLALA_INSTANCE": "bob"})
    assert json.loads(r.stdout)["account"]["userId"] == uids["bob"]


def test_status_all_lists_every_instance_and_check_answers_for_each(ct):
    ct.wait_for("both instances idle", lambda: all(
        status_json(ct, "--instance", n)["queue"]["pending"] + status_json(ct, "--instance", n)["queue"]["uploading"] == 0
        for n in ("alice", "bob")), timeout=60)
    r = ct.run(["photolalactl", "status", "--all"])
    lines = r.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["photolalad", "alice", "bob"], r.stdout
    assert "not set up" in lines[0], lines[0]   # the shipped photolalad.toml, never started
    for line in lines[1:]:
        assert "signed in" in line and "1 backed up" in line and line.endswith("nothing needs you"), line
    assert r.returncode == 0, r
    every = json.loads(ct.sh("photolalactl status --all --json"))["instances"]
    assert [i["instance"] for i in every] == [None, "alice", "bob"]
    assert [i["running"] for i in every] == [False, True, True]
    assert ct.run(["photolalactl", "status", "--all", "--check"]).returncode == 0
    assert ct.run(["photolalactl", "--instance", "alice", "status", "--check"]).returncode == 0
    # Something that needs bob: a folder gone.
    ct.sh("mv /srv/bob /srv/bob.away")
    try:
        ct.wait_for("bob's folder missing", lambda: ct.run(["photolalactl", "--instance", "bob", "status", "--check"]).returncode == 1,
                    timeout=60)
        check = ct.run(["photolalactl", "--instance", "bob", "status", "--check"])
        assert check.stdout == "" and check.stderr == ""
        assert ct.run(["photolalactl", "--instance", "alice", "status", "--check"]).returncode == 0
        assert ct.run(["photolalactl", "status", "--all", "--check"]).returncode == 1
        line = ct.sh("photolalactl status --all").splitlines()[2]
        assert "/srv/bob" in line, line
    finally:
        ct.sh("mv /srv/bob.away /srv/bob")


def test_a_member_of_one_instances_group_reads_nothing_of_the_others(ct):
    ct.sh("useradd -m -s /bin/sh carol && usermod -aG photolala-alice carol")
    assert status_json(ct, "--instance", "alice", user="carol")["instance"] == "alice"
    bob = ct.run(["photolalactl", "--instance", "bob", "status"], user="carol")
    assert bob.returncode == 4 and "photolala-bob" in bob.stderr, bob
    for path in ("/var/lib/photolala/bob", "/var/lib/photolala/bob/queue.db", "/var/lib/photolala/bob/account.json"):
        assert ct.run(["ls", path], user="carol").returncode != 0, path
        assert ct.run(["cat", path], user="carol").returncode != 0, path
    assert ct.run(["ls", "/run/photolala"], user="carol").returncode != 0, "the socket folder can be listed"
    # Nor can alice's group change anything of alice's: reading is all a group gives.
    assert ct.run(["photolalactl", "--instance", "alice", "pause"], user="carol").returncode == 4
    everything = ct.run(["photolalactl", "status", "--all"], user="carol")
    rows = {line.split()[0]: line for line in everything.stdout.splitlines()}
    assert "signed in" in rows["alice"] and "photolala-bob" in rows["bob"], everything.stdout
    assert everything.returncode == 4


def test_check_config_warns_when_two_instances_watch_one_folder(ct, accounts):
    ct.sh("mkdir -p /srv/family")
    for name in ("alice", "bob"):
        ct.write_file(f"/etc/photolala/{name}.toml", config_text(ct, [f"/srv/{name}", "/srv/family"], accounts.url))
    r = ct.run(["photolalad", "--instance", "alice", "--check-config"])
    assert r.returncode == 0, r
    assert ("photolalad: warning: instance bob (/etc/photolala/bob.toml) also watches /srv/family: "
            "its photos would be backed up to both accounts") in r.stderr, r.stderr
    # A reload takes it (the unit checks the file first), with the warning in the journal.
    ct.sh("systemctl reload photolalad@alice")
    for name in ("alice", "bob"):
        ct.write_file(f"/etc/photolala/{name}.toml", config_text(ct, [f"/srv/{name}"], accounts.url))
    assert ct.run(["photolalad", "--instance", "alice", "--check-config"]).stderr == ""
    ct.sh("systemctl reload photolalad@alice")


def test_one_instance_stopping_leaves_the_others_socket(ct):
    start = time.monotonic()
    ct.sh("systemctl stop photolalad@bob")
    assert time.monotonic() - start < 10
    assert ct.run("test -e /run/photolala/bob.sock").returncode != 0
    assert status_json(ct, "--instance", "alice")["state"] == "running"
    down = ct.run(["photolalactl", "--instance", "bob", "status"])
    assert down.returncode == 3 and "systemctl start photolalad@bob" in down.stderr, down
    assert ct.run(["photolalactl", "--instance", "bob", "status", "--check"]).returncode == 3
    assert ct.run(["photolalactl", "status", "--all", "--check"]).returncode == 3
    # Its state stays for its next start; a logout is per instance.
    ct.sh("systemctl start photolalad@bob")
    assert status_json(ct, "--instance", "bob")["account"]["signedIn"]
    # Since the account key stays on a logout only once its recovery key was shown
    # (issue 31), alice is shown hers first, as the refusal tells her to.
    assert "recoveryKey" in ct.sh("photolalactl --instance alice recovery-key --json")
    ct.sh("photolalactl --instance alice logout")
    assert status_json(ct, "--instance", "bob")["account"]["signedIn"]
    assert ct.run(["photolalactl", "--instance", "alice", "status", "--check"]).returncode == 1
    ct.sh("systemctl stop photolalad@alice photolalad@bob")
    assert ct.run("systemctl --failed --no-legend").stdout.strip() == ""
