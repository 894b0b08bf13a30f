"""The crypto design's fixed vectors (Tests/vectors/vault.json), read by the independent
Python side (support/vault.py, Python's `cryptography`): the recovery key's text and
check, its parsing rules, the HKDF-derived keys, the key object and sealed objects byte
for byte. The Swift side (Tests/VaultTests) must produce the very same bytes, so a
reader built from the docs and the daemon agree. Needs no daemon."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from support import vault

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "vault.json").read_text())


@pytest.mark.parametrize("v", VECTORS["recoveryKeys"], ids=lambda v: v["text"])
def test_recovery_key_text_and_check(v):
    secret = bytes.fromhex(v["secret"])
    assert vault.check(secret).hex() == v["check"]
    assert vault.format_key(secret) == v["text"]
    assert vault.parse_key(v["text"]) == secret
    assert len(v["text"]) == 39 and all(len(g) == 4 for g in v["text"].split("-"))
    assert not set(v["text"]) & set("ILOU")


@pytest.mark.parametrize("v", VECTORS["recoveryParsing"], ids=lambda v: v.get("error", "ok") + ":" + v["input"].strip()[:12])
def test_recovery_key_parsing(v):
    if "secret" in v:
        assert vault.parse_key(v["input"]).hex() == v["secret"]
    else:
        with pytest.raises(vault.Refused) as refused:
            vault.parse_key(v["input"])
        assert refused.value.kind == v["error"]


def test_every_single_character_typo_is_caught():
    """The 32-bit check catches every one-character change of a key (here: all of them)."""
    text = VECTORS["recoveryKeys"][2]["text"].replace("-", "")
    for i in range(32):
        for c in vault.ALPHABET:
            if c != text[i]:
                with pytest.raises(vault.Refused) as refused:
                    vault.parse_key(text[:i] + c + text[i + 1:])
                assert refused.value.kind == "typo"


@pytest.mark.parametrize("v", VECTORS["accountKeys"], ids=lambda v: v["fingerprint"])
def test_account_key_derivations(v):
    k = bytes.fromhex(v["accountKey"])
    assert vault.fingerprint(k) == v["fingerprint"] and len(v["fingerprint"]) == 32
    assert vault.metadata_key(k).hex() == v["metadataKey"]
    # Empty salt and no salt are the same HKDF (HMAC pads the key with zeros): the Swift
    # side passes an empty salt.
    assert vault.hkdf(k, b"photolala metadata v2", 32, salt=b"") == vault.metadata_key(k)


@pytest.mark.parametrize("v", VECTORS["wrappingKeys"], ids=lambda v: v["userId"])
def test_wrapping_key(v):
    assert vault.wrapping_key(bytes.fromhex(v["recoverySecret"]), v["userId"]).hex() == v["wrappingKey"]


@pytest.mark.parametrize("v", VECTORS["keyObjects"], ids=lambda v: v["userId"])
def test_key_object(v):
    data = bytes.fromhex(v["bytes"])
    secret = vault.parse_key(v["recoveryKey"])
    assert v["objectKey"] == vault.key_object_key(v["userId"])
    # The layout, rebuilt from its parts.
    nonce = bytes.fromhex(v["nonce"])
    plain = bytes.fromhex(v["accountKey"]) + v["recoveryCreatedAt"].to_bytes(8, "big")
    aad = vault.KEY_MAGIC + v["objectKey"].encode()
    assert data == vault.KEY_MAGIC + nonce + AESGCM(vault.wrapping_key(secret, v["userId"])).encrypt(nonce, plain, aad)
    assert vault.unwrap(data, secret, v["userId"]) == (bytes.fromhex(v["accountKey"]), v["recoveryCreatedAt"])
    # Another account's prefix, a flipped byte anywhere, another recovery key: refused.
    with pytest.raises(vault.Refused):
        vault.unwrap(data, secret, v["userId"] + "x")
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x01
        with pytest.raises(vault.Refused):
            vault.unwrap(bytes(flipped), secret, v["userId"])
    other = vault.parse_key(VECTORS["recoveryKeys"][3]["text"])
    with pytest.raises(vault.Refused) as refused:
        vault.unwrap(data, other, v["userId"])
    assert refused.value.kind == "key"


@pytest.mark.parametrize("v", VECTORS["sealedObjects"], ids=lambda v: v["what"])
def test_sealed_object(v):
    k = bytes.fromhex(v["accountKey"])
    data = bytes.fromhex(v["bytes"])
    nonce = bytes.fromhex(v["nonce"])
    plain = bytes.fromhex(v["plaintext"])
    assert data == vault.SEALED_MAGIC + nonce + AESGCM(vault.metadata_key(k)).encrypt(nonce, plain, vault.SEALED_MAGIC + v["objectKey"].encode())
    assert len(data) == len(plain) + 36
    assert vault.open_sealed(data, k, v["objectKey"]) == plain
    # Copied to another key, one byte flipped, another account key: refused.
    with pytest.raises(vault.Refused):
        vault.open_sealed(data, k, v["objectKey"].replace("device.json", "device2.json").replace("000001", "000002") + "x")
    for i in (0, 7, 8, 19, 20, len(data) - 1):
        flipped = bytearray(data)
        flipped[i] ^= 0x80
        with pytest.raises(vault.Refused):
            vault.open_sealed(bytes(flipped), k, v["objectKey"])
    with pytest.raises(vault.Refused):
        vault.open_sealed(data, bytes(32), v["objectKey"])


@pytest.mark.parametrize("v", VECTORS["accountKeys"], ids=lambda v: v["fingerprint"])
def test_key_object_keys(v):
    k = bytes.fromhex(v["accountKey"])
    assert vault.proof_key(k).hex() == v["proofKey"]
    assert vault.previous_key(k).hex() == v["previousKey"]
    assert vault.successor_key(k).hex() == v["successorKey"]


@pytest.mark.parametrize("v", VECTORS["keyObjectsV2"], ids=lambda v: v["what"])
def test_key_object_version_2(v):
    """The version-2 key object rebuilt from its parts (docs/manifest.md "The key object"):
    the wrap of version 1 under the version byte 2, the sections byte, the previous account
    key (sealed under T), the endorsement (HMAC under E of the previous key), the proof (the
    generation sealed under P), each section's associated data every byte before it."""
    data = bytes.fromhex(v["bytes"])
    secret = vault.parse_key(v["recoveryKey"])
    k = bytes.fromhex(v["accountKey"])
    okey = v["objectKey"].encode()
    n0, n1, n2 = (bytes.fromhex(n) for n in v["nonces"])
    magic = b"PLAKEY\x00\x02"
    out = magic + n0 + AESGCM(vault.wrapping_key(secret, v["userId"])).encrypt(
        n0, k + v["recoveryCreatedAt"].to_bytes(8, "big"), magic + okey)
    previous, endorsed = v.get("previous"), v.get("endorsedBy")
    out += bytes([(1 if previous else 0) | (2 if endorsed else 0)])
    if previous:
        out += n1 + AESGCM(vault.previous_key(k)).encrypt(n1, bytes.fromhex(previous), out + okey)
    if endorsed:
        import hashlib, hmac
        out += hmac.new(vault.successor_key(bytes.fromhex(endorsed)), out[:76] + okey, hashlib.sha256).digest()
    out += n2 + AESGCM(vault.proof_key(k)).encrypt(n2, v["generation"].to_bytes(8, "big"), out + okey)
    assert data == out
    opened = vault.open_key_object(data, secret, v["userId"])
    assert (opened["key"], opened["created"], opened["generation"]) == (k, v["recoveryCreatedAt"], v["generation"])
    assert opened["previous"] == (bytes.fromhex(previous) if previous else None)
    # A holder of K checks the proof without the recovery key; the previous key its endorsement.
    assert vault.proof(data, k, v["userId"]) == v["generation"]
    assert vault.proof(data, bytes(32) if k != bytes(32) else b"\x01" * 32, v["userId"]) is None
    if endorsed:
        assert vault.endorsed_by(data, bytes.fromhex(endorsed), v["userId"])
        assert not vault.endorsed_by(data, k, v["userId"])
    # Any byte flipped: the wrap or the proof refuses it.
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x01
        with pytest.raises(vault.Refused):
            vault.open_key_object(bytes(flipped), secret, v["userId"])


