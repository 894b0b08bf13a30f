"""Reliability, secrets (issue 7, suite 6): a whole account lifecycle at log level debug,
with every path that handles a secret driven at least once (pairing, sign-in by identity
token, STS refreshes, an expired access token, a backend that echoes tokens back in its
error messages, S3 errors, a revocation, logout), and every byte the daemon wrote — log,
every `photolalactl` output, every file under the state directory — scanned for every
token, secret key, session token and Apple subject the backend handed out or received.
Files under the state directory are 0600 and directories 0700 at every step; and a
daemon that crashes while holding credentials leaves no core dump."""
from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from support.fake_backend import user_id_for
from support.world import PairingLogin, apple_subject, write_photo


def modes_ok(root: Path) -> list[str]:
    """Everything under `root` that is not 0600 (files) / 0700 (directories)."""
    bad = []
    for p in [root, *root.rglob("*")]:
        m = stat.S_IMODE(os.lstat(p).st_mode)
        if p.is_socket():
            continue
        want = 0o700 if p.is_dir() else 0o600
        if m != want:
            bad.append(f"{p.relative_to(root.parent)} {oct(m)}")
    return bad


def scan(texts: dict[str, bytes], secrets: list[str]) -> list[str]:
    found = []
    for where, data in texts.items():
        for s in secrets:
            if s.encode() in data:
                found.append(f"{where}: {s[:6]}…")
    return found


@pytest.mark.reliability("secrets")
def test_no_secret_leaves_the_daemon_across_a_whole_account_lifecycle(world, reliability):
    world.backend.configure(sts_expires_in=14, access_token_ttl=3600)
    world.proxy.expiry_lookup = world.backend.credential_expiry
    d = world.daemon(config={"credentials": {"refresh_before_expiry": "5s"}, "daemon": {"log_level": "debug"}})
    outputs: dict[str, bytes] = {}
    mode_problems: list[str] = []
    step = 0

    def snapshot(label: str):
        nonlocal step
        step += 1
        for args in (("status",), ("status", "--json")):
            r = d.ctl(*args)
            outputs[f"{step}:{label}:ctl {' '.join(args)}"] = (r.stdout + r.stderr).encode()
        mode_problems.extend(f"{label}: {m}" for m in modes_ok(d.state_dir))

    # 1. Pairing, as a person does it.
    sub = apple_subject("secrets")
    login = PairingLogin(d)
    code = login.code()
    world.backend.approve_pairing(code, sub=sub)
    rc, out, err = login.wait()
    assert rc == 0, out + err
    outputs["login (pairing)"] = (out + err).encode()
    uid = user_id_for(sub)
    snapshot("signed in")
    bodies = [write_photo(d.photos / f"a{i}.jpg", 20_000 + i) for i in range(10)]
    d.wait_for(lambda s: s["queue"]["uploaded"] == 10, timeout=60, what="uploads")

    # 2. An STS refresh or two, then an expired access token (the refresh-token path).
    time.sleep(10)
    assert world.backend.expire_access_tokens() >= 1
    deadline = time.monotonic() + 30
    while world.backend.stats()["calls"]["refresh"]["count"] == 0:
        assert time.monotonic() < deadline, "the refresh-token path was never taken"
        time.sleep(0.2)
    bodies += [write_photo(d.photos / f"b{i}.jpg", 30_000 + i) for i in range(5)]
    d.wait_for(lambda s: s["queue"]["uploaded"] == 15, timeout=60, what="uploads after the access token died")
    snapshot("after refreshes")

    # 3. A backend that echoes secrets back in its error messages, and S3 errors.
    secrets_now = world.backend.secrets()
    echoed = " ".join(v[-1] for k, v in secrets_now.items() if v)
    world.backend.fail("sts-token", status=500, error="internal_error", message=f"upstream said: {echoed}", count=3)
    world.backend.fail("credential-state", status=500, error="internal_error", message=f"boom {echoed}", count=2)
    world.proxy.set_faults(expired_token_count=2)
    d.ctl("pause", check=True)
    d.ctl("resume", check=True)
    bodies += [write_photo(d.photos / f"c{i}.jpg", 40_000 + i) for i in range(5)]
    d.wait_for(lambda s: s["queue"]["uploaded"] == 20, timeout=90, what="uploads through the errors")
    snapshot("after errors")

    # 4. The user revokes the app; then signs in again by identity token.
    world.backend.set_apple_state("revoked")
    d.signal(signal.SIGHUP)
    d.ctl("resume")
    time.sleep(1)
    snapshot("revoked")
    world.backend.set_apple_state("authorized")
    token = world.backend.mint_identity_token(sub)
    r = d.ctl("login", "--identity-token", token, "--authorization-code", "ac_" + os.urandom(12).hex())
    outputs["login (identity token)"] = (r.stdout + r.stderr).encode()
    assert r.returncode == 0, r.stdout + r.stderr
    snapshot("signed in again")

    # While signed in, only account.json may hold the sign-in (the database never does).
    secrets = [s for s in world.backend.all_secrets() if s]
    state_files = {str(p): p.read_bytes() for p in d.state_dir.rglob("*") if p.is_file()}
    in_files = scan({k: v for k, v in state_files.items() if not k.endswith("account.json")}, secrets)
    assert in_files == [], in_files

    # 5. Logout erases every secret from disk.
    # (--forget-key: the recovery key was never shown, and showing it would print a secret here.)
    r = d.ctl("logout", "--forget-key")
    outputs["logout"] = (r.stdout + r.stderr).encode()
    assert r.returncode == 0
    snapshot("logged out")
    assert d.stop() == 0
    state_files = {str(p): p.read_bytes() for p in d.state_dir.rglob("*") if p.is_file()}
    secrets = [s for s in world.backend.all_secrets() if s]
    leaks = scan(state_files | outputs | {"log": d.log().encode()}, secrets)
    assert leaks == [], leaks
    assert mode_problems == [], mode_problems
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    lines = d.log().count("\n")
    reliability.describe(
        injected="pairing, identity-token sign-in, STS expiry every 14 s, an expired access token, backend 500s whose "
                 "messages echo every current token, S3 ExpiredToken ×2, pause/resume, revocation, logout; log level debug",
        times=f"{len(secrets)} distinct secrets searched for in {lines} log lines, {len(outputs)} CLI outputs and "
              f"{len(state_files)} state files, modes checked at {step} moments",
        checked="no secret (access/refresh/identity tokens, authorization codes, STS secret keys and session tokens, "
                "Apple subjects) in any log line, CLI output or state file (the database included); only account.json "
                "holds the sign-in and logout erases it; files 0600, directories 0700")
    reliability.figure("secrets searched", len(secrets))
    reliability.figure("log lines", lines)


