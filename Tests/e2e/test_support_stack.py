"""Proves the test stack itself: moto enforces auth after setup, the fake backend behaves
as shared/spec/backend-api.md says (and refuses what the real one would), its STS
credentials work against moto directly and through the fault proxy, and the proxy's
faults do what they say. If these fail, the daemon's end-to-end tests mean nothing."""
import base64
import datetime as dt
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

from support.fake_backend import USER_NAMESPACE, user_id_for
from support.fault_proxy import FaultProxy
from support.stack import _SETUP_KEY, _SETUP_SECRET

SUPPORT = Path(__file__).resolve().parent / "support"


# ---- helpers ---------------------------------------------------------------------------

def post(backend, path, body=None, token=None, raw=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if raw is not None:
        return requests.post(backend.url + path, data=raw, headers=headers, timeout=10)
    return requests.post(backend.url + path, json=body if body is not None else {}, headers=headers, timeout=10)


def get(backend, path, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(backend.url + path, headers=headers, timeout=10)


def error_of(r):
    body = r.json()
    assert set(body) >= {"error", "message"} and body["message"], body
    return r.status_code, body["error"]


def parse_time(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def sts(backend, token):
    r = post(backend, "/api/v1/auth/sts-token", token=token)
    assert r.status_code == 200, r.text
    return r.json()


def md5_key(user_id, body):
    return f"photos/{user_id}/{hashlib.md5(body).hexdigest()}.dat", base64.b64encode(hashlib.md5(body).digest()).decode()


# ---- moto: auth enforced after setup ---------------------------------------------------

def test_moto_enforces_auth_after_setup(moto, backend):
    session = backend.login("apple-sub-auth")
    creds = sts(backend, session["accessToken"])["credentials"]
    key = f"photos/{session['userId']}/auth-check.dat"

    # No signature at all: moto crashes on the missing header (500), and writes nothing.
    r = requests.put(f"{moto.endpoint}/{moto.bucket}/{key}", data=b"x", timeout=5)
    assert r.status_code == 500
    # The setup keys were spent on setup and are unknown to moto.
    s3_setup = moto.s3_with({"accessKeyId": _SETUP_KEY, "secretAccessKey": _SETUP_SECRET, "sessionToken": None})
    with pytest.raises(ClientError) as e:
        s3_setup.put_object(Bucket=moto.bucket, Key=key, Body=b"x")
    assert e.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    # Assumed-role keys with a bogus session token: InvalidToken (400, as real S3 says).
    with pytest.raises(ClientError) as e:
        moto.s3_with(creds | {"sessionToken": "bogus"}).put_object(Bucket=moto.bucket, Key=key, Body=b"x")
    assert (e.value.response["ResponseMetadata"]["HTTPStatusCode"], e.value.response["Error"]["Code"]) == (400, "InvalidToken")
    # ... without the session token: 403.
    with pytest.raises(ClientError) as e:
        moto.s3_with(creds | {"sessionToken": None}).put_object(Bucket=moto.bucket, Key=key, Body=b"x")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    # ... with a wrong secret: 403 SignatureDoesNotMatch.
    with pytest.raises(ClientError) as e:
        moto.s3_with(creds | {"secretAccessKey": "x" * 40}).put_object(Bucket=moto.bucket, Key=key, Body=b"x")
    assert (e.value.response["ResponseMetadata"]["HTTPStatusCode"], e.value.response["Error"]["Code"]) == (403, "SignatureDoesNotMatch")
    assert "Contents" not in moto.s3_admin().list_objects_v2(Bucket=moto.bucket)

    # The real thing works: PutObject, HeadObject, multipart (with ListParts and abort).
    s3 = moto.s3_with(creds)
    body = os.urandom(1000)
    key, md5 = md5_key(session["userId"], body)
    s3.put_object(Bucket=moto.bucket, Key=key, Body=body, ContentMD5=md5, ContentType="image/jpeg",
                  Metadata={"original-format": "JPEG"})
    head = s3.head_object(Bucket=moto.bucket, Key=key)
    assert head["ContentLength"] == 1000 and head["Metadata"] == {"original-format": "JPEG"}

    big = os.urandom(5 * 1024 * 1024 + 10)
    mkey, _ = md5_key(session["userId"], big)
    up = s3.create_multipart_upload(Bucket=moto.bucket, Key=mkey)["UploadId"]
    parts = []
    for n, chunk in enumerate((big[:5 * 1024 * 1024], big[5 * 1024 * 1024:]), 1):
        part_md5 = base64.b64encode(hashlib.md5(chunk).digest()).decode()
        etag = s3.upload_part(Bucket=moto.bucket, Key=mkey, UploadId=up, PartNumber=n, Body=chunk, ContentMD5=part_md5)["ETag"]
        parts.append({"PartNumber": n, "ETag": etag})
    assert [p["PartNumber"] for p in s3.list_parts(Bucket=moto.bucket, Key=mkey, UploadId=up)["Parts"]] == [1, 2]
    s3.complete_multipart_upload(Bucket=moto.bucket, Key=mkey, UploadId=up, MultipartUpload={"Parts": parts})
    doomed = s3.create_multipart_upload(Bucket=moto.bucket, Key=mkey + ".tmp")["UploadId"]
    s3.abort_multipart_upload(Bucket=moto.bucket, Key=mkey + ".tmp", UploadId=doomed)

    # Read back with the admin client: every object's body has the MD5 in its key.
    admin = moto.s3_admin()
    for obj in admin.list_objects_v2(Bucket=moto.bucket)["Contents"]:
        data = admin.get_object(Bucket=moto.bucket, Key=obj["Key"])["Body"].read()
        assert obj["Key"] == f"photos/{session['userId']}/{hashlib.md5(data).hexdigest()}.dat"


# ---- 1. identity-token sign-in ---------------------------------------------------------

def test_identity_token_login(backend):
    token = post(backend, "/_test/identity-token", {"sub": "001234.abcdef.0042"}).json()["identityToken"]
    r = post(backend, "/api/auth/apple", {"identityToken": token, "authorizationCode": "c0de", "deviceName": "nas"})
    assert r.status_code == 200, r.text
    s = r.json()
    # Spelt as the apps spell it (uppercase), so a key lowercased anywhere shows.
    assert s["userId"] == str(uuid.uuid5(USER_NAMESPACE, "001234.abcdef.0042")).upper() == user_id_for("001234.abcdef.0042")
    assert s["accessToken"].startswith("plt_") and s["refreshToken"].startswith("plr_")
    ttl = (parse_time(s["accessTokenExpiresAt"]) - dt.datetime.now(dt.timezone.utc)).total_seconds()
    assert 3590 < ttl <= 3600
    # Same Apple subject, same Photolala user; the token works on a Bearer endpoint.
    assert backend.login("001234.abcdef.0042")["userId"] == s["userId"]
    assert get(backend, "/api/v1/auth/apple/credential-state", s["accessToken"]).status_code == 200


@pytest.mark.parametrize("mint,why", [
    ({"aud": "com.example.other"}, "audience"),
    ({"badSignature": True}, "signature"),
    ({"expiresIn": -5}, "expired"),
    ({"iss": "https://evil.example"}, "issuer"),
])
def test_identity_token_refused(backend, mint, why):
    token = post(backend, "/_test/identity-token", {"sub": "s"} | mint).json()["identityToken"]
    r = post(backend, "/api/auth/apple", {"identityToken": token})
    assert error_of(r) == (401, "invalid_token")
    assert why in r.json()["message"]


def test_identity_token_malformed(backend):
    assert error_of(post(backend, "/api/auth/apple", {"identityToken": "not.a.jwt"})) == (401, "invalid_token")
    assert error_of(post(backend, "/api/auth/apple", {})) == (400, "invalid_request")
    assert error_of(post(backend, "/api/auth/apple", {"identityToken": 42})) == (400, "invalid_request")
    assert error_of(post(backend, "/api/auth/apple", raw=b"{nope")) == (400, "invalid_request")
    # Signed by a key Apple does not publish (unknown kid), or with HS256 (alg confusion).
    claims = {"iss": "https://appleid.apple.com", "aud": backend.client_id, "sub": "s",
              "iat": int(time.time()), "exp": int(time.time()) + 600}
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for token, why in ((jwt.encode(claims, stranger, algorithm="RS256", headers={"kid": "other"}), "unknown kid"),
                       (jwt.encode(claims, "k" * 32, algorithm="HS256", headers={"kid": backend.apple_kid}), "RS256")):
        r = post(backend, "/api/auth/apple", {"identityToken": token})
        assert error_of(r) == (401, "invalid_token") and why in r.json()["message"]


# ---- 2. pairing ------------------------------------------------------------------------

def start_pairing(backend):
    r = post(backend, "/api/v1/auth/device", {"deviceName": "nas-livingroom"})
    assert r.status_code == 200, r.text
    return r.json()


def poll(backend, device_code):
    return post(backend, "/api/v1/auth/device/token", {"deviceCode": device_code})


def test_pairing_approve(backend):
    backend.configure(pairing_interval=0)  # no waiting in this test; slow_down has its own
    p = start_pairing(backend)
    assert p["verificationUri"] == f"{backend.url}/pair"
    assert p["verificationUriComplete"] == f"{backend.url}/pair?code={p['userCode']}"
    assert len(p["userCode"]) == 9 and p["userCode"][4] == "-" and p["interval"] == 0 and p["expiresIn"] == 600
    assert requests.get(p["verificationUriComplete"], timeout=5).status_code == 200
    assert error_of(poll(backend, p["deviceCode"])) == (400, "authorization_pending")

    r = post(backend, "/_test/pairing/approve", {"userCode": p["userCode"].lower(), "sub": "apple-pair"})
    assert r.json()["userId"] == user_id_for("apple-pair")
    r = poll(backend, p["deviceCode"])
    assert r.status_code == 200, r.text
    assert r.json()["userId"] == user_id_for("apple-pair") and r.json()["accessToken"].startswith("plt_")
    # The device code is single-use.
    assert error_of(poll(backend, p["deviceCode"])) == (400, "expired_token")
    assert [x["status"] for x in backend.pairings()] == ["paired"]


def test_pairing_deny_and_expire(backend):
    backend.configure(pairing_interval=0)
    denied, expired = start_pairing(backend), start_pairing(backend)
    assert denied["userCode"] != expired["userCode"]
    post(backend, "/_test/pairing/deny", {"userCode": denied["userCode"]})
    assert error_of(poll(backend, denied["deviceCode"])) == (400, "access_denied")
    assert post(backend, "/_test/pairing/expire", {"userCode": expired["userCode"]}).json() == {"expired": 1}
    assert error_of(poll(backend, expired["deviceCode"])) == (400, "expired_token")
    # Natural expiry: expiresIn 0 means expired at once.
    post(backend, "/_test/config", {"pairingExpiresIn": 0})
    assert error_of(poll(backend, start_pairing(backend)["deviceCode"])) == (400, "expired_token")
    assert error_of(poll(backend, "no-such-code")) == (400, "expired_token")
    assert post(backend, "/_test/pairing/approve", {"userCode": "ZZZZ-ZZZZ"}).status_code == 404


def test_pairing_slow_down(backend):
    post(backend, "/_test/config", {"pairingInterval": 1})
    p = start_pairing(backend)
    assert p["interval"] == 1
    assert error_of(poll(backend, p["deviceCode"])) == (400, "authorization_pending")
    assert error_of(poll(backend, p["deviceCode"])) == (400, "slow_down")  # at once: too fast
    # RFC 8628: the interval is now 6 s for every later poll, so 1.1 s is still too fast.
    time.sleep(1.1)
    assert error_of(poll(backend, p["deviceCode"])) == (400, "slow_down")
    (rec,) = get(backend, "/_test/pairing").json()["pairings"]
    assert rec["interval"] == 11 and rec["answers"] == ["authorization_pending", "slow_down", "slow_down"]
    polls = backend.stats()["pairings"][0]["polls"]
    assert len(polls) == 3 and polls[2] - polls[1] >= 1.1
    assert "deviceCode" not in rec


# ---- 3. refresh ------------------------------------------------------------------------

def test_refresh_rotation_and_invalid_grant(backend):
    s = backend.login("apple-refresh")
    r = post(backend, "/api/auth/refresh", {"refreshToken": s["refreshToken"]})
    assert r.status_code == 200, r.text
    new = r.json()
    assert set(new) == {"accessToken", "accessTokenExpiresAt", "refreshToken"}
    assert new["refreshToken"] != s["refreshToken"] and new["accessToken"] != s["accessToken"]
    # The old refresh token died with the rotation; the new one and the new access token work.
    assert error_of(post(backend, "/api/auth/refresh", {"refreshToken": s["refreshToken"]})) == (401, "invalid_grant")
    assert get(backend, "/api/v1/auth/apple/credential-state", new["accessToken"]).status_code == 200
    assert error_of(post(backend, "/api/auth/refresh", {})) == (400, "invalid_request")
    # Revoked by the backend: invalid_grant.
    assert post(backend, "/_test/revoke-refresh-tokens", {}).json() == {"revoked": 1}
    assert error_of(post(backend, "/api/auth/refresh", {"refreshToken": new["refreshToken"]})) == (401, "invalid_grant")
    # Rotation off: the same refresh token comes back and stays good.
    backend.configure(rotate_refresh_tokens=False)
    s = backend.login("apple-refresh")
    for _ in range(2):
        assert post(backend, "/api/auth/refresh", {"refreshToken": s["refreshToken"]}).json()["refreshToken"] == s["refreshToken"]


def test_access_token_expiry_and_bearer_checks(backend):
    post(backend, "/_test/config", {"accessTokenTtl": 0.3, "fractionalSeconds": True})
    s = backend.login("apple-ttl")
    assert "." in s["accessTokenExpiresAt"]  # fractional seconds on request
    assert sts(backend, s["accessToken"])["credentials"]["accessKeyId"].startswith("ASIA")
    time.sleep(0.35)
    for call in (lambda t: post(backend, "/api/v1/auth/sts-token", token=t),
                 lambda t: get(backend, "/api/v1/auth/apple/credential-state", t)):
        assert error_of(call(s["accessToken"])) == (401, "invalid_token")
        assert error_of(call("plt_unknown")) == (401, "invalid_token")
        assert error_of(call(None)) == (401, "invalid_token")
    # Refresh once, retry: works (what the daemon does on 401).
    backend.configure(access_token_ttl=3600)
    fresh = post(backend, "/api/auth/refresh", {"refreshToken": s["refreshToken"]}).json()
    assert sts(backend, fresh["accessToken"])
    assert post(backend, "/_test/expire-access-tokens", {}).json()["expired"] >= 1
    assert error_of(post(backend, "/api/v1/auth/sts-token", token=fresh["accessToken"])) == (401, "invalid_token")


# ---- 4. STS ----------------------------------------------------------------------------

def test_sts_credentials_put_under_user_prefix(moto, backend, proxy):
    s = backend.login("apple-sts")
    uid = s["userId"]
    answer = sts(backend, s["accessToken"])
    assert answer["region"] == "us-east-1" and answer["bucket"] == "photolala" and answer["endpoint"] == moto.endpoint
    c = answer["credentials"]
    assert c["accessKeyId"].startswith("ASIA") and c["secretAccessKey"] and c["sessionToken"]
    assert 3500 < (parse_time(c["expiration"]) - dt.datetime.now(dt.timezone.utc)).total_seconds() <= 3600

    # The session policy covers exactly the user's four prefixes, and listing only inside
    # them (backend-api.md section 4; moto does not enforce it).
    (session,) = backend.sts_sessions()
    resources = json.dumps(session["policy"])
    prefixes = ("photos", "thumbnails", "catalogs", "metadata")
    for prefix in prefixes:
        assert f"arn:aws:s3:::photolala/{prefix}/{uid}/*" in resources
    assert session["policy"]["Statement"][0]["Resource"] == [f"arn:aws:s3:::photolala/{p}/{uid}/*" for p in prefixes]
    listing = session["policy"]["Statement"][1]
    assert listing["Action"] == "s3:ListBucket" and listing["Resource"] == "arn:aws:s3:::photolala"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"{p}/{uid}/*" for p in prefixes]}}

    body = os.urandom(4096)
    key, md5 = md5_key(uid, body)
    moto.s3_with(c, endpoint=answer["endpoint"]).put_object(Bucket="photolala", Key=key, Body=body, ContentMD5=md5)

    # Through the proxy: the client signs for the proxy's host:port, moto still verifies.
    backend.configure(sts_endpoint=proxy.url, sts_expires_in=15)
    answer = sts(backend, s["accessToken"])
    assert answer["endpoint"] == proxy.url
    assert 13 < (parse_time(answer["credentials"]["expiration"]) - dt.datetime.now(dt.timezone.utc)).total_seconds() <= 15
    body2 = os.urandom(70 * 1024)
    key2, md52 = md5_key(uid, body2)
    via = moto.s3_with(answer["credentials"], endpoint=answer["endpoint"])
    via.put_object(Bucket="photolala", Key=key2, Body=body2, ContentMD5=md52)
    assert via.head_object(Bucket="photolala", Key=key2)["ContentLength"] == len(body2)
    st = proxy.stats()
    assert st["writes_forwarded"] == 1 and st["bytes_forwarded"] == len(body2) and st["methods"] == {"PUT": 1, "HEAD": 1}
    assert st["connections"] == 1  # keep-alive: both requests on one connection
    assert [(r["method"], r["path"], r["status"]) for r in st["requests"]] == [
        ("PUT", f"/photolala/{key2}", 200), ("HEAD", f"/photolala/{key2}", 200)]

    admin = moto.s3_admin()
    assert sorted(o["Key"] for o in admin.list_objects_v2(Bucket="photolala")["Contents"]) == sorted([key, key2])
    assert admin.get_object(Bucket="photolala", Key=key2)["Body"].read() == body2

    backend.configure(omit_endpoint=True)
    assert "endpoint" not in sts(backend, s["accessToken"])


