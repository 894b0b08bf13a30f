"""The account key and the recovery key as a reader outside photolalad sees them, written
from docs/manifest.md and PLAN.md's "crypto design" with Python's `cryptography` alone
(no code shared with the daemon): parse and format a recovery key, derive the keys with
HKDF-SHA256, unwrap the key object `metadata/{userId}/keys/account-key`, open a sealed
object. The tests read the bucket with it given only the recovery key."""
from __future__ import annotations

import hashlib
import hmac

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CHECK_LABEL = b"photolala recovery key check v1"
KEY_MAGIC = b"PLAKEY\x00\x01"
KEY_MAGIC_V2 = b"PLAKEY\x00\x02"
SEALED_MAGIC = b"PLMANIF\x02"
RECORD_MAGIC = b"PLMANIF\x03"
NONCE = 12
WRAP = NONCE + 40 + 16          # a wrap of the account key: nonce, K and createdAt, tag
PREVIOUS = NONCE + 32 + 16      # the previous account key, sealed under T
SUCCESSOR = 32                  # an HMAC-SHA256 by the previous account key
PROOF = NONCE + 8 + 16          # the generation, sealed under P


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


def proof_key(account_key: bytes) -> bytes:
    return hkdf(account_key, b"photolala key object proof v1", 32)


def previous_key(account_key: bytes) -> bytes:
    return hkdf(account_key, b"photolala key object previous key v1", 32)


def successor_key(account_key: bytes) -> bytes:
    return hkdf(account_key, b"photolala key object successor v1", 32)


def wrapping_key(recovery_secret: bytes, user_id: str) -> bytes:
    return hkdf(recovery_secret, b"photolala recovery wrap v1", 32, salt=user_id.encode())


def key_object_key(user_id: str) -> str:
    return f"metadata/{user_id}/keys/account-key"


# ---- the objects -----------------------------------------------------------------------

def layout(data: bytes) -> dict:
    """Where a key object's parts are (docs/manifest.md "The key object"): version 1 is the
    wrap alone; version 2 the wrap, a sections byte, the previous account key (bit 0), the
    endorsement by it (bit 1), and the proof last."""
    if data[:7] != KEY_MAGIC[:7] or len(data) < 8:
        raise Refused("layout", "not a key object")
    if data[7] == 1:
        if len(data) != 8 + WRAP:
            raise Refused("layout", "not a key object")
        return {"version": 1}
    if data[7] != 2 or len(data) <= 8 + WRAP:
        raise Refused("layout", f"key object version {data[7]}")
    sections = data[8 + WRAP]
    if sections & ~3:
        raise Refused("layout", "unknown sections")
    at, out = 8 + WRAP + 1, {"version": 2}
    if sections & 1:
        out["previous"], at = at, at + PREVIOUS
    if sections & 2:
        out["successor"], at = at, at + SUCCESSOR
    out["proof"] = at
    if len(data) != at + PROOF:
        raise Refused("layout", "not a key object")
    return out


def open_wrap(wrap: bytes, recovery_secret: bytes, user_id: str, header: bytes, object_key: str) -> tuple[bytes, int]:
    """(account key, createdAt) from a wrap whose associated data is `header` ‖ the object key."""
    try:
        plain = AESGCM(wrapping_key(recovery_secret, user_id)).decrypt(wrap[:NONCE], wrap[NONCE:], header + object_key.encode())
    except InvalidTag:
        raise Refused("key", "the recovery key does not open it") from None
    return plain[:32], int.from_bytes(plain[32:40], "big", signed=True)


def proof(data: bytes, account_key: bytes, user_id: str) -> int | None:
    """The generation, if the version-2 object's proof opens under `account_key`."""
    lay = layout(data)
    if lay["version"] != 2:
        return None
    at = lay["proof"]
    try:
        plain = AESGCM(proof_key(account_key)).decrypt(data[at:at + NONCE], data[at + NONCE:],
                                                       data[:at] + key_object_key(user_id).encode())
    except InvalidTag:
        return None
    return int.from_bytes(plain, "big")


def endorsed_by(data: bytes, previous_account_key: bytes, user_id: str) -> bool:
    """Whether the object carries an endorsement by `previous_account_key` (a new account key)."""
    lay = layout(data)
    if "successor" not in lay:
        return False
    at = lay["successor"]
    want = hmac.new(successor_key(previous_account_key), data[:8 + WRAP] + key_object_key(user_id).encode(), hashlib.sha256).digest()
    return hmac.compare_digest(want, data[at:at + SUCCESSOR])


