"""The account key and the recovery key as a reader outside photolalad sees them, written
from docs/manifest.md and PLAN.md's "crypto design" with Python's `cryptography` alone
(no code shared with the daemon): parse and format a recovery key, derive the keys with
HKDF-SHA256, unwrap the key object `metadata/{userId}/keys/account-key`, open a sealed
object. The tests read the bucket with it given only the recovery key."""
from __future__ import annotations

import hashlib

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CHECK_LABEL = b"photolala recovery key check v1"
KEY_MAGIC = b"PLAKEY\x00\x01"
SEALED_MAGIC = b"PLMANIF\x02"
NONCE = 12


class Refused(Exception):
    """A key or an object that does not check out; `kind` says which rule refused it."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


# ---- the recovery key ----------------------------------------------------------------

def check(secret: bytes) -> bytes:
    return hashlib.sha256(CHECK_LABEL + secret).digest()[:4]


def format_key(secret: bytes) -> str:
    """16 random bytes -> `XXXX-XXXX-…` (8 groups of 4 Crockford base32 characters)."""
    assert len(secret) == 16
    n = int.from_bytes(secret + check(secret), "big")   # 160 bits, 32 characters of 5
    text = "".join(ALPHABET[(n >> (5 * (31 - i))) & 31] for i in range(32))
    return "-".join(text[i:i + 4] for i in range(0, 32, 4))


def parse_key(text: str) -> bytes:
    """The 16 random bytes of a typed key: any case, `-` and white space ignored, I/L read
    as 1 and O as 0; anything else, a wrong length or a check that fails is refused."""
    values = []
    for ch in text:
        if ch == "-" or ch.isspace():
            continue
        c = ch.upper() if ch.isascii() else ch
        c = {"O": "0", "I": "1", "L": "1"}.get(c, c)
        if c not in ALPHABET:
            raise Refused("character", f"{ch!r} cannot be in a recovery key")
        values.append(ALPHABET.index(c))
    if len(values) != 32:
        raise Refused("length", f"a recovery key has 32 characters, this has {len(values)}")
    n = 0
    for v in values:
        n = n << 5 | v
    raw = n.to_bytes(20, "big")
    if check(raw[:16]) != raw[16:]:
        raise Refused("typo", "the recovery key's check does not match: a typo")
    return raw[:16]


# ---- the derived keys ----------------------------------------------------------------

def hkdf(ikm: bytes, info: bytes, length: int, salt: bytes | None = None) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def fingerprint(account_key: bytes) -> str:
    return hkdf(account_key, b"photolala account key fingerprint v1", 16).hex()


def metadata_key(account_key: bytes) -> bytes:
    return hkdf(account_key, b"photolala metadata v2", 32)


def wrapping_key(recovery_secret: bytes, user_id: str) -> bytes:
    return hkdf(recovery_secret, b"photolala recovery wrap v1", 32, salt=user_id.encode())


def key_object_key(user_id: str) -> str:
    return f"metadata/{user_id}/keys/account-key"


# ---- the objects -----------------------------------------------------------------------

def unwrap(data: bytes, recovery_secret: bytes, user_id: str) -> tuple[bytes, int]:
    """(account key, the recovery key's createdAt in Unix ms) from the key object."""
    if len(data) != 8 + NONCE + 40 + 16 or data[:8] != KEY_MAGIC:
        raise Refused("layout", "not a key object")
    aad = KEY_MAGIC + key_object_key(user_id).encode()
    try:
        plain = AESGCM(wrapping_key(recovery_secret, user_id)).decrypt(data[8:8 + NONCE], data[8 + NONCE:], aad)
    except InvalidTag:
        raise Refused("key", "the recovery key does not open the key object") from None
    return plain[:32], int.from_bytes(plain[32:40], "big", signed=True)


def open_sealed(data: bytes, account_key: bytes, object_key: str) -> bytes:
    """The plaintext of a sealed object stored at `object_key`."""
    if len(data) < 8 + NONCE + 16 or data[:8] != SEALED_MAGIC:
        raise Refused("layout", f"{object_key} is not a sealed object")
    try:
        return AESGCM(metadata_key(account_key)).decrypt(data[8:8 + NONCE], data[8 + NONCE:], SEALED_MAGIC + object_key.encode())
    except InvalidTag:
        raise Refused("key", f"{object_key} does not open with this account key") from None