# ---- 5. Apple credential state ---------------------------------------------------------

def test_apple_credential_state(backend):
    a, b = backend.login("apple-a"), backend.login("apple-b")
    state = get(backend, "/api/v1/auth/apple/credential-state", a["accessToken"]).json()
    assert state["state"] == "authorized" and abs((parse_time(state["checkedAt"]) - dt.datetime.now(dt.timezone.utc)).total_seconds()) < 2
    post(backend, "/_test/apple-state", {"state": "revoked"})
    assert get(backend, "/api/v1/auth/apple/credential-state", b["accessToken"]).json()["state"] == "revoked"
    post(backend, "/_test/apple-state", {"state": "authorized"})
    post(backend, "/_test/apple-state", {"state": "transferred", "userId": a["userId"]})
    assert get(backend, "/api/v1/auth/apple/credential-state", a["accessToken"]).json()["state"] == "transferred"
    assert get(backend, "/api/v1/auth/apple/credential-state", b["accessToken"]).json()["state"] == "authorized"
    assert error_of(post(backend, "/_test/apple-state", {"state": "gone"})) == (400, "invalid_request")


# ---- 6. sign out (revoke) --------------------------------------------------------------

def device_session(backend, sub, device_id):
    """A sign-in bound to `device_id`, as the daemon signs in (deviceId in the body)."""
    r = post(backend, "/api/auth/apple", {"identityToken": backend.mint_identity_token(sub),
                                          "authorizationCode": "c_" + os.urandom(8).hex(),
                                          "deviceName": "nas", "deviceId": device_id})
    assert r.status_code == 200, r.text
    return r.json()


