"""`photolalad --check-config` and start-up against a table of good and bad files:
the exit code (0 / 78) and that every message names the offending key."""
import subprocess

import pytest

from support.daemon import REPO, binary

GOOD = [
    ('[watch]\nfolders = ["/srv/photos"]\n', None),
    ('[watch]\nfolders = ["/srv/photos", "/home/alice/Pictures/"]\nsettle = 10\nrescan_interval = "off"\n', "rescan_interval = \"off\""),
    ('[watch]\nfolders = ["/a"]\nsettle = "90s"\nrescan_interval = "1h30m"\n', 'settle = "90s"'),
    ('[watch]\nfolders = ["/a"]\n[upload]\npart_size = 8388608\nmultipart_threshold = "1GiB"\nbandwidth_limit = "10MiB/s"\n', 'bandwidth_limit = "10MiB/s"'),
    ('[watch]\nfolders = ["/a"]\n[upload]\nstorage_class = "DEEP_ARCHIVE"\nconcurrency = 8\n', 'storage_class = "DEEP_ARCHIVE"'),
    ('[watch]\nfolders = ["/a"]\n[account]\napi_url = "http://127.0.0.1:8080"\n', 'api_url = "http://127.0.0.1:8080"'),
    ('[watch]\nfolders = ["/a"]\n[account]\napi_url = "http://localhost:8080"\ndevice_name = "nas-livingroom"\n', 'device_name = "nas-livingroom"'),
    ('[watch]\nfolders = ["/a"]\n[account]\napi_url = "http://[::1]:8080"\n', None),
    ('[watch]\nfolders = ["/a"]\nextensions = ["JPG", ".heic"]\nexclude = ["*.xmp"]\n', 'extensions = ["jpg", "heic"]'),
    ('[watch]\nfolders = ["/a"]\n[credentials]\nrefresh_before_expiry = "5m"\napple_check_interval = "6h"\n', 'apple_check_interval = "6h"'),
    ('[watch]\nfolders = ["/a"]\n[daemon]\nlog_level = "warning"\nstate_dir = "/tmp/x"\n', 'log_level = "warning"'),
    ('[watch]\nfolders = ["/a"]\n[upload]\nbandwidth_limit = "18:00,0 08:00,2MiB/s 23:00,off"\n', 'bandwidth_limit = "08:00,2MiB/s 18:00,0 23:00,off"'),
    ('[watch]\nfolders = ["/a"]\n[notify]\nwebhook = "https://ntfy.sh/nas"\nwebhook_format = "ntfy"\nrepeat = "6h"\n[audit]\nmax_size = "4MiB"\n', 'repeat = "6h"'),
    # The mirror (mirror.md): inside a watched folder is fine.
    ('[watch]\nfolders = ["/srv/photos"]\n[mirror]\nfolder = "/srv/photos/Photolala/"\non_cloud_delete = "trash"\nmin_free = "20GiB"\n',
     'folder = "/srv/photos/Photolala"'),
]

