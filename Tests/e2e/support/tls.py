"""A test CA made at run time, and the server certificates the HTTPS test stack needs:
one for the servers on loopback (127.0.0.1 and localhost), and the bad ones a daemon
must refuse (for another host, expired, not valid yet, from an unknown CA).

    ca = TestCA(tmp_dir)                        # ca.pem in tmp_dir: what tls.ca_file names
    server = ca.issue("loopback")               # server.cert_path, server.key_path
    ctx = server.server_context()               # an ssl.SSLContext for a Python server
    ca.client_context()                         # an ssl.SSLContext that trusts only this CA

Keys are EC P-256 (fast to make); every file lives in the folder given, which the caller
removes. Nothing here touches the system's CA store.
"""
from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK = ("127.0.0.1", "localhost")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass
class ServerCert:
    """A server certificate and its key, as PEM files."""
    cert_path: Path
    key_path: Path
    hosts: tuple[str, ...]
    ca_path: Path

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(self.cert_path), str(self.key_path))
        return ctx

    def pem_bundle(self) -> Path:
        """Certificate and key in one file (what Ceph's beast frontend takes as ssl_certificate)."""
        path = self.cert_path.with_suffix(".bundle.pem")
        path.write_bytes(self.cert_path.read_bytes() + self.key_path.read_bytes())
        return path


class TestCA:
    """A throw-away certificate authority; `path` is its certificate (PEM)."""

    __test__ = False  # not a pytest test class

    def __init__(self, folder: str | Path, name: str = "Photolala Test CA"):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        self.cert = (x509.CertificateBuilder()
                     .subject_name(_name(name)).issuer_name(_name(name))
                     .public_key(self._key.public_key())
                     .serial_number(x509.random_serial_number())
                     .not_valid_before(now - dt.timedelta(hours=1))
                     .not_valid_after(now + dt.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                                  key_encipherment=False, data_encipherment=False,
                                                  key_agreement=False, key_cert_sign=True, crl_sign=True,
                                                  encipher_only=False, decipher_only=False), critical=True)
                     .sign(self._key, hashes.SHA256()))
        slug = "".join(c if c.isalnum() else "-" for c in name.lower())
        self.path = self.folder / f"{slug}.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, label: str, hosts: tuple[str, ...] | list[str] = LOOPBACK, *,
              not_before: dt.datetime | None = None, not_after: dt.datetime | None = None) -> ServerCert:
        """A server certificate for `hosts` (names or IP addresses), valid from an hour ago
        for two days unless told otherwise; files named after `label`."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        hosts = tuple(hosts)
        cert = (x509.CertificateBuilder()
                .subject_name(_name(hosts[0] if hosts else label)).issuer_name(self.cert.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(not_before or now - dt.timedelta(hours=1))
                .not_valid_after(not_after or now + dt.timedelta(days=2))
                .add_extension(x509.SubjectAlternativeName([_alt_name(h) for h in hosts]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .sign(self._key, hashes.SHA256()))
        cert_path = self.folder / f"{label}.crt"
        key_path = self.folder / f"{label}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        key_path.chmod(0o600)
        return ServerCert(cert_path, key_path, hosts, self.path)

    def expired(self, label: str = "expired", hosts=LOOPBACK) -> ServerCert:
        now = _now()
        return self.issue(label, hosts, not_before=now - dt.timedelta(days=3), not_after=now - dt.timedelta(days=1))

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.path))