def as_device(backend, device_id, method, path, body=None, token=None):
    headers = {"X-Device-ID": device_id} | ({"Authorization": f"Bearer {token}"} if token else {})
    return requests.request(method, backend.url + path, json=body, headers=headers, timeout=10)


def test_revoke_ends_the_sign_in_and_is_idempotent(backend):
    device, other_device = str(uuid.uuid4()), str(uuid.uuid4())
    first = device_session(backend, "apple-revoke", device)
    # A refresh continues the same sign-in: its tokens are revoked with it, whichever
    # of the sign-in's refresh tokens is sent.
    r = as_device(backend, device, "POST", "/api/auth/refresh", {"refreshToken": first["refreshToken"]})
    assert r.status_code == 200, r.text
    current = r.json()
    bystander = device_session(backend, "apple-revoke-bystander", other_device)
    revoke = lambda body, dev=device: as_device(backend, dev, "POST", "/api/auth/revoke", body)  # noqa: E731

    # Malformed: no token, or the header of another device than the sign-in's.
    assert error_of(revoke({})) == (400, "invalid_request")
    assert error_of(revoke({"refreshToken": current["refreshToken"]}, other_device)) == (400, "invalid_request")
    assert not backend.is_revoked(current["refreshToken"]) and backend.revocations() == []

    r = revoke({"refreshToken": current["refreshToken"]})
    assert (r.status_code, r.json()) == (200, {})
    assert backend.is_revoked(current["refreshToken"]) and backend.is_revoked(first["refreshToken"])
    # From then on: the refresh token is refused with invalid_grant, every access token
    # of the sign-in (the first one too) with invalid_token, on both Bearer endpoints.
    r = as_device(backend, device, "POST", "/api/auth/refresh", {"refreshToken": current["refreshToken"]})
    assert error_of(r) == (401, "invalid_grant")
    for token in (first["accessToken"], current["accessToken"]):
        assert error_of(as_device(backend, device, "POST", "/api/v1/auth/sts-token", token=token)) == (401, "invalid_token")
        assert error_of(as_device(backend, device, "GET", "/api/v1/auth/apple/credential-state", token=token)) == (401, "invalid_token")
    # Another sign-in is untouched.
    assert as_device(backend, other_device, "GET", "/api/v1/auth/apple/credential-state",
                     token=bystander["accessToken"]).status_code == 200
    r = as_device(backend, other_device, "POST", "/api/auth/refresh", {"refreshToken": bystander["refreshToken"]})
    assert r.status_code == 200, r.text

    # Idempotent: the same token again, an older token of the same sign-in, an unknown one.
    for token in (current["refreshToken"], first["refreshToken"], "plr_never-issued-by-this-backend"):
        r = revoke({"refreshToken": token})
        assert (r.status_code, r.json()) == (200, {})

    (done, again, older, unknown) = backend.revocations()
    assert done["refreshToken"] == current["refreshToken"] and done["known"] and not done["alreadyRevoked"]
    assert done["userId"] == first["userId"] and done["deviceId"] == device and done["deviceHeader"] == device
    assert done["refreshTokensRevoked"] == 1 and done["accessTokensRevoked"] == 2
    assert again["alreadyRevoked"] and older["alreadyRevoked"] and again["refreshTokensRevoked"] == 0
    assert not unknown["known"] and unknown["userId"] is None
    assert get(backend, "/_test/revocations").json()["revocations"] == backend.revocations()
    assert get(backend, "/_test/stats").json()["calls"]["revoke"]["statuses"] == [400, 400, 200, 200, 200, 200]


