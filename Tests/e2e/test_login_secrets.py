"""No secret on a command line (issue 24, cli.md `login --identity-token -`): the token
and the authorization code travel on photolalactl's standard input, never in its
/proc/PID/cmdline, and the daemon logs neither, not even when the backend's refusal
quotes them. The old form still works and says why it should not be used."""
from __future__ import annotations

import os
import subprocess
import time

from support.daemon import binary
from support.fake_backend import user_id_for
from support.world import apple_subject


def command_lines() -> dict[int, bytes]:
    """Every process's command line right now (the ones that end meanwhile left out)."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    out[int(name)] = f.read()
            except OSError:
                pass
    return out


def test_login_reads_the_token_and_code_from_standard_input_and_no_command_line_shows_them(world):
    d = world.daemon(config={"daemon": {"log_level": "debug"}})
    sub = apple_subject("stdin")
    token = world.backend.mint_identity_token(sub)
    code = "ac_" + os.urandom(12).hex()
    # A slow backend: the command is still running while /proc is read.
    world.backend.fail("apple", status=None, hang=2.5, count=1)
    ctl = subprocess.Popen([binary(), "ctl", "login", "--identity-token", "-", "--authorization-code", "-",
                            "--socket", d.socket], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    ctl.stdin.write(f"{token}\n{code}\n")
    ctl.stdin.close()
    samples, seen_running = 0, 0
    while ctl.poll() is None:
        for pid, line in command_lines().items():
            assert token.encode() not in line and code.encode() not in line, f"process {pid} shows a secret: {line[:80]!r}"
            if pid == ctl.pid and b"login" in line:
                seen_running += 1
        samples += 1
        time.sleep(0.05)
    out, err = ctl.stdout.read(), ctl.stderr.read()
    assert ctl.returncode == 0, out + err
    assert seen_running >= 5, f"photolalactl seen running in {seen_running} of {samples} samples"
    assert f"Signed in. Photolala user id: {user_id_for(sub)}" in out and err == "", (out, err)
    # What the backend got is what came on standard input.
    received = world.backend.secrets()
    assert token in received["identityTokens"] and code in received["authorizationCodes"]
    assert d.status()["account"] == {"signedIn": True, "userId": user_id_for(sub)}
    log = d.log()
    assert "signed in with an identity token" in log
    assert token not in log and code not in log
    print(f"/proc sampled {samples} times, photolalactl running in {seen_running}; {len(log.splitlines())} log lines")


def test_the_old_form_still_signs_in_and_warns_that_others_can_see_the_token(world):
    d = world.daemon()
    sub = apple_subject("argv")
    token = world.backend.mint_identity_token(sub)
    r = d.ctl("login", "--identity-token", token)
    assert r.returncode == 0, r.stdout + r.stderr
    assert user_id_for(sub) in r.stdout
    warning = r.stderr.strip()
    assert len(warning.splitlines()) == 1, warning
    assert warning.startswith("photolalactl: warning: the identity token is visible to other users"), warning
    assert "(ps, /proc)" in warning and "shell's history" in warning and warning.endswith("--identity-token -"), warning
    assert token not in warning


def test_a_refusal_quoting_the_token_reaches_neither_the_log_nor_the_output(world):
    """The backend's message is its own text: one that quotes the (long) token it refused
    is redacted before it is shortened, so not even the token's head is logged or shown."""
    d = world.daemon(config={"daemon": {"log_level": "debug"}})
    token = world.backend.mint_identity_token(apple_subject("quoted"))
    code = "ac_" + os.urandom(12).hex()
    assert len(token) > 300
    world.backend.fail("apple", status=401, error="invalid_token",
                       message=f"identity token refused: {token} (code {code}) is not ours", count=1)
    r = d.ctl("login", "--identity-token", "-", "--authorization-code", "-", input=f"{token}\n{code}\n")
    assert r.returncode == 1, r
    msg = r.stderr.strip()
    assert msg.startswith("photolalactl: sign-in failed:") and "[redacted]" in msg, msg
    log = d.log()
    assert "sign-in with an identity token failed" in log and "[redacted]" in log, log[-2000:]
    for text in (r.stdout, r.stderr, log):
        assert token[:24] not in text and code not in text
    assert d.status()["account"]["signedIn"] is False


def test_nothing_on_standard_input_is_refused_before_the_daemon_is_asked(world):
    d = world.daemon()
    r = d.ctl("login", "--identity-token", "-", input="")
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr.strip() == ("photolalactl: standard input held no identity token "
                                "(--identity-token - reads it from there, one line)"), r.stderr
    r = d.ctl("login", "--identity-token", "-", "--authorization-code", "-", input="eyJ.only.a.token\n")
    assert r.returncode == 1 and "no authorization code" in r.stderr, r
    assert world.backend.stats()["calls"].get("apple", {}).get("count", 0) == 0
