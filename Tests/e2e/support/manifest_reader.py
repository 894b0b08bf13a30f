"""An independent reader of the device manifest, written from docs/manifest.md alone (no
code shared with the daemon): lists a device's objects, checks every segment (format 1:
its SHA-256; format 2: opens it with the account's metadata key, using support/vault.py
and Python's `cryptography`, and checks the chain and the head the sealed device record
names), decodes the records and replays them up to a moment. The restore suites read the
manifest with it given only the bucket and the recovery key, which proves the format can
be read by another tool."""
from __future__ import annotations

import hashlib
import json
import re
import zlib

from support import vault

MAGIC = b"PLMANIF\x01"
SEALED = vault.SEALED_MAGIC
ZEROS = "0" * 64


class Damaged(Exception):
    pass


JSON_LIMIT = 16 << 20


def sealed_json(b: bytes) -> dict:
    """A JSON part of a format-2 plaintext: the JSON itself (first byte `{`) or one whole
    zlib stream of it (first byte 0x78), inflating to at most 16 MiB."""
    if b[:1] == b"{":
        return json.loads(b)
    if b[:1] != b"\x78":
        raise Damaged("a sealed JSON that is neither JSON nor a zlib stream")
    d = zlib.decompressobj()
    try:
        out = d.decompress(b, JSON_LIMIT + 1)
    except zlib.error as e:
        raise Damaged(f"a sealed JSON that does not inflate: {e}")
    if len(out) > JSON_LIMIT or not d.eof or d.unused_data or d.unconsumed_tail:
        raise Damaged("a sealed JSON stream cut short, too long, or followed by other bytes")
    return json.loads(out)