def test_revoke_can_be_made_to_fail_or_unreachable(backend):
    """The switch for "the backend is down at logout": an error answer, or the connection
    closed with no answer; either way the sign-in stays valid (the backend never heard)."""
    device = str(uuid.uuid4())
    s = device_session(backend, "apple-revoke-down", device)
    body = {"refreshToken": s["refreshToken"]}
    backend.fail("revoke", 503, "unavailable", count=1)
    assert error_of(as_device(backend, device, "POST", "/api/auth/revoke", body)) == (503, "unavailable")
    post(backend, "/_test/fail", {"endpoint": "revoke", "drop": True})
    for _ in range(2):
        with pytest.raises(requests.ConnectionError):
            as_device(backend, device, "POST", "/api/auth/revoke", body)
    assert backend.revocations() == [] and not backend.is_revoked(s["refreshToken"])
    assert as_device(backend, device, "GET", "/api/v1/auth/apple/credential-state",
                     token=s["accessToken"]).status_code == 200
    # The backend itself still serves everything else, and is up again once cleared.
    backend.clear_faults("revoke")
    r = as_device(backend, device, "POST", "/api/auth/revoke", body)
    assert (r.status_code, r.json()) == (200, {})
    assert backend.is_revoked(s["refreshToken"])
    assert backend.stats()["calls"]["revoke"]["statuses"] == [503, 0, 0, 200]


