"""An independent reader of the device manifest, written from docs/manifest.md alone (no
code shared with the daemon): lists a device's objects, checks every segment's SHA-256,
decodes the records and replays them up to a moment. The restore suite reads the
manifest with it, which proves the format can be read by another tool."""
from __future__ import annotations

import hashlib
import json
import re

MAGIC = b"PLMANIF\x01"


class Damaged(Exception):
    pass


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


def device_prefix(user_id: str, device_id: str) -> str:
    return f"metadata/{user_id}/devices/{device_id}/"


def list_keys(s3, bucket: str, prefix: str) -> list[str]:
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def read(s3, bucket: str, user_id: str, device_id: str) -> dict:
    """The manifest as a reader sees it: {snapshot, logs, records (in replay order),
    segments (headers)}. Raises Damaged for a bad object or a gap in the log."""
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
    return {"snapshot": snapshot, "logs": chain, "records": records, "headers": headers,
            "covered": sorted(n for n in logs if snapshot is not None and n <= snapshot)}


def replay(records: list[dict], as_of_ms: int | None = None) -> dict[tuple[str, bytes], dict]:
    """(folder, path bytes) -> the record of the version present at `as_of_ms`."""
    state: dict[tuple[str, bytes], dict | None] = {}
    for r in records:
        if as_of_ms is not None and r["time"] > as_of_ms:
            continue
        state[(r["folder"], r["path"])] = None if r["kind"] == "gone" else r
    return {k: v for k, v in state.items() if v is not None}
