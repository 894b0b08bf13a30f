"""The .deb under a real systemd: a minimal Debian 12 (mmdebstrap, cached per machine)
booted with systemd-nspawn, the package installed with apt as an admin would, then
the life of the service: enabled but not started until configured, no crash loop,
READY=1 before active (running), the STATUS= line, photolalactl for members and
non-members of the group photolala, reload, the journal, a clean and quick stop,
restart after a kill, the watchdog, an upgrade that keeps the queue, uploads and a
thumbnail made by the preview worker inside the unit's sandbox, a missing decoder
library that turns thumbnails off but not backups, and purge.

The tests run in file order against one container (a module fixture); each leaves
the service as the next expects. Later steps (uploads after login against the fake
backend on the host's loopback) can use ct.run_in_container(cmd)."""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import time

import pytest
from PIL import Image

from support import images
from support.fake_backend import user_id_for
from support.nspawn import Container, Unavailable, built_deb, prerequisites

# One container for the module, its tests in file order: one xdist worker runs them all.
pytestmark = [pytest.mark.packaging, pytest.mark.xdist_group("nspawn")]

CONFIG = "/etc/photolala/photolalad.toml"
UNIT = "photolalad.service"


@pytest.fixture(scope="module")
def ct(tmp_path_factory):
    why = prerequisites()
    if why:
        pytest.skip(f"systemd-nspawn tests cannot run here: {why}")
    deb = built_deb()
    try:
        container = Container.boot(tmp_path_factory.mktemp("nspawn"), deb=deb.path)
    except Unavailable as e:
        pytest.skip(f"systemd-nspawn cannot boot a container on this machine: {e}")
    container.deb = deb.path
    try:
        yield container
    finally:
        # Kept for a failing run: the container's whole journal.
        try:
            (container.workdir / "journal.txt").write_text(container.journal())
            print(f"\ncontainer journal: {container.workdir / 'journal.txt'}")
        except Exception:
            pass
        container.cleanup()


def active(ct) -> tuple[str, str]:
    p = ct.show(UNIT, "ActiveState", "SubState")
    return p["ActiveState"], p["SubState"]


def main_pid(ct) -> int:
    return int(ct.show(UNIT, "MainPID")["MainPID"])


def status_json(ct, user: str | None = None) -> dict:
    r = ct.run(["photolalactl", "status", "--json"], user=user)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def set_config(ct, folders: list[str], extra: str = ""):
    shipped = ct.read_file(CONFIG)
    text = re.sub(r"^folders = .*$", "folders = " + json.dumps(folders), shipped, count=1, flags=re.M)
    ct.write_file(CONFIG, text + extra)


# -- install -----------------------------------------------------------------


def test_install_creates_the_user_and_enables_but_does_not_start(ct):
    r = ct.install_deb(ct.deb)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "set watch.folders in /etc/photolala/photolalad.toml" in r.stdout + r.stderr, r.stdout + r.stderr
    passwd = ct.sh("getent passwd photolala").strip().split(":")
    assert int(passwd[2]) < 1000 and passwd[5] == "/var/lib/photolala" and passwd[6] == "/usr/sbin/nologin"
    assert ct.sh("getent group photolala").startswith("photolala:")
    assert ct.sh("systemctl is-enabled photolalad").strip() == "enabled"
    assert active(ct) == ("inactive", "dead")
    assert ct.run("systemctl --failed --no-legend").stdout.strip() == ""
    assert ct.sh("readlink /usr/bin/photolalactl").strip() == "photolalad"
    assert ct.run("photolalactl --version").stdout.strip() == "0.1.0"
    assert ct.run("test -f /usr/share/man/man8/photolalad.8.gz").returncode == 0
    # The installed unit, as this systemd sees it (man-db is not in the minimal root).
    verify = ct.run("systemd-analyze verify --man=no photolalad.service")
    assert verify.returncode == 0 and not (verify.stdout + verify.stderr).strip(), verify


def test_unconfigured_start_fails_once_and_is_not_restarted(ct):
    r = ct.run("systemctl start photolalad")
    assert r.returncode != 0
    time.sleep(6.5)  # past RestartSec=5s
    p = ct.show(UNIT, "ActiveState", "Result", "ExecMainStatus", "NRestarts")
    assert p == {"ActiveState": "failed", "Result": "exit-code", "ExecMainStatus": "78", "NRestarts": "0"}, p
    assert "watch.folders" in ct.journal("-u", "photolalad")
    ct.sh("systemctl reset-failed photolalad")