# ---- error injection, stats, secrets ---------------------------------------------------

def test_error_injection_and_stats(backend):
    s = backend.login("apple-faults")
    post(backend, "/_test/fail", {"endpoint": "sts-token", "status": 403, "error": "quota_exceeded", "count": 2})
    for _ in range(2):
        assert error_of(post(backend, "/api/v1/auth/sts-token", token=s["accessToken"])) == (403, "quota_exceeded")
    assert sts(backend, s["accessToken"])  # count spent

    post(backend, "/_test/fail", {"endpoint": "credential-state", "status": 500, "error": "internal_error", "count": None})
    for _ in range(3):
        assert get(backend, "/api/v1/auth/apple/credential-state", s["accessToken"]).status_code == 500
    post(backend, "/_test/clear", {})
    assert get(backend, "/api/v1/auth/apple/credential-state", s["accessToken"]).status_code == 200

    # Hang, then answer normally (status null); and a hang cut short by clear.
    post(backend, "/_test/fail", {"endpoint": "refresh", "status": None, "hang": 0.4, "count": 1})
    t = time.monotonic()
    r = post(backend, "/api/auth/refresh", {"refreshToken": s["refreshToken"]})
    assert r.status_code == 200 and time.monotonic() - t >= 0.4
    backend.fail("refresh", status=503, error="unavailable", hang=30)
    with pytest.raises(requests.Timeout):
        requests.post(backend.url + "/api/auth/refresh", json={"refreshToken": "x"}, timeout=0.3)
    t = time.monotonic()
    backend.clear_faults()
    assert time.monotonic() - t < 1
    assert error_of(post(backend, "/_test/fail", {"endpoint": "nope"})) == (400, "invalid_request")

    # The hung call is counted when its handler ends, a moment after clear released it.
    deadline = time.monotonic() + 5
    while True:
        calls = get(backend, "/_test/stats").json()["calls"]
        if calls["refresh"]["count"] == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert calls["sts-token"]["count"] == 3 and calls["sts-token"]["statuses"] == [403, 403, 200]
    assert calls["credential-state"]["statuses"] == [500, 500, 500, 200]
    assert calls["refresh"]["count"] == 2 and calls["apple"]["count"] == 1
    times = calls["sts-token"]["times"]
    assert times == sorted(times) and abs(times[0] - time.time()) < 30


