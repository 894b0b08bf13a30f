"""A fake Photolala backend implementing exactly shared/spec/backend-api.md (sections 1-6).

It plays two parts:

- "Apple": it owns an RSA key, mints Sign-in-with-Apple style RS256 identity tokens
  (iss https://appleid.apple.com, aud = the client id, sub = the Apple subject) and
  publishes the public key as a JWKS. Nothing else is faked: `POST /api/auth/apple`
  verifies tokens with PyJWT exactly as the real backend would (signature by `kid`,
  iss, aud, exp).
- The backend: sessions (plt_ access tokens, rotating plr_ refresh tokens), RFC 8628
  device pairing, real STS credentials from moto (AssumeRole signed with the backend
  user's keys, with a per-user session policy), the Apple credential state and sign-out
  (revoke): a revoked refresh token, and every access token issued from its sign-in,
  is refused from then on (`revocations()` lists each call for tests to assert).

Tests steer it through `/_test/...` JSON endpoints or the same operations as Python
methods. Every secret it issues or receives is recorded so tests can grep the daemon's
logs and files for them (`GET /_test/secrets`); its own log lines carry method, path and
status only.

Over HTTPS: `FakeBackend(moto, tls=ca.issue(...))` serves with that certificate
(support/tls.py); it reaches an https:// STS (moto or RGW) verified against the stack's
`ca_file`. Any object with moto's attributes (endpoint, backend keys, role_arn, region,
bucket, ca_file) can stand behind it: support/rgw.py's gateway is one (RGW's STS wants
the session policy as compact JSON, which is how it is always sent).

In-process:

    backend = FakeBackend(moto).start()      # moto: a support.stack.MotoServer
    backend.url                              # http://127.0.0.1:PORT
    backend.stop()

As a script (prints its URL, or with --with-moto one JSON line, on stdout line 1):

    python3 Tests/e2e/support/fake_backend.py --moto-endpoint URL --backend-key K \\
        --backend-secret S --role-arn ARN [--port N]
    python3 Tests/e2e/support/fake_backend.py --with-moto [--with-proxy] [--port N]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import secrets as _secrets
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable

import jwt
import requests
from botocore.config import Config as BotoConfig
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask, Response, request
from werkzeug.serving import WSGIRequestHandler, make_server

try:
    from .stack import MotoServer, boto_client
except ImportError:  # run as a script: make `support` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from support.stack import MotoServer, boto_client

log = logging.getLogger("fake_backend")

APPLE_ISSUER = "https://appleid.apple.com"
DEFAULT_CLIENT_ID = "app.photolala.nas"
APPLE_STATES = ("authorized", "revoked", "notFound", "transferred")
# Photolala user ids are uuid5(this namespace, Apple sub): stable across runs and restarts,
# so a test can predict the S3 prefix of a subject.
USER_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://photolala.app/users")
# RFC 8628 section 6.1: user codes from consonants only (no vowels: no words, no 0/O, 1/I).
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"

# Names used by /_test/fail and /_test/stats, one per API operation.
ENDPOINTS = {
    "apple": ("POST", "/api/auth/apple"),
    "device": ("POST", "/api/v1/auth/device"),
    "device-token": ("POST", "/api/v1/auth/device/token"),
    "refresh": ("POST", "/api/auth/refresh"),
    "sts-token": ("POST", "/api/v1/auth/sts-token"),
    "credential-state": ("GET", "/api/v1/auth/apple/credential-state"),
    "revoke": ("POST", "/api/auth/revoke"),
}

# The prefixes a user's STS session may reach (shared/spec/s3-layout.md).
USER_PREFIXES = ("photos", "thumbnails", "catalogs", "metadata")


def user_id_for(sub: str) -> str:
    """The Photolala user id the fake assigns to an Apple subject, spelt as the real
    backend and the apps spell it (Swift's `uuidString`: uppercase, backend-api.md), so a
    key the daemon lowercased anywhere would not match."""
    return str(uuid.uuid5(USER_NAMESPACE, sub)).upper()


def allowed_prefixes(user_id: str) -> list[str]:
    return [f"{p}/{user_id}/" for p in USER_PREFIXES]


def session_policy(bucket: str, user_id: str, list_bucket: bool = True) -> dict:
    """The per-user session policy passed to AssumeRole (backend-api.md section 4): the
    object actions on the user's four prefixes, and listing the bucket only with a prefix
    inside them. `list_bucket=False` is the stricter backend the spec allows, which leaves
    listing out. moto ignores session policies; tests that want the scoping enforced check
    written keys against `allowed_prefixes()`, and the fault proxy answers 403 to listings
    where a test needs S3 to refuse them (`FaultProxy.set_faults(access_denied=True,
    match=...)`)."""
    objects = [f"arn:aws:s3:::{bucket}/{p}*" for p in allowed_prefixes(user_id)]
    statements = [
        {"Sid": "OwnObjects", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:RestoreObject",
                    "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
         "Resource": objects},
    ]
    if list_bucket:
        statements.append(
            {"Sid": "ListOwnPrefixes", "Effect": "Allow", "Action": "s3:ListBucket",
             "Resource": f"arn:aws:s3:::{bucket}",
             "Condition": {"StringLike": {"s3:prefix": [f"{p}*" for p in allowed_prefixes(user_id)]}}})
    return {"Version": "2012-10-17", "Statement": statements}


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class ApiError(Exception):
    """An error answer: `{"error": code, "message": message}` with `status`."""

    def __init__(self, status: int, error: str, message: str):
        super().__init__(message)
        self.status, self.error, self.message = status, error, message


@dataclass
class BackendConfig:
    """What tests can change at run time (snake_case here, camelCase over HTTP)."""
    pairing_interval: int = 5            # `interval` of new pairings, seconds
    pairing_expires_in: int = 600        # `expiresIn` of new pairings, seconds
    slow_down_tolerance: float = 0.0     # polls closer than interval - this get slow_down
    access_token_ttl: float = 3600.0     # access token lifetime, seconds
    rotate_refresh_tokens: bool = True   # refresh answers a new refresh token, old one dies
    sts_duration_seconds: int = 3600     # DurationSeconds asked of moto (900..43200)
    sts_expires_in: float | None = None  # reported `expiration` = now + this; None: moto's own
    sts_endpoint: str | None = None      # `endpoint` answered; None: the moto endpoint
    omit_endpoint: bool = False          # leave `endpoint` out (daemon would use AWS)
    fractional_seconds: bool = False     # timestamps with milliseconds (the spec allows both)
    list_bucket: bool = True             # grant s3:ListBucket on the user's prefixes (backend-api.md 4)

    @staticmethod
    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(w.capitalize() for w in rest)

    def to_json(self) -> dict:
        return {self.camel(k): v for k, v in asdict(self).items()}

    def update(self, changes: dict, camel: bool) -> None:
        names = {(self.camel(f.name) if camel else f.name): f for f in fields(self)}
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise ApiError(400, "invalid_request", f"unknown config keys: {', '.join(unknown)}; "
                                                   f"known: {', '.join(sorted(names))}")
        for k, v in changes.items():
            kind = names[k].type  # a string under `from __future__ import annotations`
            ok = (v is None and "None" in kind) or (
                isinstance(v, bool) if kind == "bool" else
                isinstance(v, str) if kind.startswith("str") else
                isinstance(v, (int, float)) and not isinstance(v, bool))
            if not ok:
                raise ApiError(400, "invalid_request", f"{k} must be {kind}, not {v!r}")
        for k, v in changes.items():
            setattr(self, names[k].name, v)


@dataclass
class Fault:
    status: int | None          # None: after hanging, answer normally
    error: str
    message: str
    remaining: int | None       # None: until cleared
    hang: float | None
    drop: bool = False          # close the connection without an answer (backend unreachable)


class _QuietHandler(WSGIRequestHandler):
    """Logs method, path (never the query string) and status; nothing else."""

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        log.info("%s %s %s", self.command, self.path.split("?", 1)[0], getattr(code, "value", code))

    def log_message(self, format: str, *args: Any) -> None:  # werkzeug's own chatter
        pass


class FakeBackend:
    """The fake backend; see the module docstring. Thread-safe: one lock guards all state."""

    def __init__(self, moto: MotoServer | None = None, *, moto_endpoint: str | None = None,
                 backend_access_key: str | None = None, backend_secret_key: str | None = None,
                 role_arn: str | None = None, region: str | None = None, bucket: str | None = None,
                 host: str = "127.0.0.1", port: int = 0, client_id: str = DEFAULT_CLIENT_ID,
                 tls=None, ca_file: str | None = None):
        self.moto_endpoint = moto_endpoint or (moto.endpoint if moto else None)
        # What an https STS endpoint is verified against; this backend's own certificate.
        self.ca_file = ca_file or (getattr(moto, "ca_file", None) if moto else None)
        self.tls = tls
        self.backend_access_key = backend_access_key or (moto.backend_access_key if moto else None)
        self.backend_secret_key = backend_secret_key or (moto.backend_secret_key if moto else None)
        self.role_arn = role_arn or (moto.role_arn if moto else None)
        self.region = region or (moto.region if moto else "us-east-1")
        self.bucket = bucket or (moto.bucket if moto else "photolala")
        missing = [n for n in ("moto_endpoint", "backend_access_key", "backend_secret_key", "role_arn")
                   if not getattr(self, n)]
        if missing:
            raise ValueError(f"FakeBackend needs a MotoServer or {', '.join(missing)}")
        self.host, self.port, self.client_id = host, port, client_id
        # "Apple's" signing key. A second key under the same kid signs `badSignature`
        # tokens: they look right but fail verification, as a forged token would.
        self._apple_key = _cached_rsa_key(0)
        self._forger_key = _cached_rsa_key(1)
        self.apple_kid = "fake-apple-" + _secrets.token_hex(4)
        self._sts = boto_client(
            "sts", endpoint_url=self.moto_endpoint, region_name=self.region,
            aws_access_key_id=self.backend_access_key, aws_secret_access_key=self.backend_secret_key,
            verify=self.ca_file, config=BotoConfig(retries={"max_attempts": 2, "mode": "standard"}))
        self._lock = threading.RLock()
        self._unhang = threading.Event()
        self._server = None
        self._thread: threading.Thread | None = None
        self.app = self._make_app()
        self.reset()

    # ---- lifecycle -------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def start(self) -> "FakeBackend":
        self._server = make_server(self.host, self.port, self.app, threaded=True,
                                   request_handler=_QuietHandler,
                                   ssl_context=self.tls.server_context() if self.tls else None)
        self.port = self._server.server_port
        # A short poll interval: shutdown() waits for it, and tests start and stop many.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-backend", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._unhang.set()  # release requests held by a `hang` fault
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FakeBackend":
        return self.start() if self._server is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget every user, token, pairing, fault, stat and setting (keeps keys and port)."""
        with self._lock:
            self.config = BackendConfig()
            self._access: dict[str, dict] = {}     # token -> {userId, expiresAt, deviceId, grant}
            self._refresh: dict[str, str] = {}     # live refresh token -> userId
            self._refresh_device: dict[str, str | None] = {}  # refresh token -> deviceId it was issued to
            # Every refresh token ever issued (rotated ones too) -> its sign-in ("grant"):
            # one sign-in and all the tokens its refreshes issued. Revoking any of its
            # refresh tokens ends the whole sign-in (RFC 7009 2.1).
            self._grant_of_refresh: dict[str, dict] = {}   # token -> {grant, userId, deviceId}
            self._revoked_grants: set[str] = set()
            self._revocations: list[dict] = []
            self._pairings: dict[str, dict] = {}   # deviceCode -> pairing record
            self._apple_state_all = "authorized"
            self._apple_state: dict[str, str] = {}  # userId -> state
            self._faults: dict[str, Fault] = {}
            self._calls: dict[str, list] = {name: [] for name in ENDPOINTS}
            self._sts_sessions: list[dict] = []
            # X-Device-ID of every API call, by endpoint (None when absent), and the
            # deviceId of every sign-in or pairing body (backend-api.md).
            self._device_headers: dict[str, list] = {name: [] for name in ENDPOINTS}
            self._body_device_ids: list[dict] = []
            self._secrets: dict[str, list[str]] = {k: [] for k in (
                "identityTokens", "authorizationCodes", "appleSubjects", "deviceCodes",
                "accessTokens", "refreshTokens", "stsAccessKeyIds", "stsSecretKeys", "stsSessionTokens")}
            self._unhang.set()
            self._unhang = threading.Event()

    # ---- "Apple" ---------------------------------------------------------------------

    def mint_identity_token(self, sub: str, *, aud: str | None = None, iss: str = APPLE_ISSUER,
                            expires_in: float = 600, bad_signature: bool = False) -> str:
        """An identity token as Sign in with Apple would hand the app. `expires_in` < 0
        gives an already expired one; `bad_signature` one signed by the wrong key."""
        now = int(time.time())
        exp = now + int(expires_in)
        claims = {"iss": iss, "aud": aud or self.client_id, "sub": sub,
                  "iat": min(now, exp - 1), "exp": exp, "auth_time": min(now, exp - 1),
                  "nonce_supported": True}
        key = self._forger_key if bad_signature else self._apple_key
        token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": self.apple_kid})
        self._record_secret("identityTokens", token)
        self._record_secret("appleSubjects", sub)
        return token

    def apple_jwks(self) -> dict:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self._apple_key.public_key()))
        jwk.update({"kid": self.apple_kid, "alg": "RS256", "use": "sig"})
        return {"keys": [jwk]}

    def _verify_identity_token(self, token: str) -> str:
        """The real backend's check; returns the Apple subject or raises 401 invalid_token."""
        def refuse(why: str) -> ApiError:
            return ApiError(401, "invalid_token", f"identity token refused: {why}")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise refuse("not a JWT")
        if header.get("alg") != "RS256":
            raise refuse(f"algorithm {header.get('alg')!r} is not RS256")
        if header.get("kid") != self.apple_kid:
            raise refuse("signed with a key Apple does not publish (unknown kid)")
        try:
            claims = jwt.decode(token, self._apple_key.public_key(), algorithms=["RS256"],
                                audience=self.client_id, issuer=APPLE_ISSUER, leeway=0,
                                options={"require": ["iss", "aud", "exp", "iat", "sub"]})
        except jwt.InvalidSignatureError:
            raise refuse("bad signature")
        except jwt.ExpiredSignatureError:
            raise refuse("expired")
        except jwt.InvalidAudienceError:
            raise refuse(f"audience is not {self.client_id}")
        except jwt.InvalidIssuerError:
            raise refuse(f"issuer is not {APPLE_ISSUER}")
        except jwt.InvalidTokenError as e:
            raise refuse(type(e).__name__)
        return claims["sub"]

    # ---- sessions --------------------------------------------------------------------

    def _fmt(self, t: dt.datetime) -> str:
        if self.config.fractional_seconds:
            return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _issue_session(self, user_id: str, keep_refresh: str | None = None, device_id: str | None = None,
                       grant: str | None = None) -> dict:
        """A new access token, and a new refresh token unless `keep_refresh` is reused.
        A session issued to a device (`deviceId` in the sign-in body) must be used with
        that device's `X-Device-ID` from then on. `grant`: the sign-in a refresh continues
        (None: a new sign-in)."""
        with self._lock:
            grant = grant or uuid.uuid4().hex
            access = "plt_" + _secrets.token_urlsafe(32)
            refresh = keep_refresh or "plr_" + _secrets.token_urlsafe(32)
            expires = _now() + dt.timedelta(seconds=self.config.access_token_ttl)
            self._access[access] = {"userId": user_id, "expiresAt": expires, "deviceId": device_id, "grant": grant}
            self._refresh[refresh] = user_id
            self._refresh_device[refresh] = device_id
            self._grant_of_refresh[refresh] = {"grant": grant, "userId": user_id, "deviceId": device_id}
            self._record_secret("accessTokens", access)
            self._record_secret("refreshTokens", refresh)
        return {"userId": user_id, "accessToken": access,
                "accessTokenExpiresAt": self._fmt(expires), "refreshToken": refresh}

    def _bearer_user(self) -> str:
        auth = request.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "invalid_token", "missing Bearer access token")
        with self._lock:
            entry = self._access.get(token.strip())
            if entry is None:
                raise ApiError(401, "invalid_token", "unknown access token")
            if entry["grant"] in self._revoked_grants:
                raise ApiError(401, "invalid_token", "access token revoked (the sign-in was revoked)")
            if _now() >= entry["expiresAt"]:
                raise ApiError(401, "invalid_token", "access token expired")
            self._check_device(entry.get("deviceId"))
            return entry["userId"]

    @staticmethod
    def _body_device_id(body: dict) -> str | None:
        """`deviceId` of a sign-in or pairing body: absent, or a UUID (backend-api.md)."""
        value = body.get("deviceId")
        if value is None:
            return None
        try:
            if not isinstance(value, str) or str(uuid.UUID(value)) != value.lower():
                raise ValueError
        except ValueError:
            raise ApiError(400, "invalid_request", "deviceId must be a UUID")
        return value.lower()

    @staticmethod
    def _check_device(expected: str | None) -> None:
        """A session issued to a device is only used by that device."""
        if expected is None:
            return
        sent = (request.headers.get("X-Device-ID") or "").lower()
        if sent != expected:
            raise ApiError(400, "invalid_request", "X-Device-ID missing or not the device this session was issued to")

    def login(self, sub: str) -> dict:
        """Sign `sub` in through the real endpoint; returns the section-1 answer."""
        r = requests.post(f"{self.url}/api/auth/apple", timeout=10, verify=str(self.tls.ca_path) if self.tls else True,
                          json={"identityToken": self.mint_identity_token(sub),
                                "authorizationCode": "c_" + _secrets.token_hex(8), "deviceName": "test"})
        r.raise_for_status()
        return r.json()

    def expire_access_tokens(self, user_id: str | None = None) -> int:
        with self._lock:
            hit = [e for e in self._access.values() if user_id in (None, e["userId"])]
            for e in hit:
                e["expiresAt"] = _now() - dt.timedelta(seconds=1)
            return len(hit)

    def revoke_refresh_tokens(self, user_id: str | None = None) -> int:
        """The backend drops refresh tokens on its own (an admin, a security event); not
        the daemon's sign-out, which is `/api/auth/revoke`."""
        with self._lock:
            dead = [t for t, u in self._refresh.items() if user_id in (None, u)]
            for t in dead:
                del self._refresh[t]
            return len(dead)

    # ---- sign-out (section 6) ----------------------------------------------------------

    def _revoke(self, refresh_token: str, device_header: str | None) -> dict:
        """Ends the sign-in `refresh_token` belongs to: that token, every refresh token
        of the same sign-in (rotated ones included) and every access token issued in it.
        200 `{}` for an unknown or already revoked token too (idempotent). A token issued
        to a device must come with that device's X-Device-ID, as every call must."""
        with self._lock:
            issued = self._grant_of_refresh.get(refresh_token)
            if issued is not None:
                self._check_device(issued["deviceId"])
            record = {"time": time.time(), "refreshToken": refresh_token, "known": issued is not None,
                      "userId": issued["userId"] if issued else None,
                      "deviceId": issued["deviceId"] if issued else None,
                      "deviceHeader": device_header, "alreadyRevoked": False,
                      "refreshTokensRevoked": 0, "accessTokensRevoked": 0}
            if issued is not None:
                grant = issued["grant"]
                record["alreadyRevoked"] = grant in self._revoked_grants
                self._revoked_grants.add(grant)
                for t in [t for t, g in self._grant_of_refresh.items() if g["grant"] == grant and t in self._refresh]:
                    del self._refresh[t]
                    record["refreshTokensRevoked"] += 1
                if not record["alreadyRevoked"]:
                    record["accessTokensRevoked"] = sum(1 for e in self._access.values() if e["grant"] == grant)
            self._revocations.append(record)
        return {}

    def revocations(self) -> list[dict]:
        """Every call of `/api/auth/revoke` that reached the handler (not those a fault
        answered), oldest first: time, refreshToken, known (issued by this backend),
        userId and deviceId of its sign-in, deviceHeader (X-Device-ID sent),
        alreadyRevoked, and how many refresh and access tokens it ended."""
        with self._lock:
            return [dict(r) for r in self._revocations]

    def is_revoked(self, refresh_token: str) -> bool:
        """Whether the sign-in of `refresh_token` was revoked through section 6."""
        with self._lock:
            issued = self._grant_of_refresh.get(refresh_token)
            return issued is not None and issued["grant"] in self._revoked_grants

    # ---- pairing ---------------------------------------------------------------------

    def _new_user_code(self) -> str:
        while True:
            raw = "".join(_secrets.choice(USER_CODE_ALPHABET) for _ in range(8))
            code = f"{raw[:4]}-{raw[4:]}"
            if all(p["userCode"] != code for p in self._pairings.values()):
                return code

    def _pairing_by_user_code(self, user_code: str) -> dict:
        want = str(user_code or "").upper().replace("-", "").replace(" ", "")
        for p in self._pairings.values():
            if p["userCode"].replace("-", "") == want:
                return p
        raise ApiError(404, "not_found", "no pairing with that user code")

    def approve_pairing(self, user_code: str, sub: str = "apple-demo-user") -> str:
        """What the phone does after Sign in with Apple; returns the user id."""
        with self._lock:
            p = self._pairing_by_user_code(user_code)
            p["status"], p["userId"] = "approved", user_id_for(sub)
            self._record_secret("appleSubjects", sub)
            return p["userId"]

    def deny_pairing(self, user_code: str) -> None:
        with self._lock:
            self._pairing_by_user_code(user_code)["status"] = "denied"

    def expire_pairing(self, user_code: str | None = None) -> int:
        """Expire one pairing (or every open one)."""
        with self._lock:
            hit = [self._pairing_by_user_code(user_code)] if user_code else [
                p for p in self._pairings.values() if p["status"] in ("pending", "approved")]
            for p in hit:
                p["expiresAt"] = time.time() - 1
            return len(hit)

    def pairings(self) -> list[dict]:
        """Every pairing so far, without its device code (a secret)."""
        with self._lock:
            return [{k: v for k, v in p.items() if k != "deviceCode"} for p in self._pairings.values()]

    # ---- STS -------------------------------------------------------------------------

    def _vend(self, user_id: str) -> dict:
        policy = session_policy(self.bucket, user_id, list_bucket=self.config.list_bucket)
        try:
            creds = self._sts.assume_role(
                RoleArn=self.role_arn, RoleSessionName=f"photolala-{user_id}",
                # Compact: Ceph Pacific's STS refuses a policy with spaces in it.
                Policy=json.dumps(policy, separators=(",", ":")),
                DurationSeconds=self.config.sts_duration_seconds)["Credentials"]
        except Exception as e:  # moto down or refusing: the real backend would answer 5xx
            log.warning("AssumeRole failed: %s", type(e).__name__)
            raise ApiError(502, "sts_unavailable", "could not get credentials from STS")
        with self._lock:
            if self.config.sts_expires_in is None:
                expiration = creds["Expiration"].astimezone(dt.timezone.utc)
            else:
                expiration = _now() + dt.timedelta(seconds=self.config.sts_expires_in)
            for kind, value in (("stsAccessKeyIds", creds["AccessKeyId"]),
                                ("stsSecretKeys", creds["SecretAccessKey"]),
                                ("stsSessionTokens", creds["SessionToken"])):
                self._record_secret(kind, value)
            self._sts_sessions.append({
                "userId": user_id, "accessKeyId": creds["AccessKeyId"], "issuedAt": time.time(),
                "expiration": expiration.timestamp(), "motoExpiration": creds["Expiration"].timestamp(),
                "policy": policy})
            body = {"credentials": {"accessKeyId": creds["AccessKeyId"],
                                    "secretAccessKey": creds["SecretAccessKey"],
                                    "sessionToken": creds["SessionToken"],
                                    "expiration": self._fmt(expiration)},
                    "region": self.region, "bucket": self.bucket}
            if not self.config.omit_endpoint:
                body["endpoint"] = self.config.sts_endpoint or self.moto_endpoint
            return body

    def sts_sessions(self) -> list[dict]:
        with self._lock:
            return [dict(s) for s in self._sts_sessions]

    def credential_expiry(self, access_key_id: str) -> float | None:
        """The `expiration` (epoch seconds) reported with these STS keys, or None if the
        backend never issued them. Lets the fault proxy enforce what moto does not."""
        with self._lock:
            for s in reversed(self._sts_sessions):
                if s["accessKeyId"] == access_key_id:
                    return s["expiration"]
        return None

    # ---- test controls ---------------------------------------------------------------

    def configure(self, **changes) -> dict:
        """Change settings (see BackendConfig), e.g. `configure(pairing_interval=1,
        sts_expires_in=15, sts_endpoint=proxy.url)`. Returns the whole config (camelCase)."""
        with self._lock:
            self.config.update(changes, camel=False)
            return self.config.to_json()

    def set_apple_state(self, state: str, user_id: str | None = None) -> None:
        if state not in APPLE_STATES:
            raise ApiError(400, "invalid_request", f"state must be one of {', '.join(APPLE_STATES)}")
        with self._lock:
            if user_id is None:
                self._apple_state_all = state
                self._apple_state.clear()
            else:
                self._apple_state[user_id] = state

    def fail(self, endpoint: str, status: int | None = 500, error: str = "internal_error",
             message: str | None = None, count: int | None = None, hang: float | None = None,
             drop: bool = False) -> None:
        """Make the next `count` calls (None: all until cleared) of `endpoint` answer
        `status` with `error`, after hanging `hang` seconds if given. status None with a
        hang: hang, then answer normally. `drop`: close the connection without any answer
        (the backend unreachable mid-call; stats record status 0). Applied before
        authentication. A backend down altogether (connection refused) is `stop()`."""
        if endpoint not in ENDPOINTS:
            raise ApiError(400, "invalid_request", f"endpoint must be one of {', '.join(ENDPOINTS)}")
        with self._lock:
            if count is not None and count <= 0:
                self._faults.pop(endpoint, None)
                return
            self._faults[endpoint] = Fault(status, error, message or f"injected {error}", count, hang, drop)

    def clear_faults(self, endpoint: str | None = None) -> None:
        with self._lock:
            if endpoint is None:
                self._faults.clear()
            else:
                self._faults.pop(endpoint, None)
            self._unhang.set()  # let hanging requests go
            self._unhang = threading.Event()

    def stats(self) -> dict:
        """Per endpoint: call count, epoch timestamps and statuses; every pairing with its
        poll timestamps."""
        with self._lock:
            return {"calls": {name: {"count": len(c), "times": [t for t, _ in c],
                                     "statuses": [s for _, s in c]}
                              for name, c in self._calls.items()},
                    "pairings": self.pairings(),
                    "stsSessions": len(self._sts_sessions),
                    "deviceHeaders": {name: list(h) for name, h in self._device_headers.items()},
                    "bodyDeviceIds": list(self._body_device_ids)}

    def secrets(self) -> dict[str, list[str]]:
        """Every secret issued or received so far, by kind."""
        with self._lock:
            return {k: list(v) for k, v in self._secrets.items()}

    def all_secrets(self) -> list[str]:
        return [s for values in self.secrets().values() for s in values]

    def _record_secret(self, kind: str, value: str) -> None:
        with self._lock:
            if value and value not in self._secrets[kind]:
                self._secrets[kind].append(value)

    # ---- HTTP ------------------------------------------------------------------------

    def _make_app(self) -> Flask:
        app = Flask("fake_backend")

        def json_body(required: tuple[str, ...] = ()) -> dict:
            body = request.get_json(silent=True, force=True) if request.data else {}
            if not isinstance(body, dict):
                raise ApiError(400, "invalid_request", "body must be a JSON object")
            for key in required:
                if not isinstance(body.get(key), str) or not body[key]:
                    raise ApiError(400, "invalid_request", f"{key} (a non-empty string) is required")
            return body

        def answer(body: Any, status: int = 200) -> Response:
            return Response(json.dumps(body), status=status, mimetype="application/json")

        @app.errorhandler(ApiError)
        def _api_error(e: ApiError):
            return answer({"error": e.error, "message": e.message}, e.status)

        @app.errorhandler(404)
        def _not_found(e):
            return answer({"error": "not_found", "message": "no such endpoint"}, 404)

        @app.errorhandler(405)
        def _bad_method(e):
            return answer({"error": "method_not_allowed", "message": "method not allowed"}, 405)

        @app.errorhandler(Exception)
        def _crash(e):
            if hasattr(e, "code") and hasattr(e, "get_response"):  # other werkzeug HTTP errors
                return answer({"error": "http_error", "message": str(e.code)}, e.code)
            log.exception("fake backend crashed")
            return answer({"error": "internal_error", "message": type(e).__name__}, 500)

        def api(name: str, handler: Callable[[], tuple[dict, int] | dict]) -> None:
            """Registers an API operation: records the call, applies injected faults."""
            method, path = ENDPOINTS[name]

            def view():
                started = time.time()
                status = 500
                with self._lock:
                    self._device_headers[name].append(request.headers.get("X-Device-ID"))
                try:
                    fault = self._take_fault(name)
                    if fault and fault.hang:
                        self._unhang.wait(fault.hang)
                    if fault and fault.drop:
                        status = 0
                        _drop_connection()
                        return answer({"error": "dropped", "message": "never sent"}, 503)
                    if fault and fault.status is not None:
                        status = fault.status
                        return answer({"error": fault.error, "message": fault.message}, status)
                    result = handler()
                    body, status = result if isinstance(result, tuple) else (result, 200)
                    return answer(body, status)
                except ApiError as e:
                    status = e.status
                    raise
                finally:
                    with self._lock:
                        self._calls[name].append((started, status))

            app.add_url_rule(path, f"api_{name}", view, methods=[method])

        # -- 1. Sign in with an Apple identity token
        def sign_in_apple():
            body = json_body(("identityToken",))
            for optional in ("authorizationCode", "deviceName"):
                if optional in body and not isinstance(body[optional], str):
                    raise ApiError(400, "invalid_request", f"{optional} must be a string")
            self._record_secret("identityTokens", body["identityToken"])
            if body.get("authorizationCode"):
                self._record_secret("authorizationCodes", body["authorizationCode"])
            device_id = self._body_device_id(body)
            sub = self._verify_identity_token(body["identityToken"])
            self._record_secret("appleSubjects", sub)
            with self._lock:
                self._body_device_ids.append({"endpoint": "apple", "deviceId": device_id})
            return self._issue_session(user_id_for(sub), device_id=device_id)

        # -- 2. Pairing (RFC 8628)
        def device_authorization():
            body = json_body()
            name = body.get("deviceName", "")
            if not isinstance(name, str):
                raise ApiError(400, "invalid_request", "deviceName must be a string")
            device_id = self._body_device_id(body)
            with self._lock:
                self._body_device_ids.append({"endpoint": "device", "deviceId": device_id})
                device_code = _secrets.token_urlsafe(32)
                user_code = self._new_user_code()
                interval, expires_in = self.config.pairing_interval, self.config.pairing_expires_in
                self._pairings[device_code] = {
                    "deviceCode": device_code, "userCode": user_code, "deviceName": name, "deviceId": device_id,
                    "status": "pending", "userId": None, "createdAt": time.time(),
                    "expiresAt": time.time() + expires_in, "interval": interval, "polls": [],
                    "answers": []}
                self._record_secret("deviceCodes", device_code)
            return {"deviceCode": device_code, "userCode": user_code,
                    "verificationUri": f"{self.url}/pair",
                    "verificationUriComplete": f"{self.url}/pair?code={user_code}",
                    "expiresIn": expires_in, "interval": interval}

        def device_token():
            body = json_body(("deviceCode",))
            with self._lock:
                p = self._pairings.get(body["deviceCode"])
                if p is None:
                    raise ApiError(400, "expired_token", "unknown or already used device code")
                now = time.time()
                last = p["polls"][-1] if p["polls"] else None
                p["polls"].append(now)

                def reply(error: str, message: str):
                    p["answers"].append(error)
                    raise ApiError(400, error, message)

                if now >= p["expiresAt"]:
                    p["status"] = "expired"
                    reply("expired_token", "the pairing code expired; start again")
                # RFC 8628 3.5: too fast -> slow_down, and the interval grows by 5 s for
                # this and every later request.
                if last is not None and now - last < p["interval"] - self.config.slow_down_tolerance:
                    p["interval"] += 5
                    reply("slow_down", f"polling too fast; interval is now {p['interval']} s")
                if p["status"] == "denied":
                    reply("access_denied", "the user declined the pairing")
                if p["status"] == "pending":
                    reply("authorization_pending", "waiting for the user to confirm the code")
                # approved: the device code is single-use.
                p["status"] = "paired"
                p["answers"].append("paired")
                del self._pairings[body["deviceCode"]]
                self._pairings["used:" + body["deviceCode"]] = p
            return self._issue_session(p["userId"], device_id=p.get("deviceId"))

        # -- 3. Refresh
        def refresh():
            body = json_body(("refreshToken",))
            with self._lock:
                user_id = self._refresh.get(body["refreshToken"])
                if user_id is None:
                    raise ApiError(401, "invalid_grant", "refresh token unknown, rotated or revoked")
                device_id = self._refresh_device.get(body["refreshToken"])
                self._check_device(device_id)
                grant = self._grant_of_refresh[body["refreshToken"]]["grant"]
                if self.config.rotate_refresh_tokens:
                    del self._refresh[body["refreshToken"]]  # the old one dies now
                    session = self._issue_session(user_id, device_id=device_id, grant=grant)
                else:
                    session = self._issue_session(user_id, keep_refresh=body["refreshToken"], device_id=device_id,
                                                  grant=grant)
            session.pop("userId")
            return session

        # -- 4. STS
        def sts_token():
            return self._vend(self._bearer_user())

        # -- 5. Apple credential state
        def credential_state():
            user_id = self._bearer_user()
            with self._lock:
                state = self._apple_state.get(user_id, self._apple_state_all)
            return {"state": state, "checkedAt": self._fmt(_now())}

        # -- 6. Sign out: revoke the sign-in
        def revoke():
            body = json_body(("refreshToken",))
            return self._revoke(body["refreshToken"], request.headers.get("X-Device-ID"))

        api("apple", sign_in_apple)
        api("device", device_authorization)
        api("device-token", device_token)
        api("refresh", refresh)
        api("sts-token", sts_token)
        api("credential-state", credential_state)
        api("revoke", revoke)

        # -- the page verificationUri points at (for a person trying the demo by hand)
        @app.get("/pair")
        def pair_page():
            code = request.args.get("code", "")
            html = ("<!doctype html><title>Photolala pairing (fake)</title>"
                    "<h1>Pair a NAS</h1><form method=post>"
                    f"<label>Code <input name=code value='{_html(code)}'></label> "
                    "<label>Apple subject <input name=sub value='apple-demo-user'></label> "
                    "<button name=action value=approve>Approve</button> "
                    "<button name=action value=deny>Deny</button></form>")
            return Response(html, mimetype="text/html")

        @app.post("/pair")
        def pair_submit():
            code, action = request.form.get("code", ""), request.form.get("action", "approve")
            if action == "deny":
                self.deny_pairing(code)
                return Response("Denied.", mimetype="text/plain")
            self.approve_pairing(code, request.form.get("sub") or "apple-demo-user")
            return Response("Approved. The NAS will be signed in at its next poll.", mimetype="text/plain")

        # -- /_test/ controls (JSON in, JSON out)
        def control(path: str, methods=("POST",)):
            def register(fn):
                app.add_url_rule(f"/_test/{path}", f"test_{path}", fn, methods=list(methods))
                return fn
            return register

        @control("health", ("GET",))
        def _health():
            return answer({"ok": True})

        @control("identity-token")
        def _mint():
            b = json_body(("sub",))
            token = self.mint_identity_token(
                b["sub"], aud=b.get("aud"), iss=b.get("iss", APPLE_ISSUER),
                expires_in=b.get("expiresIn", 600), bad_signature=bool(b.get("badSignature")))
            return answer({"identityToken": token, "userId": user_id_for(b["sub"])})

        @control("apple/keys", ("GET",))
        def _jwks():
            return answer(self.apple_jwks())

        @control("login")
        def _login():
            # A session without the identity-token round trip (for seeding tests).
            sub = json_body(("sub",))["sub"]
            self._record_secret("appleSubjects", sub)
            return answer(self._issue_session(user_id_for(sub)))

        @control("pairing", ("GET",))
        def _pairings():
            return answer({"pairings": self.pairings()})

        @control("pairing/approve")
        def _approve():
            b = json_body(("userCode",))
            return answer({"userId": self.approve_pairing(b["userCode"], b.get("sub") or "apple-demo-user")})

        @control("pairing/deny")
        def _deny():
            self.deny_pairing(json_body(("userCode",))["userCode"])
            return answer({})

        @control("pairing/expire")
        def _expire():
            return answer({"expired": self.expire_pairing(json_body().get("userCode"))})

        @control("config", ("GET", "POST"))
        def _config():
            if request.method == "POST":
                with self._lock:
                    self.config.update(json_body(), camel=True)
            return answer(self.config.to_json())

        @control("apple-state")
        def _apple_state():
            b = json_body(("state",))
            self.set_apple_state(b["state"], b.get("userId"))
            return answer({})

        @control("fail")
        def _fail():
            b = json_body(("endpoint",))
            self.fail(b["endpoint"], b.get("status", 500), b.get("error", "internal_error"),
                      b.get("message"), b.get("count"), b.get("hang"), bool(b.get("drop")))
            return answer({})

        @control("clear")
        def _clear():
            self.clear_faults(json_body().get("endpoint"))
            return answer({})

        @control("expire-access-tokens")
        def _expire_access():
            return answer({"expired": self.expire_access_tokens(json_body().get("userId"))})

        @control("revoke-refresh-tokens")
        def _revoke_refresh():
            return answer({"revoked": self.revoke_refresh_tokens(json_body().get("userId"))})

        @control("revocations", ("GET",))
        def _revocations():
            return answer({"revocations": self.revocations()})

        @control("stats", ("GET",))
        def _stats():
            return answer(self.stats())

        @control("secrets", ("GET",))
        def _secrets_view():
            s = self.secrets()
            return answer(s | {"all": [v for values in s.values() for v in values]})

        @control("sts-sessions", ("GET",))
        def _sts_sessions():
            return answer({"sessions": self.sts_sessions()})

        @control("credential-expiry/<access_key_id>", ("GET",))
        def _credential_expiry(access_key_id: str):
            return answer({"expiration": self.credential_expiry(access_key_id)})

        @control("reset")
        def _reset():
            self.reset()
            return answer({})

        return app

    def _take_fault(self, name: str) -> Fault | None:
        with self._lock:
            f = self._faults.get(name)
            if f is None:
                return None
            if f.remaining is not None:
                f.remaining -= 1
                if f.remaining <= 0:
                    del self._faults[name]
            return f