def _uvarint(b: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= len(b):
            raise Damaged("varint past the end")
        byte = b[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise Damaged("varint too long")


def _svarint(b: bytes, i: int) -> tuple[int, int]:
    u, i = _uvarint(b, i)
    return (u >> 1) ^ -(u & 1), i


def decode_segment(data: bytes) -> tuple[dict, list[dict]]:
    """(header, records) of one object; raises Damaged unless it checks out."""
    if len(data) < 44 or data[:8] != MAGIC:
        raise Damaged("not a manifest segment")
    if hashlib.sha256(data[40:]).digest() != data[8:40]:
        raise Damaged("SHA-256 mismatch")
    hlen = int.from_bytes(data[40:44], "big")
    header = json.loads(data[44:44 + hlen])
    if header.get("format") != 1:
        raise Damaged(f"format {header.get('format')}")
    body = data[44 + hlen:]
    records, i, prev_path, prev_time = [], 0, b"", 0
    count = 0 if header["kind"] == "snapshot-index" else header["entries"]
    for _ in range(count):
        folder, i = _uvarint(body, i)
        shared, i = _uvarint(body, i)
        n, i = _uvarint(body, i)
        path = prev_path[:shared] + body[i:i + n]
        i += n
        kind = body[i]
        i += 1
        delta, i = _svarint(body, i)
        time_ms = prev_time + delta
        rec = {"folder": header["folders"][folder], "path": path, "kind": {1: "appeared", 2: "changed", 3: "gone"}[kind],
               "time": time_ms}
        if kind != 3:
            rec["size"], i = _uvarint(body, i)
            rec["md5"] = body[i:i + 16].hex()
            i += 16
            rec["mtime_sec"], i = _svarint(body, i)
            rec["mtime_nsec"], i = _uvarint(body, i)
        records.append(rec)
        prev_path, prev_time = path, time_ms
    if i != len(body):
        raise Damaged("bytes after the last record")
    return header, records


def decode_plaintext(plain: bytes) -> tuple[dict, list[dict]]:
    """(header, records) of an opened format-2 object; raises Damaged unless it parses."""
    if len(plain) < 4:
        raise Damaged("too short")
    hlen = int.from_bytes(plain[0:4], "big")
    header = sealed_json(plain[4:4 + hlen])
    if header.get("format") != 2:
        raise Damaged(f"format {header.get('format')}")
    body = plain[4 + hlen:]
    folders, users, groups = header["folders"], header.get("users", []), header.get("groups", [])
    records, i, prev_path, prev_time, prev_owner = [], 0, b"", 0, None
    count = 0 if header["kind"] == "snapshot-index" else header["entries"]

    def owner(flags: int, i: int):
        nonlocal prev_owner
        if flags & ~7 or (flags & 2 and flags & 4):
            raise Damaged("bad flags")
        if flags & 4:
            if prev_owner is None:
                raise Damaged("same owner as none")
            return prev_owner, i
        if not flags & 2:
            return None, i
        uid, i = _uvarint(body, i)
        gid, i = _uvarint(body, i)
        mode, i = _uvarint(body, i)
        u, i = _uvarint(body, i)
        g, i = _uvarint(body, i)
        if mode > 0o7777 or u > len(users) or g > len(groups):
            raise Damaged("bad owner")
        prev_owner = {"uid": uid, "gid": gid, "mode": mode, "user": users[u - 1] if u else None,
                      "group": groups[g - 1] if g else None}
        return prev_owner, i

    for _ in range(count):
        folder, i = _uvarint(body, i)
        shared, i = _uvarint(body, i)
        n, i = _uvarint(body, i)
        path = prev_path[:shared] + body[i:i + n]
        i += n
        kind = body[i]
        i += 1
        delta, i = _svarint(body, i)
        time_ms = prev_time + delta
        if kind not in (1, 2, 3, 4) or (not path and kind != 4):
            raise Damaged("bad record")
        rec = {"folder": folders[folder], "path": path, "kind": {1: "appeared", 2: "changed", 3: "gone", 4: "folder"}[kind],
               "time": time_ms}
        if kind in (1, 2):
            rec["size"], i = _uvarint(body, i)
            rec["md5"] = body[i:i + 16].hex()
            i += 16
            rec["mtime_sec"], i = _svarint(body, i)
            rec["mtime_nsec"], i = _uvarint(body, i)
            flags = body[i]
            i += 1
            rec["owner"], i = owner(flags, i)
            rec["sha256"] = None
            if flags & 1:
                rec["sha256"] = body[i:i + 32].hex()
                i += 32
        elif kind == 4:
            rec["mtime_sec"], i = _svarint(body, i)
            rec["mtime_nsec"], i = _uvarint(body, i)
            flags = body[i]
            i += 1
            if flags & 1:
                raise Damaged("a folder with a digest")
            rec["owner"], i = owner(flags, i)
            if rec["owner"] is None:
                raise Damaged("a folder without an owner")
        records.append(rec)
        prev_path, prev_time = path, time_ms
    if i != len(body):
        raise Damaged("bytes after the last record")
    return header, records


def account_key(s3, bucket: str, user_id: str, recovery_text: str) -> bytes:
    """The account key, from the key object in the bucket and the recovery key alone."""
    data = s3.get_object(Bucket=bucket, Key=vault.key_object_key(user_id))["Body"].read()
    key, _created = vault.unwrap(data, vault.parse_key(recovery_text), user_id)
    return key


def account_keys(s3, bucket: str, user_id: str, recovery_text: str) -> list[bytes]:
    """Every account key the recovery key opens in the bucket (docs/manifest.md): the key
    object's, and the previous one it carries while a new account key is put in place;
    when the key object does not open with it, the key any device record keeps wrapped
    under it. Raises vault.Refused when nothing opens."""
    secret = vault.parse_key(recovery_text)
    try:
        data = s3.get_object(Bucket=bucket, Key=vault.key_object_key(user_id))["Body"].read()
        opened = vault.open_key_object(data, secret, user_id)
        return [opened["key"]] + ([opened["previous"]] if opened["previous"] else [])
    except (vault.Refused, s3.exceptions.NoSuchKey):
        pass
    for k in list_keys(s3, bucket, f"metadata/{user_id}/devices/"):
        if k.endswith("/device.json"):
            found = vault.record_wrap(s3.get_object(Bucket=bucket, Key=k)["Body"].read(), secret, user_id, k)
            if found:
                return [found[0]]
    raise vault.Refused("key", "the recovery key opens neither the key object nor any device record")


def open_any(data: bytes, keys: list[bytes], object_key: str) -> bytes:
    """The plaintext under the first of `keys` that opens it."""
    for k in keys[:-1]:
        try:
            return vault.open_sealed(data, k, object_key)
        except vault.Refused:
            pass
    return vault.open_sealed(data, keys[-1], object_key)


def device_prefix(user_id: str, device_id: str) -> str:
    return f"metadata/{user_id}/devices/{device_id}/"


def list_keys(s3, bucket: str, prefix: str) -> list[str]:
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def read(s3, bucket: str, user_id: str, device_id: str, key: bytes | list[bytes] | None = None) -> dict:
    """The manifest as a reader sees it: {snapshot, logs, records (in replay order),
    segments (headers), format}. With the account key `key` a format-2 manifest is read
    (and its device record returned as `record`); without, format 1. Raises Damaged for a
    bad object, a broken chain, a missing head or a gap in the log."""
    if key is not None:
        return read_sealed(s3, bucket, user_id, device_id, key)
    prefix = device_prefix(user_id, device_id)
    keys = list_keys(s3, bucket, prefix)
    logs, indexed = {}, set()
    for k in keys:
        rest = k[len(prefix):]
        m = re.fullmatch(r"log/(\d{12})\.plm", rest)
        if m:
            logs[int(m.group(1))] = k
        m = re.fullmatch(r"snapshot/(\d{12})/index\.plm", rest)
        if m:
            indexed.add(int(m.group(1)))
    snapshot = max(indexed) if indexed else None
    records, headers = [], []
    get = lambda key: s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    if snapshot is not None:
        index, _ = decode_segment(get(f"{prefix}snapshot/{snapshot:012d}/index.plm"))
        headers.append(index)
        for part in index["parts"]:
            data = get(f"{prefix}snapshot/{snapshot:012d}/{part['part']:06d}.plm")
            if hashlib.sha256(data[40:]).hexdigest() != part["sha256"] or data[8:40].hex() != part["sha256"]:
                raise Damaged(f"snapshot part {part['part']} is not the one its index names")
            h, r = decode_segment(data)
            headers.append(h)
            records += r
    seq = (snapshot or 0) + 1
    chain = []
    while seq in logs:
        h, r = decode_segment(get(logs[seq]))
        if h["kind"] != "log" or h["seq"] != seq:
            raise Damaged(f"log {seq} says it is {h['kind']} {h['seq']}")
        headers.append(h)
        records += r
        chain.append(seq)
        seq += 1
    beyond = sorted(n for n in logs if n >= seq)
    if beyond:
        raise Damaged(f"log segment {seq} is missing but {beyond} exist")
    return {"snapshot": snapshot, "logs": chain, "records": records, "headers": headers, "format": 1,
            "covered": sorted(n for n in logs if snapshot is not None and n <= snapshot)}


def read_sealed(s3, bucket: str, user_id: str, device_id: str, key: bytes | list[bytes]) -> dict:
    """Format 2 (docs/manifest.md): every object opened with the metadata key for its own
    key, the index's parts checked by the SHA-256 of their sealed bytes, every log's `prev`
    the SHA-256 of the one before (or the index's `prev` after a snapshot), and the chain
    reaching the head the sealed device record names. `key` may be a list (the account
    key, then the previous one while a new one is put in place): each object opens under one."""
    account = key if isinstance(key, list) else [key]
    prefix = device_prefix(user_id, device_id)
    keys = list_keys(s3, bucket, prefix)
    get = lambda k: s3.get_object(Bucket=bucket, Key=k)["Body"].read()
    record = sealed_json(open_any(get(prefix + "device.json"), account, prefix + "device.json"))
    if record.get("format") != 2 or record.get("deviceId") != device_id:
        raise Damaged("not this device's format-2 record")
    logs, indexed = {}, set()
    for k in keys:
        rest = k[len(prefix):]
        m = re.fullmatch(r"log/(\d{12})\.pls", rest)
        if m:
            logs[int(m.group(1))] = k
        m = re.fullmatch(r"snapshot/(\d{12})/index\.pls", rest)
        if m:
            indexed.add(int(m.group(1)))
    snapshot = max(indexed) if indexed else None
    records, headers, last_seq, last_sha, last_former = [], [], 0, ZEROS, None

    def opened(k: str) -> tuple[bytes, dict, list[dict]]:
        data = get(k)
        h, r = decode_plaintext(open_any(data, account, k))
        return data, h, r

    if snapshot is not None:
        _, index, _ = opened(f"{prefix}snapshot/{snapshot:012d}/index.pls")
        if index["kind"] != "snapshot-index" or index["seq"] != snapshot:
            raise Damaged("not the snapshot's index")
        headers.append(index)
        for n, part in enumerate(index["parts"], 1):
            k = f"{prefix}snapshot/{snapshot:012d}/{part['part']:06d}.pls"
            data = get(k)
            h, r = decode_plaintext(open_any(data, account, k))
            # A part sealed again under a new account key still answers to its old bytes.
            if part["part"] != n or part["sha256"] not in (hashlib.sha256(data).hexdigest(), h.get("resealedFrom")):
                raise Damaged(f"snapshot part {part['part']} is not the one its index names")
            if h["kind"] != "snapshot" or h["seq"] != snapshot or h.get("part") != n:
                raise Damaged(f"part {n} says it is {h['kind']} {h['seq']}")
            headers.append(h)
            records += r
        last_seq, last_sha = snapshot, index["prev"]
    seq, chain = (snapshot or 0) + 1, []
    while seq in logs:
        data, h, r = opened(logs[seq])
        if h["kind"] != "log" or h["seq"] != seq:
            raise Damaged(f"log {seq} says it is {h['kind']} {h['seq']}")
        if h["prev"] != last_sha and (last_former is None or h["prev"] != last_former):
            raise Damaged(f"log {seq} does not follow segment {seq - 1}")
        headers.append(h)
        records += r
        chain.append(seq)
        last_seq, last_sha, last_former = seq, hashlib.sha256(data).hexdigest(), h.get("resealedFrom")
        seq += 1
    beyond = sorted(n for n in logs if n >= seq)
    if beyond:
        raise Damaged(f"log segment {seq} is missing but {beyond} exist")
    head = record["head"]
    if last_seq < head["seq"] or (last_seq == head["seq"] and head["sha256"] not in (last_sha, last_former)):
        raise Damaged(f"the chain ends at {last_seq}, the record names {head}")
    return {"snapshot": snapshot, "logs": chain, "records": records, "headers": headers, "format": 2, "record": record,
            "covered": sorted(n for n in logs if snapshot is not None and n <= snapshot)}


def replay(records: list[dict], as_of_ms: int | None = None) -> dict[tuple[str, bytes], dict]:
    """(folder, path bytes) -> the record of the version present at `as_of_ms` (files only)."""
    state: dict[tuple[str, bytes], dict | None] = {}
    for r in records:
        if (as_of_ms is not None and r["time"] > as_of_ms) or r["kind"] == "folder":
            continue
        state[(r["folder"], r["path"])] = None if r["kind"] == "gone" else r
    return {k: v for k, v in state.items() if v is not None}


def folders(records: list[dict], as_of_ms: int | None = None) -> dict[tuple[str, bytes], dict]:
    """(watched folder, folder path below it, b"" for itself) -> its last folder record."""
    out = {}
    for r in records:
        if r["kind"] == "folder" and (as_of_ms is None or r["time"] <= as_of_ms):
            out[(r["folder"], r["path"])] = r
    return out


TOLERANCE = 15 * 60   # seconds a sealed write time may lie before its object's LastModified


def _iso(text: str) -> float:
    """An ISO 8601 UTC time as the daemon writes it ("2026-11-22T07:00:03Z"), in seconds."""
    import datetime as dt
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def freshness(s3, bucket: str, user_id: str, device_id: str, key: bytes | list[bytes]) -> list[str]:
    """What "Freshness without memory" (docs/manifest.md, "Reading it" 7 and 8) says of a
    device's manifest, for a reader that never saw it: `replayed` (its record stored well
    after it was written, its newest segment not), `copied` (both moved alike: the bucket
    was copied whole), `below floor` (another device's record vouches for a newer counter or
    segment than the bucket holds). Empty when fresh."""
    account = key if isinstance(key, list) else [key]
    prefix = device_prefix(user_id, device_id)
    m = read_sealed(s3, bucket, user_id, device_id, account)
    record = m["record"]
    stored = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            stored[o["Key"]] = o["LastModified"].timestamp()
    out = []
    if stored[prefix + "device.json"] - _iso(record["updatedAt"]) > TOLERANCE:
        last = m["headers"][-1] if m["headers"] else None
        last_key = None
        if m["logs"]:
            last_key = f"{prefix}log/{m['logs'][-1]:012d}.pls"
        elif m["snapshot"] is not None:
            last_key = f"{prefix}snapshot/{m['snapshot']:012d}/index.pls"
        moved = last_key and last and stored.get(last_key, 0) - _iso(last["createdAt"]) > TOLERANCE
        out.append("copied" if moved else "replayed")
    # The floor: what every other device's record vouches for of this one.
    last_seq = m["logs"][-1] if m["logs"] else (m["snapshot"] or 0)
    for k in list_keys(s3, bucket, f"metadata/{user_id}/devices/"):
        if not k.endswith("/device.json") or k == prefix + "device.json":
            continue
        try:
            other = sealed_json(open_any(s3.get_object(Bucket=bucket, Key=k)["Body"].read(), account, k))
        except (vault.Refused, Damaged):
            continue
        seen = (other.get("seen") or {}).get(device_id)
        if seen and (last_seq < seen["seq"] or record["counter"] < seen["counter"]):
            out.append("below floor")
            break
    return out