def test_secrets_listing_and_quiet_logs(moto, backend, caplog, proxy):
    for name in ("fake_backend", "fault_proxy"):
        caplog.set_level(logging.DEBUG, logger=name)
    backend.configure(pairing_interval=0, sts_endpoint=proxy.url)
    token = backend.mint_identity_token("apple-secret-sub")
    s = post(backend, "/api/auth/apple", {"identityToken": token, "authorizationCode": "auth-code-123"}).json()
    fresh = post(backend, "/api/auth/refresh", {"refreshToken": s["refreshToken"]}).json()
    answer = sts(backend, fresh["accessToken"])
    p = start_pairing(backend)
    backend.approve_pairing(p["userCode"], "apple-paired-sub")
    paired = poll(backend, p["deviceCode"]).json()
    creds = answer["credentials"]
    moto.s3_with(creds, endpoint=answer["endpoint"]).put_object(
        Bucket="photolala", Key=f"photos/{s['userId']}/s.dat", Body=b"s")

    secrets = get(backend, "/_test/secrets").json()
    expect = {
        "identityTokens": token, "authorizationCodes": "auth-code-123", "appleSubjects": "apple-paired-sub",
        "deviceCodes": p["deviceCode"], "accessTokens": paired["accessToken"], "refreshTokens": fresh["refreshToken"],
        "stsAccessKeyIds": creds["accessKeyId"], "stsSecretKeys": creds["secretAccessKey"],
        "stsSessionTokens": creds["sessionToken"],
    }
    for kind, value in expect.items():
        assert value in secrets[kind], kind
    assert "apple-secret-sub" in secrets["appleSubjects"] and s["refreshToken"] in secrets["refreshTokens"]
    assert set(secrets["all"]) == {v for k, vs in secrets.items() if k != "all" for v in vs}
    assert backend.all_secrets() == secrets["all"]

    # Neither the backend's nor the proxy's log lines carry any of them; nor does moto's.
    log_text = "\n".join(r.getMessage() for r in caplog.records if r.name in ("fake_backend", "fault_proxy"))
    assert "POST /api/auth/apple 200" in log_text and "PUT /photolala/photos/" in log_text
    log_text += moto.log_path.read_text(errors="replace")
    assert not [v for v in secrets["all"] if v in log_text]


# ---- fault proxy -----------------------------------------------------------------------

@pytest.fixture
def via_proxy(moto, backend, proxy):
    """(user id, an S3 client through the proxy with real STS credentials, with a 1 s read
    timeout and no retries)."""
    s = backend.login("apple-proxy")
    backend.configure(sts_endpoint=proxy.url)
    answer = sts(backend, s["accessToken"])
    return s["userId"], moto.s3_with(answer["credentials"], endpoint=answer["endpoint"], read_timeout=1, connect_timeout=1)


def test_proxy_faults(moto, proxy, via_proxy):
    uid, s3 = via_proxy
    key = f"photos/{uid}/fault.dat"

    def put():
        return s3.put_object(Bucket="photolala", Key=key, Body=b"payload")

    proxy.set_faults(slowdown_rate=1.0)
    with pytest.raises(ClientError) as e:
        put()
    assert (e.value.response["ResponseMetadata"]["HTTPStatusCode"], e.value.response["Error"]["Code"]) == (503, "SlowDown")

    proxy.set_faults(slowdown_rate=0.0, reset_rate=1.0)
    with pytest.raises(ConnectionClosedError):
        put()

    proxy.set_faults(reset_rate=0.0, expired_token_count=2)
    for _ in range(2):
        with pytest.raises(ClientError) as e:
            put()
        assert (e.value.response["ResponseMetadata"]["HTTPStatusCode"], e.value.response["Error"]["Code"]) == (400, "ExpiredToken")
    assert "Contents" not in moto.s3_admin().list_objects_v2(Bucket="photolala")
    put()  # count spent

    proxy.set_faults(truncate_count=1)
    with pytest.raises(ConnectionClosedError):
        put()
    proxy.set_faults(truncate_count=1)
    with pytest.raises(ConnectionClosedError):
        s3.head_object(Bucket="photolala", Key=key)

    proxy.set_faults(latency=0.3)
    t = time.monotonic()
    put()
    assert time.monotonic() - t >= 0.3

    proxy.clear_faults()
    proxy.set_faults(blackhole=True)
    with pytest.raises(ReadTimeoutError):
        s3.head_object(Bucket="photolala", Key=key)
    proxy.clear_faults()
    assert s3.head_object(Bucket="photolala", Key=key)["ContentLength"] == 7

    st = proxy.stats()
    assert st["faults"] == {"blackhole": 1, "expired_token": 2, "reset": 1, "slowdown": 1, "truncated": 2,
                            "expired_enforced": 0, "upstream_error": 0, "access_denied": 0, "corrupted": 0,
                            "refused_if_match": 0}
    # Forwarded and answered 2xx: the good PUT, the truncated PUT (it reached moto), the slow PUT.
    assert st["writes_forwarded"] == 3
    assert [r["status"] for r in st["requests"]] == [503, None, 400, 400, 200, 200, 200, 200, None, 200]