def open_key_object(data: bytes, recovery_secret: bytes, user_id: str) -> dict:
    """{key, created, version, generation, previous}: what a recovery key opens of a key
    object; a version-2 object whose proof does not open under the key it holds is refused."""
    lay = layout(data)
    key, created = open_wrap(data[8:8 + WRAP], recovery_secret, user_id, data[:8], key_object_key(user_id))
    out = {"key": key, "created": created, "version": lay["version"], "generation": 0, "previous": None}
    if lay["version"] == 2:
        g = proof(data, key, user_id)
        if g is None:
            raise Refused("proof", "the key object's proof does not open under the key it holds")
        out["generation"] = g
        if "previous" in lay:
            at = lay["previous"]
            try:
                out["previous"] = AESGCM(previous_key(key)).decrypt(data[at:at + NONCE], data[at + NONCE:at + PREVIOUS],
                                                                    data[:at] + key_object_key(user_id).encode())
            except InvalidTag:
                raise Refused("proof", "the previous key does not open") from None
    return out


def wrap_key_object(account_key: bytes, created: int, recovery_secret: bytes, user_id: str, generation: int,
                    previous: bytes | None = None, endorsed_by_key: bytes | None = None,
                    nonces: tuple[bytes, bytes, bytes] | None = None) -> bytes:
    """A version-2 key object (the layout above); fixed nonces for the vectors."""
    import os
    n = nonces or (os.urandom(NONCE), os.urandom(NONCE), os.urandom(NONCE))
    okey = key_object_key(user_id).encode()
    out = KEY_MAGIC_V2 + n[0] + AESGCM(wrapping_key(recovery_secret, user_id)).encrypt(
        n[0], account_key + created.to_bytes(8, "big", signed=True), KEY_MAGIC_V2 + okey)
    out += bytes([(1 if previous else 0) | (2 if endorsed_by_key else 0)])
    if previous:
        out += n[1] + AESGCM(previous_key(account_key)).encrypt(n[1], previous, out + okey)
    if endorsed_by_key:
        out += hmac.new(successor_key(endorsed_by_key), out[:8 + WRAP] + okey, hashlib.sha256).digest()
    return out + n[2] + AESGCM(proof_key(account_key)).encrypt(n[2], generation.to_bytes(8, "big"), out + okey)


def unwrap(data: bytes, recovery_secret: bytes, user_id: str) -> tuple[bytes, int]:
    """(account key, the recovery key's createdAt in Unix ms) from the key object (version 1
    or 2)."""
    opened = open_key_object(data, recovery_secret, user_id)
    return opened["key"], opened["created"]


def open_sealed(data: bytes, account_key: bytes, object_key: str) -> bytes:
    """The plaintext of a sealed object stored at `object_key`: `PLMANIF` 0x02, or a device
    record `PLMANIF` 0x03 (a wrap length byte, the wrap, then the seal over everything before)."""
    if data[:8] == RECORD_MAGIC:
        if len(data) < 9 or data[8] not in (0, WRAP):
            raise Refused("layout", f"{object_key} is not a sealed record")
        at = 9 + data[8]
    elif data[:8] == SEALED_MAGIC:
        at = 8
    else:
        raise Refused("layout", f"{object_key} is not a sealed object")
    if len(data) < at + NONCE + 16:
        raise Refused("layout", f"{object_key} is too short")
    try:
        return AESGCM(metadata_key(account_key)).decrypt(data[at:at + NONCE], data[at + NONCE:], data[:at] + object_key.encode())
    except InvalidTag:
        raise Refused("key", f"{object_key} does not open with this account key") from None


def record_wrap(data: bytes, recovery_secret: bytes, user_id: str, object_key: str) -> tuple[bytes, int] | None:
    """The account key a device record keeps wrapped under the recovery key (if it has a
    wrap and the record then opens under that key)."""
    if data[:8] != RECORD_MAGIC or len(data) < 9 + WRAP or data[8] != WRAP:
        return None
    try:
        key, created = open_wrap(data[9:9 + WRAP], recovery_secret, user_id, data[:9], object_key)
        open_sealed(data, key, object_key)
    except Refused:
        return None
    return key, created


def seal_record(plaintext: bytes, account_key: bytes, object_key: str, wrap: tuple[bytes, int, str] | None,
                nonces: tuple[bytes, bytes] | None = None) -> bytes:
    """A device record `PLMANIF` 0x03; `wrap`: (recovery secret, createdAt, userId) or None."""
    import os
    n = nonces or (os.urandom(NONCE), os.urandom(NONCE))
    if wrap:
        secret, created, user = wrap
        head = RECORD_MAGIC + bytes([WRAP])
        out = head + n[0] + AESGCM(wrapping_key(secret, user)).encrypt(n[0], account_key + created.to_bytes(8, "big", signed=True),
                                                                      head + object_key.encode())
    else:
        out = RECORD_MAGIC + b"\x00"
    return out + n[1] + AESGCM(metadata_key(account_key)).encrypt(n[1], plaintext, out + object_key.encode())
