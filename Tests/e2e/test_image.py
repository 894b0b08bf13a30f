"""The container image, built without a container runtime (scripts/build-image), checked
as Docker and Podman would see it and run as they would run it.

- The archives: `skopeo inspect` of the OCI archive and of the docker-archive: one image
  for linux/amd64, its labels (version, source, licenses), entrypoint (tini), user,
  volumes /config and /state, environment (PUID, PGID), the HEALTHCHECK on
  `photolalactl status --check`, the names `docker load` and `podman load` give it.
- Its root file system (the layers applied by umoci, as an engine does) run under
  systemd-nspawn with the image's entrypoint, command, user, working directory and
  environment, the volumes bound from folders of the host, the photos read-only, the
  host's network (moto and the fake backend on the loopback), Docker's capabilities and
  Docker's default seccomp profile (support/docker_seccomp.py): the first start writes
  the default /config/photolalad.toml watching /photos; the daemon runs as PUID:PGID,
  logs to the container's output, signs in, backs up, makes a thumbnail in its
  sandboxed preview worker, answers `status` through the socket mounted on the host,
  `status --check` inside says what a HEALTHCHECK sees, and SIGTERM to PID 1 (docker
  stop) ends it cleanly within 10 seconds.
- `docker run --user UID:GID` (setpriv in front of the entrypoint) and a bad PUID."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from support import daemon, docker_seccomp, images
from support.fake_backend import FakeBackend, user_id_for
from support.nspawn import ImageContainer, built_image, prerequisites, unpack_image

pytestmark = [pytest.mark.packaging, pytest.mark.xdist_group("image")]

VERSION = "0.1.0"


@pytest.fixture(scope="module")
def image():
    why = prerequisites()
    if why:
        pytest.skip(f"the image cannot be built or run here: {why}")
    return built_image()


@pytest.fixture(scope="module")
def unpacked(image, tmp_path_factory):
    root, config = unpack_image(image.oci, tmp_path_factory.mktemp("image"))
    return root, config


def skopeo(*args: str) -> dict:
    return json.loads(subprocess.run(["skopeo", *args], check=True, capture_output=True, text=True).stdout)


def host_ctl(socket: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    """The host's photolalactl (the checkout's build) on the socket the container made."""
    return subprocess.run([daemon.binary(), "ctl", "--socket", str(socket), *args], capture_output=True, text=True,
                          input=input, timeout=60)


def volumes(tmp_path: Path, owner: int | None = None) -> dict[str, Path]:
    dirs = {name: tmp_path / name for name in ("config", "state", "photos", "run")}
    for d in dirs.values():
        d.mkdir()
        if owner is not None:
            os.chown(d, owner, owner)
    return dirs


# -- the archives ----------------------------------------------------------------------


def test_the_archives_are_one_image_with_the_ecosystems_conventions(image):
    assert image.oci.name == f"photolalad_{VERSION}_amd64.oci.tar" and image.docker.is_file()
    info = skopeo("inspect", f"oci-archive:{image.oci}")
    assert info["Architecture"] == "amd64" and info["Os"] == "linux"
    labels = info["Labels"]
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.source"] and labels["org.opencontainers.image.licenses"]
    assert labels["org.opencontainers.image.title"] == "photolalad"
    assert len(info["Layers"]) == 2, info["Layers"]
    # --raw: the configuration as stored, which is what Docker reads. Without it skopeo
    # prints it parsed into OCI's schema, which has no Healthcheck and so drops it.
    config = skopeo("inspect", "--config", "--raw", f"oci-archive:{image.oci}")["config"]
    assert config["Entrypoint"] == ["/usr/bin/tini", "--", "/usr/lib/photolalad/container-start"]
    assert config["Cmd"] == ["photolalad"]
    assert config.get("User", "") == "", "root at first, so PUID/PGID can be honoured"
    assert set(config["Volumes"]) == {"/config", "/state"}
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["PUID"] == "1000" and env["PGID"] == "1000" and env["PHOTOLALA_CONFIG"] == "/config/photolalad.toml"
    assert config["StopSignal"] == "SIGTERM"
    health = config["Healthcheck"]
    assert health["Test"] == ["CMD", "photolalactl", "status", "--check"]
    assert health["Interval"] == 60 * 10**9 and health["Retries"] == 3
    # The name `docker load` (containerd's annotation) and `podman load` give it: one
    # entry, as podman load and skopeo take only an index of one image (the inspects
    # above, named nothing, are what podman load does).
    index = json.loads(subprocess.run(["tar", "-xOf", str(image.oci), "index.json"], check=True,
                                      capture_output=True, text=True).stdout)
    assert len(index["manifests"]) == 1, index
    names = index["manifests"][0]["annotations"]
    assert names["io.containerd.image.name"] == "docker.io/library/photolalad:latest"
    assert names["org.opencontainers.image.ref.name"] == "photolalad:latest"
    # Docker before 25 loads the docker-archive: the same configuration, tagged.
    legacy = skopeo("inspect", "--config", "--raw", f"docker-archive:{image.docker}")["config"]
    assert legacy["Healthcheck"] == health and legacy["Entrypoint"] == config["Entrypoint"]
    tags = json.loads(subprocess.run(["tar", "-xOf", str(image.docker), "manifest.json"], check=True,
                                     capture_output=True, text=True).stdout)[0]["RepoTags"]
    # skopeo writes the names in full; docker load shows docker.io/library/X as X.
    tags = [t.removeprefix("docker.io/library/") for t in tags]
    assert sorted(tags) == sorted([f"photolalad:{VERSION}", "photolalad:latest"]), tags
    sizes = sum(layer["Size"] for layer in info["LayersData"]) if info.get("LayersData") else 0
    print(f"\nimage: {image.oci.stat().st_size / 2**20:.1f} MiB archive, layers {sizes / 2**20:.1f} MiB, built in {image.seconds:.0f}s")


def test_the_root_file_system_holds_the_debs_binary_and_nothing_of_systemd(unpacked, image):
    root, _ = unpacked
    for path in ("usr/bin/photolalad", "usr/bin/tini", "usr/bin/setpriv", "usr/lib/photolalad/container-start",
                 "usr/share/photolalad/container.toml", "etc/ssl/certs/ca-certificates.crt", "usr/share/zoneinfo/Europe/Berlin",
                 "usr/share/doc/photolalad/copyright"):
        assert (root / path).exists(), path
    assert os.readlink(root / "usr/bin/photolalactl") == "photolalad"
    assert not (root / "usr/lib/systemd/systemd").exists() and not (root / "lib/systemd/systemd").exists()
    assert not list((root / "usr/share/man").glob("*/*")) if (root / "usr/share/man").exists() else True
    libs = {p.name for p in (root / "usr/lib/x86_64-linux-gnu").iterdir()}
    assert "libraw.so.23" in libs and "libvips.so.42" in libs, "Debian 13's decoders"
    assert "photolala:x:1000:1000:" in (root / "etc/passwd").read_text()
    assert "13" in (root / "etc/debian_version").read_text()


# -- the container ---------------------------------------------------------------------


def docker_like(tmp_path: Path) -> tuple[list[str], list[str], dict]:
    """Docker's default seccomp profile (loaded by the image's own setpriv, before tini,
    with no_new_privs as docker-compose.yml sets it) and capabilities, and the binds for
    it: (prefix, nspawn args, extra binds)."""
    seccomp = tmp_path / "seccomp"
    seccomp.mkdir()
    docker_seccomp.compile_default(seccomp / "docker.bpf")
    prefix = ["/usr/bin/setpriv", "--nnp", "--seccomp-filter", "/run/docker-seccomp/docker.bpf", "--"]
    # Docker's capabilities less those docker-compose.yml drops: fewer can only refuse more.
    dropped = docker_seccomp.NSPAWN_EXTRA_CAPS + docker_seccomp.COMPOSE_DROPPED_CAPS
    nspawn = [f"--drop-capability={','.join(dropped)}"]
    return prefix, nspawn, {"/run/docker-seccomp": (seccomp, True)}


def binds(v: dict[str, Path], extra: dict) -> dict:
    return {"/config": (v["config"], False), "/state": (v["state"], False), "/photos": (v["photos"], True),
            "/run/photolala": (v["run"], False), **extra}


def main_pid(c: ImageContainer) -> int:
    # The image has no procps (no pgrep): /proc, the lowest pid first (the daemon, not its
    # preview worker).
    out = c.sh('for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = photolalad ] && echo "${p#/proc/}"; '
               'done | sort -n')
    return int(out.split()[0])


def test_it_signs_in_backs_up_answers_through_the_mounted_socket_and_stops_on_sigterm(
        unpacked, moto_http, tmp_path):
    root, config = unpacked
    v = volumes(tmp_path)
    photo = images.encode(images.upright_pattern(800, 600), "JPEG", exif=images.exif("2021:05:06 07:08:09"))
    (v["photos"] / "2021").mkdir()
    (v["photos"] / "2021" / "first.jpg").write_bytes(photo)
    for p in [v["photos"], v["photos"] / "2021"]:
        p.chmod(0o755)
    prefix, nspawn, extra = docker_like(tmp_path)
    env = {"PUID": "1234", "PGID": "1234"}
    socket = v["run"] / "photolalad.sock"

    # First start: the default config appears, watching /photos, and the daemon runs.
    c = ImageContainer.start(tmp_path / "first", root, config, binds=binds(v, extra), env=env, prefix=prefix,
                             nspawn_args=nspawn)
    try:
        written = c.wait_for("the default config", lambda: (v["config"] / "photolalad.toml").is_file()
                             and (v["config"] / "photolalad.toml").read_text(), timeout=30)
        assert written.startswith("# /config/photolalad.toml") and 'folders = ["/photos"]' in written
        assert re.search(r'^state_dir = "/state"$', written, re.M)
        c.wait_for("the socket on the host", socket.exists, timeout=60)
        # Logs go to the container's output (what `docker logs` shows).
        c.wait_for("the start in the container's log", lambda: "photolalad 0.1.0 started" in c.output(), timeout=30)
        pid = main_pid(c)
        status = c.sh(f"cat /proc/{pid}/status")
        assert re.search(r"^Uid:\s+1234\s+1234\s+1234\s+1234$", status, re.M), status
        assert re.search(r"^Gid:\s+1234\s", status, re.M) and re.search(r"^CapEff:\s+0+$", status, re.M)
        assert re.search(r"^Seccomp:\s+2$", status, re.M)
        assert (v["state"].stat().st_uid, v["state"].stat().st_mode & 0o777) == (1234, 0o700)
        # Not signed in yet: a HEALTHCHECK sees "something needs you".
        assert c.run(["photolalactl", "status", "--check"]).returncode == 1
        took = c.terminate()
        assert c.exit_code == 0, c.output()[-3000:]
        assert took < 10, f"SIGTERM took {took:.1f}s"
        assert "photolalad stopped" in c.output()
    finally:
        c.cleanup()
    assert host_ctl(socket, "status", "--check").returncode == 3

    # Pointed at the fake backend, started again on the same volumes: it signs in and backs up.
    backend = FakeBackend(moto_http).start()
    moto_http.empty_bucket()
    text = (v["config"] / "photolalad.toml").read_text()
    text = re.sub(r"^#api_url = .*$", f'api_url = "{backend.url}"', text, count=1, flags=re.M)
    (v["config"] / "photolalad.toml").write_text(re.sub(r"^#settle = .*$", 'settle = "1s"', text, count=1, flags=re.M))
    c = ImageContainer.start(tmp_path / "second", root, config, binds=binds(v, extra), env=env, prefix=prefix,
                             nspawn_args=nspawn)
    try:
        c.wait_for("the socket on the host", lambda: host_ctl(socket, "status").returncode == 0, timeout=60)
        token = backend.mint_identity_token("container-owner")
        login = host_ctl(socket, "login", "--identity-token", "-", input=token + "\n")
        assert login.returncode == 0 and "Signed in" in login.stdout, login
        uid = user_id_for("container-owner")
        md5 = hashlib.md5(photo).hexdigest()
        s3 = moto_http.s3_admin()

        def keys():
            return {o["Key"] for o in s3.list_objects_v2(Bucket=moto_http.bucket).get("Contents", [])}
        c.wait_for("the photo and its thumbnail (the preview worker under Docker's profile)",
                   lambda: {f"photos/{uid}/{md5}.dat", f"thumbnails/{uid}/{md5}.jpg"} <= keys(), timeout=120)
        assert s3.get_object(Bucket=moto_http.bucket, Key=f"photos/{uid}/{md5}.dat")["Body"].read() == photo
        status = json.loads(host_ctl(socket, "status", "--json").stdout)
        assert status["account"]["userId"] == uid and status["queue"]["uploaded"] == 1 and status["instance"] is None
        c.wait_for("healthy", lambda: c.run(["photolalactl", "status", "--check"]).returncode == 0, timeout=60)
        for secret in backend.all_secrets():
            assert secret not in c.output()
        worker_log = c.output()
        for failure in ("no preview", "thumbnails are off", "Bad system call", "sandbox could not"):
            assert failure not in worker_log, worker_log[-3000:]
        took = c.terminate()
        assert c.exit_code == 0 and took < 10, (c.exit_code, took, c.output()[-2000:])
    finally:
        c.cleanup()
        backend.stop()
    print(f"\ncontainer stop on SIGTERM: {took:.2f}s")


def test_docker_run_user_runs_it_as_that_user_from_the_start(unpacked, tmp_path):
    root, config = unpacked
    v = volumes(tmp_path, owner=4321)
    prefix = ["/usr/bin/setpriv", "--reuid=4321", "--regid=4321", "--clear-groups", "--"]
    c = ImageContainer.start(tmp_path / "user", root, config, binds=binds(v, {}), prefix=prefix)
    try:
        c.wait_for("the socket", (v["run"] / "photolalad.sock").exists, timeout=60)
        assert (v["config"] / "photolalad.toml").stat().st_uid == 4321
        status = c.sh(f"cat /proc/{main_pid(c)}/status")
        assert re.search(r"^Uid:\s+4321\s", status, re.M), status
        assert c.terminate() < 10 and c.exit_code == 0
    finally:
        c.cleanup()


def test_a_puid_of_root_is_refused_with_what_to_choose(unpacked, tmp_path):
    root, config = unpacked
    v = volumes(tmp_path)
    c = ImageContainer.start(tmp_path / "root", root, config, binds=binds(v, {}), env={"PUID": "0"}, wait=False)
    try:
        assert c.wait_exit(30) == 78
        assert "PUID=0 would run the daemon as root" in c.output(), c.output()
        assert not list(v["state"].iterdir())
    finally:
        c.cleanup()