def test_proxy_aims_faults_denies_and_corrupts(moto, backend, proxy, via_proxy):
    uid, _ = via_proxy
    # botocore would refuse the corrupted body by its checksum before the test could see it.
    s3 = moto.s3_with(backend._vend(uid)["credentials"], endpoint=proxy.url, response_checksum_validation="when_required")
    body = os.urandom(1000)
    key = f"photos/{uid}/aimed.dat"
    s3.put_object(Bucket="photolala", Key=key, Body=body)
    # Aimed at listings only: a listing is refused as S3 refuses what a policy leaves out,
    # while reads and writes go through, and a counted fault waits for a matching request.
    proxy.set_faults(access_denied=True, truncate_count=1, match=r"^GET [^?]*[?&]list-type=2")
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket="photolala", Prefix=f"photos/{uid}/")
    assert (e.value.response["ResponseMetadata"]["HTTPStatusCode"], e.value.response["Error"]["Code"]) == (403, "AccessDenied")
    assert s3.get_object(Bucket="photolala", Key=key)["Body"].read() == body
    assert proxy.faults()["truncate_count"] == 1
    # The first body byte of a matching answer is flipped: same size, other bytes.
    proxy.clear_faults()
    proxy.set_faults(corrupt_body=True, match=rf"^GET /photolala/{key}$")
    got = s3.get_object(Bucket="photolala", Key=key)["Body"].read()
    assert len(got) == len(body) and got != body and got[1:] == body[1:]
    st = proxy.stats()
    assert st["faults"]["access_denied"] == 1 and st["faults"]["corrupted"] == 1
    # A conditional write is recorded as such.
    proxy.clear_faults()
    s3.put_object(Bucket="photolala", Key=f"photos/{uid}/cond.dat", Body=b"x", IfNoneMatch="*")
    assert proxy.stats()["requests"][-1]["ifNoneMatch"] == "*"


def test_proxy_http_controls_and_seed(proxy, via_proxy):
    uid, s3 = via_proxy
    base = proxy.url + "/_proxy"

    def outcomes():
        got = []
        for i in range(20):
            try:
                s3.head_object(Bucket="photolala", Key=f"photos/{uid}/none-{i}")
            except ClientError as e:
                got.append(e.response["ResponseMetadata"]["HTTPStatusCode"])
        return got

    r = requests.post(base + "/faults", json={"slowdown_rate": 0.5, "seed": 7}, timeout=5)
    assert r.status_code == 200 and r.json()["slowdown_rate"] == 0.5
    first = outcomes()
    requests.post(base + "/faults", json={"seed": 7}, timeout=5)
    assert outcomes() == first and set(first) == {404, 503}  # same seed, same sequence
    st = requests.get(base + "/stats", timeout=5).json()
    assert st["total"] == 40 and st["methods"] == {"HEAD": 40} and st["faults"]["slowdown"] == 2 * first.count(503)
    requests.post(base + "/reset-stats", timeout=5)
    requests.post(base + "/clear", timeout=5)
    assert requests.get(base + "/stats", timeout=5).json()["total"] == 0
    assert requests.get(base + "/faults", timeout=5).json()["slowdown_rate"] == 0
    assert requests.post(base + "/faults", json={"nonsense": 1}, timeout=5).status_code == 400

    # A blackholed request is released (closed) by /_proxy/clear.
    requests.post(base + "/faults", json={"blackhole": True}, timeout=5)
    t = time.monotonic()
    with pytest.raises(requests.ConnectionError):
        threading.Timer(0.3, lambda: requests.post(base + "/clear", timeout=5)).start()
        requests.get(proxy.url + "/photolala", timeout=5)
    assert time.monotonic() - t < 3


def test_proxy_enforces_reported_expiry(moto, backend, proxy):
    s = backend.login("apple-expiry")
    backend.configure(sts_endpoint=proxy.url, sts_expires_in=0.5)
    creds = sts(backend, s["accessToken"])["credentials"]
    s3 = moto.s3_with(creds, endpoint=proxy.url)
    proxy.set_faults(enforce_expiry_from=backend.url)  # the HTTP form; Python: proxy.expiry_lookup
    key = f"photos/{s['userId']}/x.dat"
    s3.put_object(Bucket="photolala", Key=key, Body=b"ok")  # still valid
    time.sleep(0.6)
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="photolala", Key=key, Body=b"late")
    assert e.value.response["Error"]["Code"] == "ExpiredToken"
    # moto itself would have taken it:
    moto.s3_with(creds).put_object(Bucket="photolala", Key=key, Body=b"late")
    # The Python form, same effect.
    proxy.clear_faults()
    s3.put_object(Bucket="photolala", Key=key, Body=b"not enforced")
    proxy.expiry_lookup = backend.credential_expiry
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="photolala", Key=key, Body=b"late")
    assert e.value.response["Error"]["Code"] == "ExpiredToken"
    assert proxy.stats()["faults"]["expired_enforced"] == 2