# -- permissions for a share (the README/man page recipe) ----------------------


def test_share_permissions_recipe_lets_photolala_read(ct):
    ct.sh("useradd -m -s /bin/sh alice && useradd -m -s /bin/sh bob && usermod -aG photolala alice")
    # alice's private photos: photolala cannot read them...
    ct.sh("mkdir -p /srv/photos/2026 && echo jpeg > /srv/photos/2026/a.jpg && chown -R alice:alice /srv/photos"
          " && chmod -R go-rwx /srv/photos")
    assert ct.run("cat /srv/photos/2026/a.jpg", user="photolala").returncode != 0
    # ...until the documented ACLs, default ones included, are set.
    ct.sh("setfacl -R -m u:photolala:rX /srv/photos && find /srv/photos -type d -exec setfacl -m d:u:photolala:rX {} +")
    assert ct.run("cat /srv/photos/2026/a.jpg", user="photolala").stdout == "jpeg\n"
    # New folders and files inherit the default ACL, whatever the umask.
    ct.sh("umask 077 && mkdir /srv/photos/2027 && echo new > /srv/photos/2027/b.jpg"
          " && chown -R alice:alice /srv/photos/2027")
    assert ct.run("cat /srv/photos/2027/b.jpg", user="photolala").stdout == "new\n"
    # A share readable by a group: add photolala to the group.
    ct.sh("groupadd photos && mkdir -p /home/alice/Pictures && echo heic > /home/alice/Pictures/c.heic"
          " && chown -R alice:photos /home/alice/Pictures && chmod -R 0750 /home/alice/Pictures"
          " && chmod 0640 /home/alice/Pictures/c.heic && setfacl -m u:photolala:x /home/alice"
          " && usermod -aG photos photolala")
    assert ct.run("cat /home/alice/Pictures/c.heic", user="photolala").stdout == "heic\n"


# -- start -------------------------------------------------------------------


def test_configured_service_becomes_active_only_after_ready(ct):
    set_config(ct, ["/srv/photos", "/home/alice/Pictures"])
    ct.sh("photolalad --check-config")
    ct.sh("systemd-analyze log-level debug")
    try:
        start = time.monotonic()
        ct.sh("systemctl start photolalad")  # Type=notify: returns once READY=1 arrived
        took = time.monotonic() - start
    finally:
        ct.sh("systemd-analyze log-level info")
    assert active(ct) == ("active", "running")
    p = ct.show(UNIT, "Type", "NotifyAccess", "WatchdogUSec", "User", "StatusText", "MainPID")
    assert p["Type"] == "notify" and p["User"] == "photolala" and p["WatchdogUSec"] == "1min"
    assert p["StatusText"], p
    # systemd saw READY=1 from the main process before it called the unit started.
    log = ct.journal("_PID=1", "-u", "photolalad")
    ready = re.search(rf"photolalad\.service: Got notification message from PID {p['MainPID']} \([^)]*READY=1", log)
    running = re.search(r"photolalad\.service: Changed start -> running", log)
    assert ready and running and ready.start() < running.start(), log[-3000:]
    print(f"\nstart to READY=1: {took:.2f}s")


def test_runtime_and_state_directories(ct):
    assert ct.sh("stat -c '%a %U %G' /var/lib/photolala").split() == ["700", "photolala", "photolala"]
    # Shared with the instances' sockets (photolalad@NAME.service): passable, not listable;
    # who may use a socket is its own mode's and the daemon's peer check's to say.
    assert ct.sh("stat -c '%a %U %G' /run/photolala").split() == ["711", "photolala", "photolala"]
    assert ct.run("ls /run/photolala", user="bob").returncode != 0
    assert ct.sh("stat -c '%a %U %G %F' /run/photolala/photolalad.sock").split()[:3] == ["660", "photolala", "photolala"]
    assert ct.run("test -f /var/lib/photolala/queue.db").returncode == 0
    pid = main_pid(ct)
    # The process: the user photolala, its groups, no capabilities, seccomp.
    status = ct.sh(f"cat /proc/{pid}/status")
    assert re.search(r"^CapEff:\s+0+$", status, re.M) and re.search(r"^NoNewPrivs:\s+1$", status, re.M)
    assert re.search(r"^Seccomp:\s+2$", status, re.M)
    photos_gid = ct.sh("getent group photos").split(":")[2]
    assert photos_gid in re.search(r"^Groups:(.*)$", status, re.M).group(1).split()
    # In the background: a low CPU weight and the lowest best-effort I/O priority.
    assert ct.show(UNIT, "CPUWeight")["CPUWeight"] == "20"
    assert ct.sh(f"ionice -p {pid}").strip() == "best-effort: prio 7"
    # Nothing in the sandbox gets in the daemon's way: no call refused by the seccomp
    # filter (EPERM, errno=1). libdispatch's "errno=13" (EACCES: an unprivileged process
    # may not raise a thread's priority) happens outside the sandbox too.
    log = ct.journal("SYSLOG_IDENTIFIER=photolalad", "-o", "cat")
    assert "photolalad 0.1.0 started" in log
    assert not re.search(r"errno=1\b|Operation not permitted|Bad system call|core-dump", log), log