@pytest.mark.parametrize("v", VECTORS["sealedRecords"], ids=lambda v: v["what"])
def test_sealed_record(v):
    """A device record `PLMANIF` 0x03: the wrap length, the account key wrapped under the
    recovery key (as in the key object), the seal over everything before it."""
    data = bytes.fromhex(v["bytes"])
    k = bytes.fromhex(v["accountKey"])
    okey = v["objectKey"].encode()
    n0, n1 = (bytes.fromhex(n) for n in v["nonces"])
    plain = bytes.fromhex(v["plaintext"])
    if "recoveryKey" in v:
        secret = vault.parse_key(v["recoveryKey"])
        head = b"PLMANIF\x03" + bytes([68])
        out = head + n0 + AESGCM(vault.wrapping_key(secret, v["userId"])).encrypt(n0, k + v["recoveryCreatedAt"].to_bytes(8, "big"),
                                                                                 head + okey)
        assert vault.record_wrap(data, secret, v["userId"], v["objectKey"]) == (k, v["recoveryCreatedAt"])
        assert vault.record_wrap(data, vault.parse_key(VECTORS["recoveryKeys"][3]["text"]), v["userId"], v["objectKey"]) is None
    else:
        out = b"PLMANIF\x03\x00"
    out += n1 + AESGCM(vault.metadata_key(k)).encrypt(n1, plain, out + okey)
    assert data == out
    assert vault.open_sealed(data, k, v["objectKey"]) == plain
    for i in (0, 8, 9, 20, len(data) - 1):
        flipped = bytearray(data)
        flipped[i] ^= 0x80
        with pytest.raises(vault.Refused):
            vault.open_sealed(bytes(flipped), k, v["objectKey"])