def test_proxy_relays_chunked_bodies_and_keeps_alive(backend):
    # Any upstream works; the backend shows the body arrived intact.
    with FaultProxy(backend.url) as p:
        s = backend.login("apple-chunked")

        def body():  # a generator: requests sends Transfer-Encoding: chunked
            yield b'{"refreshToken": '
            yield json.dumps(s["refreshToken"]).encode()
            yield b"}"
        r = requests.post(p.url + "/api/auth/refresh", data=body(), headers={"Content-Type": "application/json"}, timeout=5)
        assert r.status_code == 200 and r.json()["refreshToken"] != s["refreshToken"]
        with requests.Session() as session:
            for _ in range(3):
                assert session.get(p.url + "/_test/health", timeout=5).json() == {"ok": True}
        st = p.stats()
        assert (st["total"], st["connections"]) == (4, 2)
        assert requests.post(p.url + "/_proxy/faults", json={"latency": "slow"}, timeout=5).status_code == 400


# ---- script mode -----------------------------------------------------------------------

def spawn(*args):
    proc = subprocess.Popen([sys.executable, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return proc, line.strip()


def finish(proc):
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    return proc.stderr.read()


def test_scripts(moto):
    # The fake backend against an existing moto, then the proxy in front of moto.
    backend, url = spawn(SUPPORT / "fake_backend.py", "--moto-endpoint", moto.endpoint,
                         "--backend-key", moto.backend_access_key, "--backend-secret", moto.backend_secret_key,
                         "--role-arn", moto.role_arn, "--pairing-interval", "1")
    proxy, purl = spawn(SUPPORT / "fault_proxy.py", "--upstream", moto.endpoint, "--seed", "1")
    try:
        assert requests.get(url + "/_test/health", timeout=5).json() == {"ok": True}
        assert requests.get(purl + "/_proxy/health", timeout=5).json()["upstream"] == moto.endpoint
        token = requests.post(url + "/_test/identity-token", json={"sub": "script"}, timeout=5).json()["identityToken"]
        s = requests.post(url + "/api/auth/apple", json={"identityToken": token}, timeout=5).json()
        requests.post(url + "/_test/config", json={"stsEndpoint": purl}, timeout=5)
        r = requests.post(url + "/api/v1/auth/sts-token", headers={"Authorization": "Bearer " + s["accessToken"]}, timeout=10)
        assert r.json()["endpoint"] == purl
        moto.s3_with(r.json()["credentials"], endpoint=purl).put_object(Bucket="photolala", Key=f"photos/{s['userId']}/s.dat", Body=b"s")
        secrets = requests.get(url + "/_test/secrets", timeout=5).json()["all"]
    finally:
        logs = finish(backend) + finish(proxy)
    assert "POST /api/auth/apple 200" in logs and "PUT /photolala/photos/" in logs
    assert not [v for v in secrets if v in logs]


def test_script_with_moto():
    proc, line = spawn(SUPPORT / "fake_backend.py", "--with-moto", "--with-proxy", "--quiet")
    try:
        info = json.loads(line)
        assert {"backend", "moto", "proxy", "s3Endpoint", "region", "bucket", "roleArn", "clientId"} <= set(info)
        assert info["s3Endpoint"] == info["proxy"]
        r = requests.post(info["backend"] + "/_test/login", json={"sub": "demo"}, timeout=5).json()
        creds = requests.post(info["backend"] + "/api/v1/auth/sts-token",
                              headers={"Authorization": "Bearer " + r["accessToken"]}, timeout=10).json()
        assert creds["endpoint"] == info["proxy"]
    finally:
        finish(proc)


# ---- the build caches outside the checkout ------------------------------------------------

def test_a_build_folder_whose_checkout_is_gone_is_removed_others_stay(tmp_path, monkeypatch):
    """Each checkout builds its .deb and image in a folder of its own under the cache
    (1–2 GB with its Swift build); a clean clone tested and removed must not leave one
    behind for ever, and nothing of a checkout still there, or still building, goes."""
    import fcntl
    from support import nspawn
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    parent = tmp_path / "cache" / "photolala" / "build-deb"
    alive_checkout = tmp_path / "alive"
    alive_checkout.mkdir()

    def folder(name: str, checkout: Path | None) -> Path:
        d = parent / name
        (d / "src").mkdir(parents=True)
        (d / "src" / "big").write_bytes(b"x" * 1024)
        if checkout is not None:
            (d / "checkout").write_text(f"{checkout}\n")
        return d

    gone = folder("aaaaaaaaaaaa", tmp_path / "removed-clone")
    alive = folder("bbbbbbbbbbbb", alive_checkout)
    unnoted = folder("cccccccccccc", None)
    busy = folder("dddddddddddd", tmp_path / "removed-while-running")
    with open(busy / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        here = nspawn.checkout_dir("build-deb")
    assert here.parent == parent
    assert (here / "checkout").read_text().strip() == str(nspawn.REPO)
    assert not gone.exists()
    assert alive.exists() and unnoted.exists() and busy.exists()
    # Once its run has let go, the next run removes it.
    nspawn.checkout_dir("build-deb")
    assert not busy.exists()
    assert here.exists() and alive.exists()
