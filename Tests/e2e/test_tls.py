"""HTTPS, end to end: the daemon verifies every certificate (backend and S3) against the
system's store plus `tls.ca_file`, refuses a bad one with a sentence in `status` and the
log that says what to do, retries it like any network failure, and keeps its connections
alive. The stack is the HTTPS one of conftest.py: moto, the fake backend and the fault
proxy with a certificate from a test CA made for the session; the bad certificates
(another host, expired, another CA) are presented by the proxy, swapped while the daemon
runs. Every object is read back with its MD5 checked against its key."""
from __future__ import annotations

import signal
import time

import pytest

from support.fake_backend import user_id_for
from support.fault_proxy import FaultProxy
from support.tls import TestCA
from support.world import apple_subject, settled, write_photo

HTTPS = pytest.mark.parametrize("scheme", ["https"])
BOTH = pytest.mark.parametrize("scheme", ["http", "https"])
REFUSED = "certificate for 127.0.0.1 is not trusted: "


def wait_quiet(proxy, quiet: float = 3.0, timeout: float = 60.0) -> None:
    """Until the proxy has seen no new request for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    last, since = proxy.stats()["total"], time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, "S3 requests never stopped"
        time.sleep(0.2)
        total = proxy.stats()["total"]
        if total != last:
            last, since = total, time.monotonic()


def bad_certificate(kind: str, test_ca: TestCA, tmp_path):
    """The certificate the proxy switches to, and what the daemon must say about it."""
    if kind == "wrong-host":
        return test_ca.issue("wrong-host", ["photolala.invalid"]), "it is for photolala.invalid, not 127.0.0.1"
    if kind == "expired":
        return test_ca.expired(), "it expired on "
    other = TestCA(tmp_path / "other-ca", "Someone Else's CA")
    return other.issue("other"), "it was issued by CN=Someone Else's CA, and neither the system's CA store nor tls.ca_file ("


@HTTPS
def test_a_daemon_without_the_ca_refuses_the_servers_and_uploads_nothing(world, scheme):
    d = world.daemon(config={"tls": {"ca_file": ""}})
    token = world.backend.mint_identity_token(apple_subject("noca"))
    r = d.ctl("login", "--identity-token", token)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert REFUSED + "it was issued by CN=Photolala Test CA" in out, out
    assert "tls.ca_file (not set)" in out and "set tls.ca_file to its CA certificate" in out, out
    # Not one request reached the backend or S3.
    assert world.backend.stats()["calls"]["apple"]["count"] == 0
    assert world.proxy.stats()["total"] == 0
    assert world.moto.s3_admin().list_objects_v2(Bucket=world.moto.bucket).get("KeyCount", 0) == 0

    # The fix the sentence names: tls.ca_file, then a reload (no restart).
    d.sections["tls"] = {"ca_file": world.ca_file}
    d.write_config()
    d.signal(signal.SIGHUP)
    sub = apple_subject("ca")
    deadline = time.monotonic() + 15
    while True:   # the reload is asynchronous: log in once it has taken effect
        r = d.ctl("login", "--identity-token", world.backend.mint_identity_token(sub))
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert r.returncode == 0, r.stdout + r.stderr
    uid = user_id_for(sub)
    body = write_photo(d.photos / "after-reload.jpg", 40_000)
    d.wait_for(settled(1), timeout=30, what="the photo uploaded once the CA is trusted")
    assert set(world.objects(uid)) == {world.key(uid, body)}
    (put,) = [r for r in world.proxy.stats()["requests"]
              if r["method"] == "PUT" and r["path"].endswith(world.key(uid, body))]
    assert put["payload"] == "UNSIGNED-PAYLOAD"   # over HTTPS the photo's bytes are not hashed for the signature


@HTTPS
def test_a_daemon_without_the_ca_refuses_s3_too(world, scheme):
    # Signed in through a plain-HTTP door to the backend (loopback may be plain HTTP),
    # the daemon meets S3's certificate without the CA: refused, nothing sent.
    door = FaultProxy(world.backend.url, upstream_ca=world.ca_file).start()
    try:
        d = world.daemon(config={"tls": {"ca_file": ""}, "account": {"api_url": door.url}})
        uid = world.login(d)
        write_photo(d.photos / "never.jpg", 30_000)
        s = d.wait_for(lambda s: s["s3"]["state"] == "backoff" and s["s3"]["lastError"], timeout=30,
                       what="S3 refused for its certificate")
        assert REFUSED + "it was issued by CN=Photolala Test CA" in s["s3"]["lastError"], s["s3"]
        assert "tls.ca_file (not set)" in s["s3"]["lastError"]
        time.sleep(2)
        stats = world.proxy.stats()
        assert stats["total"] == 0 and stats["tls_refused"] >= 1, stats
        assert world.objects(uid) == {}
        assert d.status()["queue"]["failed"] == 0
    finally:
        door.stop()


@HTTPS
@pytest.mark.parametrize("kind", ["wrong-host", "expired", "unknown-ca"])
def test_a_bad_s3_certificate_is_refused_with_a_clear_status_and_retried(world, scheme, kind, test_ca,
                                                                       loopback_cert, tmp_path):
    d = world.daemon()
    uid = world.login(d)
    first = write_photo(d.photos / "first.jpg", 30_000)
    d.wait_for(settled(1), timeout=30, what="the first photo")
    # The other stages' requests after the first upload (manifest, catalog) must be over
    # before the count is taken: on a loaded machine they come seconds later.
    wait_quiet(world.proxy)

    cert, want = bad_certificate(kind, test_ca, tmp_path)
    world.proxy.set_certificate(cert)
    before = world.proxy.stats()["total"]
    second = write_photo(d.photos / "second.jpg", 30_000)
    s = d.wait_for(lambda s: s["s3"]["state"] == "backoff" and s["s3"]["lastError"], timeout=30,
                   what="S3 in backoff with the certificate's problem")
    print(f"\n{kind}: s3.lastError = {s['s3']['lastError']}")
    assert REFUSED + want in s["s3"]["lastError"], s["s3"]
    assert s["queue"]["failed"] == 0
    human = d.ctl("status", check=True).stdout
    assert REFUSED + want in human, human
    assert REFUSED + want in d.log()
    stats = world.proxy.stats()
    assert stats["tls_refused"] >= 1 and stats["total"] == before, stats   # nothing got through

    # The server gets a good certificate again: the retries find it, nothing failed.
    world.proxy.set_certificate(loopback_cert)
    d.wait_for(settled(2), timeout=60, what="the second photo once the certificate is good")
    assert d.status()["s3"]["state"] == "ok"
    assert set(world.objects(uid)) == {world.key(uid, first), world.key(uid, second)}


@HTTPS
def test_a_bad_backend_certificate_shows_in_the_credentials_status(world, scheme, test_ca, loopback_cert, tmp_path):
    # The backend behind a TLS proxy of its own, so its certificate can change under the daemon.
    front = FaultProxy(world.backend.url, tls=loopback_cert, upstream_ca=world.ca_file).start()
    try:
        world.backend.configure(sts_expires_in=12)
        d = world.daemon(config={"account": {"api_url": front.url}, "credentials": {"refresh_before_expiry": "5s"}})
        uid = world.login(d)
        first = write_photo(d.photos / "a.jpg", 20_000)
        d.wait_for(settled(1), timeout=30, what="the first photo")

        front.set_certificate(test_ca.expired("backend-expired"))
        s = d.wait_for(lambda s: s["credentials"]["lastError"], timeout=30, what="the refresh refused")
        print(f"\ncredentials.lastError = {s['credentials']['lastError']}")
        assert REFUSED + "it expired on " in s["credentials"]["lastError"], s["credentials"]
        assert "fix the clock (timedatectl)" in s["credentials"]["lastError"]
        assert s["state"] != "needsLogin" and s["queue"]["failed"] == 0
        assert front.stats()["tls_refused"] >= 1

        front.set_certificate(loopback_cert)
        d.wait_for(lambda s: s["credentials"]["state"] == "valid" and not s["credentials"]["lastError"],
                   timeout=60, what="credentials again once the certificate is good")
        second = write_photo(d.photos / "b.jpg", 20_000)
        d.wait_for(settled(2), timeout=30, what="the second photo")
        assert set(world.objects(uid)) == {world.key(uid, first), world.key(uid, second)}
    finally:
        front.stop()


@BOTH
def test_connections_are_kept_alive(world, scheme):
    """Connections opened per photo: a pooled keep-alive client opens a few per worker,
    not one per request (each photo is a PUT; the bucket's listing comes before them)."""
    photos = 60
    d = world.daemon(config={"upload": {"concurrency": 4}})
    uid = world.login(d)
    bodies = [write_photo(d.photos / f"k/{i:03d}.jpg", 10_000 + 37 * i) for i in range(photos)]
    d.wait_for(settled(photos), timeout=60, what="every photo")
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    st = world.proxy.stats()
    per_photo = st["connections"] / photos
    print(f"keep-alive over {scheme}: {st['connections']} connections for {st['total']} requests, "
          f"{per_photo:.3f} per photo")
    assert st["total"] >= photos
    # At most the pool's limit (2 × concurrency) when nothing breaks.
    assert st["connections"] <= 8, st["connections"]
