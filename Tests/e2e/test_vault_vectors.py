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
