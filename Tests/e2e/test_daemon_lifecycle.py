"""The daemon as a process: start, status round trip, SIGHUP reload (good and bad
file), SIGTERM exits 0 quickly, a second daemon is refused, a stale socket is replaced."""
import json
import os
import signal
import stat
import subprocess
import time

from support.daemon import Daemon, binary, connectable


def test_start_status_and_clean_stop(tmp_path):
    d = Daemon(tmp_path).start()
    try:
        s = d.status()
        assert s["version"] == "0.1.0"
        assert s["state"] == "needsLogin"
        assert s["pauseReason"] is None
        assert s["account"] == {"signedIn": False, "userId": None}
        assert s["credentials"]["state"] == "none"
        assert s["appleCredential"]["state"] == "unknown"
        for key in ["pending", "hashing", "uploading", "uploaded", "failed", "pendingBytes", "uploadedBytes"]:
            assert isinstance(s["queue"][key], int)
        assert s["watch"]["folders"] == 1
        assert s["watch"]["missingFolders"] == []
        human = d.ctl("status").stdout
        assert "photolalactl login" in human
        # The state directory and its database are private.
        assert stat.S_IMODE(os.stat(d.state_dir).st_mode) == 0o700
        for f in d.state_dir.iterdir():
            assert stat.S_IMODE(os.stat(f).st_mode) & 0o077 == 0, f
        # The socket: 0660, group from daemon.socket_group.
        st = os.stat(d.socket)
        assert stat.S_IMODE(st.st_mode) == 0o660
        assert st.st_gid == 100  # "users"
    finally:
        t0 = time.monotonic()
        code = d.stop()
        elapsed = time.monotonic() - t0
    assert code == 0
    assert elapsed < 5, elapsed
    assert not os.path.exists(d.socket)
    assert "started" in d.log() and "stopped" in d.log()


def test_sigint_stops_cleanly(tmp_path):
    d = Daemon(tmp_path).start()
    d.signal(signal.SIGINT)
    assert d.proc.wait(15) == 0


def test_reload_good_and_bad_config(tmp_path):
    d = Daemon(tmp_path).start()
    try:
        assert d.status()["watch"]["folders"] == 1
        second = tmp_path / "more"
        second.mkdir()
        d.sections["watch"]["folders"] = [str(d.photos), str(second)]
        d.write_config()
        d.signal(signal.SIGHUP)
        d.wait_for(lambda s: s["watch"]["folders"] == 2, timeout=10, what="reloaded folders")
        assert "configuration reloaded" in d.log()

        # A bad file is reported, names the key, and the old settings stay.
        d.write_config(d.config_path.read_text().replace('settle = "1s"', 'settle = "soon"'))
        d.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "not reloaded" not in d.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "not reloaded" in d.log()
        assert "watch.settle" in d.log()
        assert d.status()["watch"]["folders"] == 2
        assert d.proc.poll() is None
    finally:
        assert d.stop() == 0


def test_log_level_is_honoured(tmp_path):
    d = Daemon(tmp_path, config={"daemon": {"log_level": "warning"}}).start()
    d.status()
    assert d.stop() == 0
    log = d.log()
    assert "notice" not in log and "debug" not in log and "info" not in log
    d2 = Daemon(tmp_path / "b", config={"daemon": {"log_level": "debug"}}).start()
    assert d2.stop() == 0
    assert " debug " in d2.log()


def test_second_daemon_on_same_socket_is_refused(tmp_path):
    d = Daemon(tmp_path).start()
    try:
        second = Daemon(tmp_path / "second", name="second")
        second.sections["daemon"]["socket"] = d.socket
        second.write_config()
        second.start(wait=False)
        code = second.proc.wait(20)
        assert code == 1
        assert "already running" in second.log()
        # The first one is unharmed.
        assert d.status()["state"] == "needsLogin"
    finally:
        assert d.stop() == 0


def test_stale_socket_is_replaced(tmp_path):
    d = Daemon(tmp_path).start()
    d.kill9()
    assert os.path.exists(d.socket) and not connectable(d.socket)
    d.start()
    try:
        assert d.status()["state"] == "needsLogin"
        assert "stale" in d.log()
    finally:
        assert d.stop() == 0


def test_ctl_exit_codes_without_daemon(tmp_path):
    r = subprocess.run([binary(), "ctl", "status", "--socket", str(tmp_path / "none.sock")], capture_output=True, text=True)
    assert r.returncode == 3
    assert "not running" in r.stderr and "systemctl start photolalad" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_socket_discovery_order(tmp_path):
    d = Daemon(tmp_path).start()
    try:
        env = dict(os.environ)
        # From the config file given with --config.
        r = subprocess.run([binary(), "ctl", "status", "--json", "--config", str(d.config_path)], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        # $PHOTOLALA_SOCKET beats the config.
        env["PHOTOLALA_SOCKET"] = d.socket
        env["PHOTOLALA_CONFIG"] = str(tmp_path / "missing.toml")
        r = subprocess.run([binary(), "ctl", "status", "--json"], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        # --socket beats the environment.
        r = subprocess.run([binary(), "ctl", "status", "--socket", str(tmp_path / "nope")], capture_output=True, text=True, env=env)
        assert r.returncode == 3
        # photolalactl by program name (the packaged symlink) is the CLI.
        link = tmp_path / "photolalactl"
        link.symlink_to(binary())
        r = subprocess.run([str(link), "status", "--json", "--socket", d.socket], capture_output=True, text=True)
        assert r.returncode == 0 and json.loads(r.stdout)["state"] == "needsLogin"
        r = subprocess.run([str(link), "--version"], capture_output=True, text=True)
        assert r.stdout.strip() == "0.1.0"
    finally:
        assert d.stop() == 0


def test_state_dir_created_private(tmp_path):
    d = Daemon(tmp_path)
    d.sections["daemon"]["state_dir"] = str(tmp_path / "deep" / "state")
    d.state_dir = tmp_path / "deep" / "state"
    d.write_config()
    d.start()
    try:
        assert stat.S_IMODE(os.stat(d.state_dir).st_mode) == 0o700
        assert (d.state_dir / "queue.db").exists()
    finally:
        d.stop()


def test_completion_scripts(tmp_path):
    for shell in ["bash", "zsh", "fish"]:
        r = subprocess.run([binary(), "ctl", "--generate-completion-script", shell], capture_output=True, text=True)
        assert r.returncode == 0
        assert "photolalactl" in r.stdout
        assert "status" in r.stdout and "rescan" in r.stdout
    # The bash script loads and completes subcommands.
    script = tmp_path / "c.bash"
    script.write_text(subprocess.run([binary(), "ctl", "--generate-completion-script", "bash"], capture_output=True, text=True).stdout)
    probe = f'source {script}; COMP_WORDS=(photolalactl st); COMP_CWORD=1; COMP_LINE="photolalactl st"; COMP_POINT=${{#COMP_LINE}}; _photolalactl; echo "${{COMPREPLY[@]}}"'
    r = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
    assert "status" in r.stdout, (r.stdout, r.stderr)