BAD = [
    # (file, key that must be named, a word of the expectation)
    ('[watch]\nfolders = []\n', "watch.folders", "at least one"),
    ('[watch]\nsettle = "5s"\n', "watch.folders", "required"),
    ('', "watch.folders", "required"),
    ('[watch]\nfolders = ["photos"]\n', "watch.folders", "absolute"),
    ('[watch]\nfolders = "/srv/photos"\n', "watch.folders", "list"),
    ('[watch]\nfolders = ["/a"]\nsettle = "5 parsecs"\n', "watch.settle", "duration"),
    ('[watch]\nfolders = ["/a"]\nsettle = true\n', "watch.settle", "duration"),
    ('[watch]\nfolders = ["/a"]\nrescan_interval = "never"\n', "watch.rescan_interval", "off"),
    ('[watch]\nfolders = ["/a"]\nfollow_symlinks = "yes"\n', "watch.follow_symlinks", "true or false"),
    ('[watch]\nfolders = ["/a"]\nfoldrs = ["/b"]\n', "watch.foldrs", "unknown key"),
    ('[watch]\nfolders = ["/a"]\n[uplod]\nconcurrency = 2\n', "uplod", "unknown section"),
    ('[watch]\nfolders = ["/a"]\n[upload]\nconcurrency = "four"\n', "upload.concurrency", "whole number"),
    ('[watch]\nfolders = ["/a"]\n[upload]\nconcurrency = 0\n', "upload.concurrency", "1 to 64"),
    ('[watch]\nfolders = ["/a"]\n[upload]\npart_size = "16 furlongs"\n', "upload.part_size", "size"),
    ('[watch]\nfolders = ["/a"]\n[upload]\npart_size = "1MiB"\n', "upload.part_size", "5MiB"),
    ('[watch]\nfolders = ["/a"]\n[upload]\nmultipart_threshold = "6GiB"\n', "upload.multipart_threshold", "5GiB"),
    ('[watch]\nfolders = ["/a"]\n[upload]\nbandwidth_limit = "fast"\n', "upload.bandwidth_limit", "off"),
    ('[watch]\nfolders = ["/a"]\n[upload]\nbandwidth_limit = "10MiB"\n', "upload.bandwidth_limit", "per second"),
    ('[watch]\nfolders = ["/a"]\n[upload]\nstorage_class = "COLD"\n', "upload.storage_class", "DEEP_ARCHIVE"),
    ('[watch]\nfolders = ["/a"]\n[account]\napi_url = "http://api.photolala.app"\n', "account.api_url", "https"),
    ('[watch]\nfolders = ["/a"]\n[account]\napi_url = "http://10.0.0.5"\n', "account.api_url", "loopback"),
    ('[watch]\nfolders = ["/a"]\n[account]\napi_url = "not a url"\n', "account.api_url", "URL"),
    ('[watch]\nfolders = ["/a"]\n[credentials]\nrefresh_before_expiry = "-5m"\n', "credentials.refresh_before_expiry", "duration"),
    ('[watch]\nfolders = ["/a"]\n[daemon]\nlog_level = "verbose"\n', "daemon.log_level", "trace"),
    ('[watch]\nfolders = ["/a"]\n[daemon]\nstate_dir = "var/lib"\n', "daemon.state_dir", "absolute"),
    ('[watch]\nfolders = ["/a"]\n[daemon]\nsocket = "/' + "s" * 120 + '"\n', "daemon.socket", "107"),
    ('[watch\nfolders = ["/a"]\n', "line 1", "TOML"),
    ('[watch]\nfolders = ["/a"]\n[upload]\nbandwidth_limit = "08:00,2MiB/s 18:00,0 25:00,off"\n', "upload.bandwidth_limit", '"25:00,off"'),
    ('[watch]\nfolders = ["/a"]\n[upload]\nbandwidth_limit = "Mon-08:00,off 18:00,0"\n', "upload.bandwidth_limit", "not mixed"),
    ('[watch]\nfolders = ["/a"]\n[notify]\nwebhook = "http://10.0.0.5/hook"\n', "notify.webhook", "loopback"),
    ('[watch]\nfolders = ["/a"]\n[notify]\ncommand = "notify.sh"\n', "notify.command", "absolute"),
    ('[watch]\nfolders = ["/a"]\n[notify]\nrepeat = "60d"\n', "notify.repeat", "30d"),
    ('[watch]\nfolders = ["/a"]\n[audit]\nmax_size = "2GiB"\n', "audit.max_size", "1GiB"),
    ('[watch]\nfolders = ["/a"]\n[mirror]\nfolder = "mirror"\n', "mirror.folder", "absolute"),
    ('[watch]\nfolders = ["/a"]\n[mirror]\nfolder = "/"\n', "mirror.folder", "below /"),
    ('[watch]\nfolders = ["/a"]\n[daemon]\nstate_dir = "/var/lib/photolala"\n[mirror]\nfolder = "/var/lib/photolala/m"\n', "mirror.folder", "state_dir"),
    ('[watch]\nfolders = ["/srv/photos/2024"]\n[mirror]\nfolder = "/srv/photos"\n', "mirror.folder", "holds no watched folder"),
    ('[watch]\nfolders = ["/a"]\n[mirror]\nfolder = "/m"\nmin_free = "lots"\n', "mirror.min_free", "share"),
    ('[watch]\nfolders = ["/a"]\n[mirror]\nfolder = "/m"\nfile_mode = 640\n', "mirror.file_mode", "octal"),
]