def _drop_connection() -> None:
    """Shuts the request's connection down both ways: the client reads end-of-file with
    no answer at all. Writing the answer that follows then fails with EPIPE, which
    werkzeug takes for a client gone away (no traceback, nothing sent)."""
    sock = request.environ.get("werkzeug.socket")
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _html(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace("'", "&#39;").replace('"', "&quot;")


_RSA_KEYS: dict[int, rsa.RSAPrivateKey] = {}
_RSA_LOCK = threading.Lock()


def _cached_rsa_key(slot: int) -> rsa.RSAPrivateKey:
    # Generating 2048-bit keys takes ~50 ms each; one pair per process is plenty (each
    # backend still gets its own kid, so tokens of one backend fail on another).
    with _RSA_LOCK:
        if slot not in _RSA_KEYS:
            _RSA_KEYS[slot] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return _RSA_KEYS[slot]


# ---- script mode ---------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fake Photolala backend (tests and demos).")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free)")
    ap.add_argument("--client-id", default=DEFAULT_CLIENT_ID)
    ap.add_argument("--moto-endpoint")
    ap.add_argument("--backend-key")
    ap.add_argument("--backend-secret")
    ap.add_argument("--role-arn")
    ap.add_argument("--with-moto", action="store_true",
                    help="start a moto_server too; stdout line 1 is then a JSON object")
    ap.add_argument("--with-proxy", action="store_true",
                    help="with --with-moto: put a fault proxy in front of moto and hand it out as the S3 endpoint")
    ap.add_argument("--pairing-interval", type=int)
    ap.add_argument("--sts-expires-in", type=float)
    ap.add_argument("--quiet", action="store_true", help="no request log on stderr")
    args = ap.parse_args(argv)
    if args.with_proxy and not args.with_moto:
        ap.error("--with-proxy needs --with-moto (or run fault_proxy.py yourself)")
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, stream=sys.stderr,
                        format="fake_backend %(levelname)s %(message)s")

    # Signals first: a SIGTERM that arrives while moto is still starting must still stop
    # it (a moto_server left behind would hold its port).
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())

    moto = proxy = backend = None
    try:
        if args.with_moto:
            moto = MotoServer().start()
            backend = FakeBackend(moto, port=args.port, client_id=args.client_id)
        else:
            if not all((args.moto_endpoint, args.backend_key, args.backend_secret, args.role_arn)):
                ap.error("give --with-moto, or all of --moto-endpoint --backend-key --backend-secret --role-arn")
            backend = FakeBackend(moto_endpoint=args.moto_endpoint, backend_access_key=args.backend_key,
                                  backend_secret_key=args.backend_secret, role_arn=args.role_arn,
                                  port=args.port, client_id=args.client_id)
        backend.start()
        if args.with_proxy:
            try:
                from .fault_proxy import FaultProxy
            except ImportError:
                from support.fault_proxy import FaultProxy
            proxy = FaultProxy(moto.endpoint).start()
            backend.configure(sts_endpoint=proxy.url)
        if args.pairing_interval is not None:
            backend.configure(pairing_interval=args.pairing_interval)
        if args.sts_expires_in is not None:
            backend.configure(sts_expires_in=args.sts_expires_in)

        if moto:
            # For scripts: everything needed to drive and inspect the stack. The admin keys
            # belong to the backend's IAM user (for reading objects back), never to the daemon.
            print(json.dumps({"backend": backend.url, "moto": moto.endpoint,
                              "proxy": proxy.url if proxy else None,
                              "s3Endpoint": proxy.url if proxy else moto.endpoint,
                              "region": moto.region, "bucket": moto.bucket, "roleArn": moto.role_arn,
                              "clientId": backend.client_id, "adminAccessKeyId": moto.backend_access_key,
                              "adminSecretAccessKey": moto.backend_secret_key, "motoLog": str(moto.log_path)}),
                  flush=True)
        else:
            print(backend.url, flush=True)
        done.wait()
    finally:
        for part in (proxy, backend, moto):
            if part:
                part.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
