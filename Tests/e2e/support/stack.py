"""A real S3/STS/IAM for the tests: `moto_server` on loopback with authentication on.

moto answers every request without checking anything until it has served
`INITIAL_NO_AUTH_ACTION_COUNT` authenticated-API actions; from then on every request must
carry a valid SigV4 signature made with the keys of an IAM user it knows, or with
assumed-role credentials plus their exact session token, and it evaluates the caller's
IAM policies. `MotoServer` spends exactly those free actions on the setup below (so not a
single unchecked request is left over for the code under test), then checks that an
unsigned request is refused before handing the server out.

After setup the world looks like a small AWS account:

- IAM user `photolala-backend` with an access key: what the Photolala backend runs as.
  Its inline policy allows `sts:AssumeRole` on the uploader role and `s3:*` on the bucket
  (the latter only so tests can read objects back through `s3_admin()`).
- IAM role `photolala-uploader`, trusted by that user, allowed `s3:*` on bucket
  `photolala` and its objects. The backend assumes it with a per-user session policy.
- Bucket `photolala` in `us-east-1`.

What moto does and does not check once setup is done (moto 5.2.1, measured):

- A request signed with unknown keys, a wrong signature, or assumed-role keys with a
  missing or wrong session token: 403 (InvalidAccessKeyId, SignatureDoesNotMatch,
  InvalidToken).
- A request with no Authorization header at all: 500, not 403 (moto's IAM check crashes
  on the missing header); nothing is written.
- It does not enforce session policies, credential expiry, Content-MD5, or the payload
  hash against the body; see `shared/design.md` ("Real parts, not mocks").

Over HTTPS (`MotoServer(tls=ca.issue(...))`, see support/tls.py) it serves the same API
with that certificate (`moto_server -c CERT -k KEY`); every client here then verifies it
against the test CA (`ca_file`), never with verification off.
- `/moto-api/` (reset, reset-auth, data.json) is open to anyone: a POST to
  `/moto-api/reset-auth` turns auth off again. Nothing in the daemon may call it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import boto3
import requests
from botocore.config import Config

from .run import die_with_parent
from .run import free_port  # noqa: F401  (re-exported: rgw.py and tests import it from here)

REGION = "us-east-1"
BUCKET = "photolala"
ROLE_NAME = "photolala-uploader"
BACKEND_USER = "photolala-backend"

# Any keys work for the setup calls (moto checks nothing while the free count lasts);
# these are AWS's documentation example keys, recognisably fake. After setup moto refuses
# them (it only knows IAM users' keys and assumed-role keys).
_SETUP_KEY = "AKIAIOSFODNN7EXAMPLE"
_SETUP_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

# The number of authenticated-API actions `_setup()` performs, one per boto3 call below
# (create_user, create_access_key, put_user_policy, create_role, put_role_policy,
# create_bucket). Measured against moto 5.2.1: with 5 the last setup call is refused, with
# 7 an unsigned request after setup still succeeds. Requests to /moto-api/ (the readiness
# probe) do not count. If moto ever counts differently, `start()` fails loudly instead of
# leaving auth half-off.
SETUP_ACTIONS = 6




_BOTO_SESSION = None
_BOTO_LOCK = threading.Lock()


def boto_client(service: str, **kwargs):
    """A boto3 client from one shared session: the first client loads botocore's service
    models (a few hundred ms), later ones reuse them. Session client creation is not
    thread-safe, hence the lock; the clients themselves are."""
    global _BOTO_SESSION
    with _BOTO_LOCK:
        if _BOTO_SESSION is None:
            _BOTO_SESSION = boto3.session.Session()
        return _BOTO_SESSION.client(service, **kwargs)


def _moto_server_command() -> list[str]:
    # moto_server with its SigV4 check fixed for listings (getmoto/moto#5948): see
    # moto_server_fixed.py. The daemon's signer is never weakened for moto's sake.
    return [os.environ.get("PYTHON", sys.executable or "python3"), str(Path(__file__).with_name("moto_server_fixed.py"))]


class MotoServer:
    """One `moto_server` subprocess on 127.0.0.1 with the Photolala account set up.

    >>> moto = MotoServer().start()
    >>> moto.endpoint, moto.role_arn
    >>> moto.s3_admin().list_objects_v2(Bucket=moto.bucket)
    >>> moto.stop()
    """

    def __init__(self, port: int = 0, *, bucket: str = BUCKET, region: str = REGION,
                 log_path: str | os.PathLike | None = None, setup_actions: int = SETUP_ACTIONS,
                 tls=None):
        self.port = port or free_port()
        # A support.tls.ServerCert: serve HTTPS with it. `ca_file` is what clients trust.
        self.tls = tls
        self.ca_file: str | None = str(tls.ca_path) if tls else None
        self.host = "127.0.0.1"
        self.bucket = bucket
        self.region = region
        self.setup_actions = setup_actions
        self._own_log_dir = None
        if log_path is None:
            self._own_log_dir = tempfile.mkdtemp(prefix="pl-moto-")
            log_path = os.path.join(self._own_log_dir, "moto.log")
        # moto's access log (method, path, status) goes here, never to a pipe that could fill.
        # A temporary one is deleted by stop(); read it before stopping.
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.backend_access_key: str | None = None
        self.backend_secret_key: str | None = None
        self.backend_user_arn: str | None = None
        self.role_arn: str | None = None
        self.account_id: str | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    # ---- lifecycle -------------------------------------------------------------------

    def start(self, timeout: float = 20.0) -> "MotoServer":
        env = dict(os.environ)
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(self.setup_actions)
        # moto must not pick up real AWS settings from the developer's environment.
        for k in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
            env.pop(k, None)
        self._log_file = open(self.log_path, "ab")
        tls_args = ["-c", str(self.tls.cert_path), "-k", str(self.tls.key_path)] if self.tls else []
        self.proc = subprocess.Popen(
            _moto_server_command() + ["-H", self.host, "-p", str(self.port)] + tls_args,
            stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, env=env,
            preexec_fn=die_with_parent)
        try:
            self._wait_ready(timeout)
            self._setup()
            self._verify_auth_enforced()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        # /moto-api/ is moto's own management API: it answers without touching the
        # free-action counter, so probing it does not eat into the setup budget.
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                r = requests.get(f"{self.endpoint}/moto-api/data.json", timeout=1, verify=self.ca_file or True)
                if r.status_code == 200:
                    return
            except requests.RequestException as e:
                last = e
            time.sleep(0.05)
        raise RuntimeError(f"moto_server did not answer on {self.endpoint} within {timeout}s: {last}")

    def _client(self, service: str, key: str, secret: str, token: str | None = None):
        return boto_client(
            service, endpoint_url=self.endpoint, region_name=self.region,
            aws_access_key_id=key, aws_secret_access_key=secret, aws_session_token=token,
            verify=self.ca_file,
            # No retries during setup: a retry would spend a second free action.
            config=Config(retries={"total_max_attempts": 1, "mode": "standard"},
                          s3={"addressing_style": "path"}),
        )

    def _setup(self) -> None:
        """Exactly SETUP_ACTIONS moto actions; keep the count above in step with this."""
        iam = self._client("iam", _SETUP_KEY, _SETUP_SECRET)
        s3 = self._client("s3", _SETUP_KEY, _SETUP_SECRET)

        user = iam.create_user(UserName=BACKEND_USER)["User"]                         # 1
        self.backend_user_arn = user["Arn"]
        self.account_id = user["Arn"].split(":")[4]
        key = iam.create_access_key(UserName=BACKEND_USER)["AccessKey"]               # 2
        self.backend_access_key = key["AccessKeyId"]
        self.backend_secret_key = key["SecretAccessKey"]
        self.role_arn = f"arn:aws:iam::{self.account_id}:role/{ROLE_NAME}"
        bucket_arn = f"arn:aws:s3:::{self.bucket}"
        iam.put_user_policy(                                                          # 3
            UserName=BACKEND_USER, PolicyName="photolala-backend",
            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": self.role_arn},
                # Only so the tests can read objects back (s3_admin); the daemon never
                # sees these keys.
                {"Effect": "Allow", "Action": "s3:*", "Resource": [bucket_arn, f"{bucket_arn}/*"]},
            ]}))
        iam.create_role(                                                              # 4
            RoleName=ROLE_NAME,
            # moto checks the trust policy's principal against the caller's ARN.
            AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Principal": {"AWS": self.backend_user_arn}, "Action": "sts:AssumeRole"},
            ]}))
        iam.put_role_policy(                                                          # 5
            RoleName=ROLE_NAME, PolicyName="photolala-uploader",
            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "s3:*", "Resource": [bucket_arn, f"{bucket_arn}/*"]},
            ]}))
        s3.create_bucket(Bucket=self.bucket)                                          # 6

    def _verify_auth_enforced(self) -> None:
        # If moto counted fewer actions than we assumed, this request (signed with keys moto
        # has never heard of) would be served; refuse to hand out a server with auth still
        # off. (An entirely unsigned request would not do as a probe: moto answers it with
        # a 500, see the module notes.)
        from botocore.exceptions import ClientError
        try:
            self._client("s3", _SETUP_KEY, _SETUP_SECRET).head_bucket(Bucket=self.bucket)
        except ClientError as e:
            if e.response["ResponseMetadata"]["HTTPStatusCode"] == 403:
                return
            raise
        raise RuntimeError(
            f"moto still serves requests with unknown keys after setup; "
            f"SETUP_ACTIONS={self.setup_actions} no longer matches moto's counting")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
        if getattr(self, "_log_file", None):
            self._log_file.close()
            self._log_file = None
        # A temporary log folder we made goes with the server; pass log_path to keep a log.
        if self._own_log_dir:
            shutil.rmtree(self._own_log_dir, ignore_errors=True)
            self._own_log_dir = None

    def __enter__(self) -> "MotoServer":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- clients for tests -----------------------------------------------------------

    def s3_admin(self):
        """A boto3 S3 client (path-style) signed with the backend user's keys, for reading
        objects back and seeding or cleaning the bucket."""
        if getattr(self, "_admin", None) is None:
            self._admin = self._client("s3", self.backend_access_key, self.backend_secret_key)
        return self._admin

    def sts_backend(self):
        """A boto3 STS client signed with the backend user's keys (what the fake backend uses)."""
        return self._client("sts", self.backend_access_key, self.backend_secret_key)

    def s3_with(self, credentials: dict, endpoint: str | None = None, **config):
        """A boto3 S3 client from a backend-api `credentials` object (accessKeyId,
        secretAccessKey, sessionToken), against `endpoint` (default: moto itself)."""
        return boto_client(
            "s3", endpoint_url=endpoint or self.endpoint, region_name=self.region,
            aws_access_key_id=credentials["accessKeyId"],
            aws_secret_access_key=credentials["secretAccessKey"],
            aws_session_token=credentials["sessionToken"], verify=self.ca_file,
            config=Config(s3={"addressing_style": "path"}, **({"retries": {"total_max_attempts": 1, "mode": "standard"}} | config)),
        )

    def empty_bucket(self) -> None:
        """Delete every object and abort every multipart upload (between tests)."""
        s3 = self.s3_admin()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
        for u in s3.list_multipart_uploads(Bucket=self.bucket).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=self.bucket, Key=u["Key"], UploadId=u["UploadId"])