def test_sandbox_reads_shares_and_writes_only_its_own_directories(ct):
    pid = main_pid(ct)

    def in_sandbox(cmd: str):
        return ct.run(f"nsenter -t {pid} -m -- setpriv --reuid=photolala --regid=photolala --init-groups -- sh -c '{cmd}'")

    assert in_sandbox("cat /srv/photos/2026/a.jpg").stdout == "jpeg\n"
    assert in_sandbox("cat /home/alice/Pictures/c.heic").stdout == "heic\n"
    denied = in_sandbox("touch /srv/photos/x")
    assert denied.returncode != 0 and "Read-only file system" in denied.stderr, denied
    assert in_sandbox("touch /var/lib/photolala/probe && rm /var/lib/photolala/probe").returncode == 0
    assert in_sandbox("touch /etc/photolala/x").returncode != 0


def test_status_line_is_shown_by_systemctl_status(ct):
    out = ct.run("systemctl status photolalad --no-pager -n 0").stdout
    assert "Active: active (running)" in out
    m = re.search(r'^\s+Status: "(.+)"$', out, re.M)
    assert m, out
    assert m.group(1) == ct.show(UNIT, "StatusText")["StatusText"]


# -- photolalactl and the socket's group ---------------------------------------------


def test_ctl_status_for_group_members_and_exit_4_for_others(ct):
    s = status_json(ct, user="alice")
    assert s["version"] == "0.1.0" and s["state"] in ("running", "needsLogin", "paused")
    assert s["watch"]["folders"] == 2
    assert s["watch"]["missingFolders"] == []
    human = ct.run(["photolalactl", "status"], user="alice")
    assert human.returncode == 0 and "/srv/photos" in human.stdout, human
    bob = ct.run(["photolalactl", "status"], user="bob")
    assert bob.returncode == 4, bob
    assert "photolala" in bob.stderr and "group" in bob.stderr, bob.stderr
    # Reading is for the group; changing needs root or the daemon's user.
    pause = ct.run(["photolalactl", "pause"], user="alice")
    assert pause.returncode == 4, pause
    assert ct.run(["photolalactl", "queue", "--json"], user="alice").returncode == 0


def test_ctl_exits_3_when_the_daemon_is_not_running(ct):
    r = ct.run(["photolalactl", "status", "--socket", "/run/photolala/nothing.sock"])
    assert r.returncode == 3 and "systemctl start photolalad" in r.stderr, r


# -- reload ------------------------------------------------------------------


def test_reload_applies_a_config_change_and_refuses_a_bad_one(ct):
    pid = main_pid(ct)
    ct.sh("mkdir -p /srv/more && setfacl -m u:photolala:rX /srv/more")
    set_config(ct, ["/srv/photos", "/home/alice/Pictures", "/srv/more"])
    ct.sh("systemctl reload photolalad")
    ct.wait_for("the reloaded folders", lambda: status_json(ct)["watch"]["folders"] == 3, timeout=15)
    assert main_pid(ct) == pid
    assert "configuration reloaded" in ct.journal("-u", "photolalad")
    # A bad file: the reload fails visibly, the daemon keeps running with its settings.
    good = ct.read_file(CONFIG)
    ct.write_file(CONFIG, good + "\n[watch2]\nfolders = 1\n")
    bad = ct.run("systemctl reload photolalad")
    assert bad.returncode != 0
    assert active(ct) == ("active", "running") and main_pid(ct) == pid
    assert status_json(ct)["watch"]["folders"] == 3
    ct.write_file(CONFIG, good)


def test_journal_has_the_daemons_logs(ct):
    log = ct.journal("-u", "photolalad", "-o", "cat")
    assert "photolalad 0.1.0 started" in log, log[-2000:]
    assert re.search(r"(notice|info)", log)