def check(tmp_path, text, *extra):
    path = tmp_path / "photolalad.toml"
    path.write_text(text)
    return subprocess.run([binary(), "--check-config", "--config", str(path), *extra], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("text,expect", GOOD)
def test_good_config(tmp_path, text, expect):
    r = check(tmp_path, text)
    assert r.returncode == 0, r.stderr
    assert "[daemon]" in r.stdout and "state_dir" in r.stdout
    if expect:
        assert expect in r.stdout


@pytest.mark.parametrize("text,key,word", BAD)
def test_bad_config_names_the_key(tmp_path, text, key, word):
    r = check(tmp_path, text)
    assert r.returncode == 78, (r.stdout, r.stderr)
    assert key in r.stderr, r.stderr
    assert word.lower() in r.stderr.lower(), r.stderr


def test_every_problem_is_reported_at_once(tmp_path):
    r = check(tmp_path, '[watch]\nfolders = ["rel"]\nsettle = "x"\n[upload]\nconcurrency = "four"\nfoo = 1\n')
    assert r.returncode == 78
    for key in ["watch.folders", "watch.settle", "upload.concurrency", "upload.foo"]:
        assert key in r.stderr
    assert "4 problems" in r.stderr


def test_missing_file_names_the_path(tmp_path):
    r = subprocess.run([binary(), "--check-config", "--config", str(tmp_path / "nope.toml")], capture_output=True, text=True)
    assert r.returncode == 78
    assert str(tmp_path / "nope.toml") in r.stderr and "does not exist" in r.stderr


def test_unreadable_file_names_the_path(tmp_path):
    path = tmp_path / "secret.toml"
    path.write_text('[watch]\nfolders = ["/a"]\n')
    path.chmod(0)
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", binary(), "--check-config", "--config", str(path)],
                       capture_output=True, text=True)
    tmp_path.chmod(0o755)
    assert r.returncode == 78, r.stderr
    assert str(path) in r.stderr and "cannot be read" in r.stderr


def test_daemon_refuses_bad_config_before_touching_anything(tmp_path):
    state = tmp_path / "state"
    path = tmp_path / "c.toml"
    path.write_text(f'[watch]\nfolders = ["/a"]\n[daemon]\nstate_dir = "{state}"\nsocket = "{tmp_path}/s"\n[upload]\nconcurrency = 99\n')
    r = subprocess.run([binary(), "--config", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 78
    assert "upload.concurrency" in r.stderr
    assert not state.exists()


def test_config_from_environment(tmp_path):
    path = tmp_path / "env.toml"
    path.write_text('[watch]\nfolders = ["/from-env"]\n')
    import os
    env = dict(os.environ, PHOTOLALA_CONFIG=str(path))
    r = subprocess.run([binary(), "--check-config"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "/from-env" in r.stdout


def test_shipped_default_config_passes_once_a_folder_is_set(tmp_path):
    shipped = (REPO / "etc" / "photolala" / "photolalad.toml").read_text()
    r = check(tmp_path, shipped)
    assert r.returncode == 78 and "watch.folders" in r.stderr
    r = check(tmp_path, shipped.replace("folders = []", 'folders = ["/srv/photos"]'))
    assert r.returncode == 0, r.stderr