def run_and_crash(cmd: list[str], cwd: Path, env=None, wait_for=None) -> int:
    def unlimited_core():
        # A shell without job control starts background jobs with SIGQUIT ignored.
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    p = subprocess.Popen(cmd, cwd=cwd, preexec_fn=unlimited_core, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    if wait_for:
        wait_for()
    else:
        time.sleep(0.5)
    p.send_signal(signal.SIGQUIT)
    return p.wait(15)


@pytest.mark.reliability("secrets")
def test_a_crash_while_signed_in_leaves_no_core_dump(world, reliability, tmp_path):
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    if pattern.startswith("|"):
        pytest.skip(f"core dumps are piped to {pattern}: the test needs a plain core_pattern to see the file")
    # The control: an ordinary process crashing the same way does leave a core here, so
    # the absence below means something.
    control = tmp_path / "control"
    control.mkdir()
    rc = run_and_crash(["sleep", "30"], control)
    assert rc == -signal.SIGQUIT
    assert [p for p in control.iterdir()], "this machine writes no core dumps at all: the test would prove nothing"

    d = world.daemon(start=False)
    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()

    def unlimited_core():
        # A shell without job control starts background jobs with SIGQUIT ignored.
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    d.popen_kwargs = {"cwd": crash_dir, "preexec_fn": unlimited_core}
    d.start()
    world.login(d)
    write_photo(d.photos / "x.jpg", 10_000)
    d.wait_for(lambda s: s["credentials"]["state"] == "valid", timeout=30, what="credentials in memory")
    d.signal(signal.SIGQUIT)
    assert d.proc.wait(15) == -signal.SIGQUIT
    d.kill9()
    assert list(crash_dir.iterdir()) == [], "the daemon left a core dump (with its tokens in it)"
    reliability.describe(
        injected="SIGQUIT to a signed-in daemon holding STS credentials, RLIMIT_CORE unlimited, core_pattern "
                 f"'{pattern}' (and the same to `sleep` as a control)",
        times=1,
        checked="the control leaves a core file; the daemon leaves none (PR_SET_DUMPABLE 0; the unit also sets LimitCORE=0)")