# -- watchdog, kill, stop ---------------------------------------------------------


def test_watchdog_pings_keep_a_short_watchdog_happy(ct):
    ct.write_file("/etc/systemd/system/photolalad.service.d/watchdog.conf", "[Service]\nWatchdogSec=2s\n")
    try:
        ct.sh("systemctl daemon-reload && systemctl restart photolalad")
        pid = main_pid(ct)
        before = int(ct.show(UNIT, "WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"])
        time.sleep(4.5)
        p = ct.show(UNIT, "MainPID", "NRestarts", "ActiveState", "WatchdogTimestampMonotonic")
        assert p["ActiveState"] == "active" and int(p["MainPID"]) == pid, p
        assert int(p["WatchdogTimestampMonotonic"]) > before, p
    finally:
        ct.sh("rm -rf /etc/systemd/system/photolalad.service.d && systemctl daemon-reload && systemctl restart photolalad")


def test_a_killed_daemon_is_restarted(ct):
    pid = main_pid(ct)
    restarts = int(ct.show(UNIT, "NRestarts")["NRestarts"])
    ct.sh("systemctl kill -s KILL photolalad")
    ct.wait_for("a new main process", lambda: main_pid(ct) not in (0, pid) and active(ct) == ("active", "running"),
                timeout=20)
    assert int(ct.show(UNIT, "NRestarts")["NRestarts"]) == restarts + 1
    assert status_json(ct)["watch"]["folders"] == 3


def test_stop_is_clean_and_quick(ct):
    start = time.monotonic()
    ct.sh("systemctl stop photolalad")
    took = time.monotonic() - start
    p = ct.show(UNIT, "ActiveState", "Result", "ExecMainStatus", "ExecMainCode")
    assert p["ActiveState"] == "inactive" and p["Result"] == "success" and p["ExecMainStatus"] == "0", p
    assert took < 5, f"stop took {took:.1f}s"
    # The daemon's socket is gone; the folder, shared with instances, stays (RuntimeDirectoryPreserve=).
    assert ct.run("test -e /run/photolala/photolalad.sock").returncode != 0
    assert ct.run("ls -A /run/photolala").stdout.strip() == ""
    log = ct.journal("-u", "photolalad", "-o", "cat")
    assert "photolalad stopped" in log
    print(f"\nstop: {took:.2f}s")
    assert ct.run(["photolalactl", "status"], user="alice").returncode == 3


# -- upgrade and purge ----------------------------------------------------------


def queue_items(ct) -> dict[str, tuple]:
    r = ct.run(["photolalactl", "queue", "--json"])
    assert r.returncode == 0, r.stderr
    return {i["path"]: (i["state"], i["md5"], i["updatedAt"]) for i in json.loads(r.stdout)["items"]}


def test_upgrade_restarts_the_daemon_and_keeps_the_queue(ct):
    ct.sh("systemctl start photolalad")
    # Root may change things: pause and resume answer.
    ct.sh("photolalactl pause && photolalactl resume")
    # The photos of the earlier tests are in the queue (hashed, waiting for a sign-in).
    before = ct.wait_for("the photos in the queue", lambda: (q := queue_items(ct)) and
                         {"/srv/photos/2026/a.jpg", "/srv/photos/2027/b.jpg", "/home/alice/Pictures/c.heic"} <= set(q)
                         and all(v[1] for v in q.values()) and q, timeout=60)
    pid = main_pid(ct)
    inode = ct.sh("stat -c %i /var/lib/photolala/queue.db")
    r = ct.run(["apt-get", "install", "-y", "--reinstall", f"/var/cache/photolala-test/{ct.deb.name}"], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert active(ct) == ("active", "running")
    assert main_pid(ct) != pid, "the upgrade did not restart the daemon"
    assert ct.sh("stat -c %i /var/lib/photolala/queue.db") == inode
    after = queue_items(ct)
    for path, (state, md5, updated) in before.items():
        assert after.get(path, (None, None, None))[1:] == (md5, updated), f"{path}: {before[path]} -> {after.get(path)}"
    assert 'folders = ["/srv/photos"' in ct.read_file(CONFIG)  # the conffile was kept


def restart(ct):
    # These tests restart the service more often than StartLimitBurst= allows in its
    # interval (an admin's restarts count as much as crashes): start the count afresh.
    ct.sh("systemctl reset-failed photolalad && systemctl restart photolalad")


@contextlib.contextmanager
def signed_in(ct, moto):
    """The service signed in against a fake backend on the host (the container shares the
    host's loopback, so it reaches the backend and moto there); signed out afterwards."""
    from support.fake_backend import FakeBackend

    moto.empty_bucket()
    backend = FakeBackend(moto).start()
    good = ct.read_file(CONFIG)
    try:
        text = re.sub(r"^#?api_url = .*$", f'api_url = "{backend.url}"', good, count=1, flags=re.M)
        ct.write_file(CONFIG, text)
        restart(ct)
        ct.wait_for("the restarted service", lambda: active(ct) == ("active", "running"), timeout=30)
        token = backend.mint_identity_token("nspawn-apple-subject")
        r = ct.run(["photolalactl", "login", "--identity-token", token])
        assert r.returncode == 0, r.stderr
        assert "Signed in" in r.stdout
        yield backend, user_id_for("nspawn-apple-subject")
        # No secret in the journal.
        journal = ct.journal("-u", "photolalad", "-o", "cat")
        for secret in backend.all_secrets():
            assert secret not in journal
    finally:
        ct.run(["photolalactl", "logout", "--forget-key"])
        ct.write_file(CONFIG, good)
        restart(ct)
        backend.stop()


def bucket(moto) -> dict[str, bytes]:
    s3 = moto.s3_admin()
    return {o["Key"]: s3.get_object(Bucket=moto.bucket, Key=o["Key"])["Body"].read()
            for o in s3.list_objects_v2(Bucket=moto.bucket).get("Contents", [])}


def add_photo(ct, tmp_path, name: str, body: bytes) -> str:
    """Puts a photo into /srv/photos as a user would (readable by photolala through the
    share's ACL); returns its MD5."""
    staged = tmp_path / name
    staged.write_bytes(body)
    inside = ct.copy_in(staged, f"/var/cache/photolala-test/{name}")
    ct.sh(f"install -m 644 {inside} /srv/photos/{name}")
    return hashlib.md5(body).hexdigest()


def test_login_and_uploads_reach_the_hosts_moto(ct, moto):
    with signed_in(ct, moto) as (backend, uid):
        ct.sh("head -c 300000 /dev/urandom > /srv/photos/from-the-nas.jpg && chmod 644 /srv/photos/from-the-nas.jpg")
        inside = ct.sh("md5sum /srv/photos/from-the-nas.jpg").split()[0]

        def done():
            q = status_json(ct)["queue"]
            return (f"photos/{uid}/{inside}.dat" in bucket(moto) and q["failed"] == 0
                    and q["pending"] + q["hashing"] + q["uploading"] == 0)

        # The daemon's default settle (5 s) runs first.
        ct.wait_for("the new photo uploaded", done, timeout=90)
        keys = bucket(moto)
        assert keys, "nothing reached the host's moto"
        for key, body in keys.items():
            if key.startswith("photos/"):
                assert key == f"photos/{uid}/{hashlib.md5(body).hexdigest()}.dat", key
            else:   # the thumbnail, the apps' catalog, this NAS's manifest: all the user's own
                assert key.split("/")[:2] in (["thumbnails", uid], ["catalogs", uid], ["metadata", uid]), key
        assert f"photos/{uid}/{inside}.dat" in keys


def test_the_preview_worker_makes_a_thumbnail_inside_the_units_sandbox(ct, moto, tmp_path):
    """A real JPEG: uploaded, then its PTM-256 thumbnail made by the worker under the
    unit's own sandbox (SystemCallFilter, MemoryDenyWriteExecute, NoNewPrivileges …) plus
    its seccomp filter, and put next to it in the host's moto."""
    since = ct.sh("date +%s").strip()
    with signed_in(ct, moto) as (backend, uid):
        photo = images.encode(images.upright_pattern(1200, 900), "JPEG", exif=images.exif("2021:05:06 07:08:09"))
        md5 = add_photo(ct, tmp_path, "shot.jpg", photo)
        thumbnail = f"thumbnails/{uid}/{md5}.jpg"
        ct.wait_for("the thumbnail in the host's moto", lambda: thumbnail in bucket(moto)
                    and status_json(ct)["thumbnails"]["done"] == 1, timeout=120)
        keys = bucket(moto)
        assert keys[f"photos/{uid}/{md5}.dat"] == photo
        img = Image.open(io.BytesIO(keys[thumbnail]))
        assert img.format == "JPEG" and img.size == (341, 256) and len(keys[thumbnail]) <= 50_000, img.size
        r, _, b = img.getpixel((170, 4))
        assert b > 150 and r < 100, f"upright: blue along the top, not {(r, b)}"

        # The worker runs as the daemon's child in the unit (its filters stacked on the
        # unit's), and only it maps the decoders.
        daemon = main_pid(ct)
        worker = int(ct.sh("pgrep -u photolala -f '^photolalad __preview-worker'").split()[0])
        assert ct.sh(f"ps -o ppid= -p {worker}").strip() == str(daemon)
        d_status, w_status = ct.sh(f"cat /proc/{daemon}/status"), ct.sh(f"cat /proc/{worker}/status")
        filters = [int(re.search(r"^Seccomp_filters:\s+(\d+)$", t, re.M).group(1)) for t in (d_status, w_status)]
        assert filters[1] > filters[0] >= 1, filters
        assert re.search(r"^NoNewPrivs:\s+1$", w_status, re.M) and re.search(r"^CapEff:\s+0+$", w_status, re.M)
        assert "libvips.so.42" in ct.sh(f"cat /proc/{worker}/maps")
        assert "libvips" not in ct.sh(f"cat /proc/{daemon}/maps"), "the daemon maps a decoder"

    log = ct.journal("-u", "photolalad", "-o", "cat", "--since", f"@{since}")
    for failure in ("no preview", "thumbnails are off", "decoder", "Bad system call", "SIGSYS", "sandbox could not"):
        assert failure not in log, f"{failure!r} in the journal:\n{log[-3000:]}"


def test_a_missing_decoder_library_turns_thumbnails_off_never_backups(ct, moto, tmp_path):
    """libvips42 gone (as if removed with dpkg --force-depends): status says so and what
    to do, the photo is still backed up; once the library is back, its thumbnail comes
    without a restart."""
    hidden = "/root/hidden-libvips"
    ct.sh(f"mkdir -p {hidden} && mv /usr/lib/*-linux-gnu/libvips.so.42* {hidden}/ && ldconfig")
    try:
        with signed_in(ct, moto) as (backend, uid):
            photo = images.encode(images.upright_pattern(900, 1200), "JPEG")
            md5 = add_photo(ct, tmp_path, "while-missing.jpg", photo)

            def problem():
                s = status_json(ct)
                return (f"photos/{uid}/{md5}.dat" in bucket(moto) and s["queue"]["failed"] == 0
                        and [p for p in s["problems"] if p.startswith("Thumbnails are off:")])

            said = ct.wait_for("the problem in status", problem, timeout=120)[0]
            assert "libvips42 is not installed: libvips.so.42: cannot open shared object file" in said, said
            assert "apt-get install libvips42" in said and "Backups go on" in said, said
            assert status_json(ct)["thumbnails"]["pending"] >= 1
            human = ct.sh("photolalactl status")
            assert "Thumbnails are off: libvips42 is not installed" in human, human
            assert active(ct) == ("active", "running")

            ct.sh(f"mv {hidden}/* $(dirname $(ls -d /usr/lib/*-linux-gnu/libraw.so.20)) && ldconfig")
            ct.wait_for("the thumbnail once libvips is back", lambda: f"thumbnails/{uid}/{md5}.jpg" in bucket(moto)
                        and not [p for p in status_json(ct)["problems"] if p.startswith("Thumbnails are off:")],
                        timeout=120)
            log = ct.journal("-u", "photolalad", "-o", "cat", "--since", "-5min")
            assert log.count("thumbnails are off, backups go on: libvips42 is not installed") == 1, log[-3000:]
            assert "thumbnails resume" in log
    finally:
        ct.run(f"test -z \"$(ls -A {hidden} 2>/dev/null)\" || mv {hidden}/* $(dirname $(ls -d /usr/lib/*-linux-gnu/libraw.so.20)); ldconfig")


def test_purge_removes_the_state(ct):
    r = ct.run(["apt-get", "purge", "-y", "photolalad"], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ct.run("pgrep -x photolalad").returncode != 0
    for path in ("/var/lib/photolala", "/etc/photolala", "/run/photolala", "/usr/bin/photolalad",
                 "/lib/systemd/system/photolalad.service",
                 "/etc/systemd/system/multi-user.target.wants/photolalad.service"):
        assert ct.run(["test", "-e", path]).returncode != 0, f"{path} is still there"
    assert ct.run("systemctl is-enabled photolalad").stdout.strip() in ("", "not-found")
    assert ct.run("systemctl --failed --no-legend").stdout.strip() == ""
    # The photos were only ever read.
    assert ct.sh("cat /srv/photos/2026/a.jpg") == "jpeg\n"
