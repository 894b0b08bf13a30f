"""The Photolala apps' view of the bucket (shared/spec/app-catalog.md), for the catalog
suites and the demo: the catalog read back exactly as the apps read it (the pointer, the
snapshot it names, whose MD5 must be its name and the pointer's, the exact header, then
the rows), the apps' way of publishing one (snapshot, then the pointer, unconditionally,
last writer wins), and photo rows put into a stopped daemon's queue the way the
thumbnail stage leaves them."""
from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

HEADER = "photo_head_md5,file_size,photo_md5,photo_date,format"
MD5_RE = re.compile(r"^[0-9a-f]{32}$")


def md5_hex(data: bytes | str) -> str:
    return hashlib.md5(data.encode() if isinstance(data, str) else data).hexdigest()


def pointer_key(uid: str) -> str:
    return f"catalogs/{uid}/.photolala.md5"


def snapshot_key(uid: str, md5: str) -> str:
    return f"catalogs/{uid}/.photolala.{md5}.csv"


def thumbnail_key(uid: str, md5: str) -> str:
    return f"thumbnails/{uid}/{md5}.jpg"


@dataclass
class Row:
    head_md5: str
    size: int
    md5: str
    date: int
    format: str
    # What made a fake row's object bytes (`fake_body`), so a test can put them in the bucket.
    seed: str | None = field(default=None, compare=False)

    @property
    def line(self) -> str:
        return f"{self.head_md5},{self.size},{self.md5},{self.date},{self.format}"


def fake_body(seed: str, size: int) -> bytes:
    """`size` bytes made from `seed`: a fake row's object."""
    block = hashlib.sha256(seed.encode()).digest()
    return (block * (size // len(block) + 1))[:size]


def fake_row(seed: str, date: int, fmt: str = "JPEG", size: int = 1000) -> Row:
    """A row made from `seed`, no real photo behind it: its MD5 is that of `fake_body`."""
    return Row(md5_hex("head " + seed), size, md5_hex(fake_body(seed, size)), date, fmt, seed)


def date_of(line: str) -> float | None:
    parts = [p.strip() for p in line.split(",")]
    try:
        return float(parts[3])
    except (IndexError, ValueError):
        return None


def newest_first(lines: list[str]) -> bool:
    keys = [date_of(l) for l in lines]
    key = [(-1e300 if k is None else k) for k in keys]
    return all(a >= b for a, b in zip(key, key[1:]))


@dataclass
class Catalog:
    md5: str
    lines: list[str]

    @property
    def rows(self) -> list[Row]:
        out = []
        for line in self.lines:
            h, size, md5, date, fmt = line.split(",")
            out.append(Row(h, int(size), md5, int(date), fmt))
        return out

    @property
    def md5s(self) -> list[str]:
        return [l.split(",")[2] for l in self.lines]


def read_catalog(s3, bucket: str, uid: str) -> Catalog | None:
    """The catalog as the apps load it; None when there is no pointer (no catalog yet).
    Asserts what the apps rely on: the pointer names a snapshot that is there, whose
    bytes have that MD5, which starts with the exact header and ends every line with \\n."""
    try:
        pointer = s3.get_object(Bucket=bucket, Key=pointer_key(uid))["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    md5 = pointer.decode().strip()
    assert MD5_RE.match(md5), f"the pointer holds {pointer[:60]!r}, not an MD5"
    try:
        body = s3.get_object(Bucket=bucket, Key=snapshot_key(uid, md5))["Body"].read()
    except s3.exceptions.NoSuchKey:
        raise AssertionError(f"the pointer names {snapshot_key(uid, md5)}, which is not in the bucket")
    assert md5_hex(body) == md5, f"the snapshot's bytes have MD5 {md5_hex(body)}, not {md5}"
    text = body.decode()
    assert text.endswith("\n") and "\r" not in text, "lines end with \\n"
    lines = text.split("\n")[:-1]
    assert lines and lines[0] == HEADER, f"header {lines[:1]}"
    return Catalog(md5, lines[1:])


def publish_as_app(s3, bucket: str, uid: str, lines: list[str]) -> str:
    """What the apps do after a star or unstar: the whole catalog from their copy, newest
    first, then the pointer with no condition (the last writer wins)."""
    rows = sorted(lines, key=lambda l: -(date_of(l) or -1e300))
    body = ("\n".join([HEADER] + rows) + "\n").encode()
    md5 = md5_hex(body)
    s3.put_object(Bucket=bucket, Key=snapshot_key(uid, md5), Body=body, ContentType="text/csv")
    s3.put_object(Bucket=bucket, Key=pointer_key(uid), Body=md5.encode(), ContentType="text/plain")
    return md5


def seed_ready_photos(state_dir: Path, rows: list[Row], s3=None, bucket: str | None = None, uid: str | None = None) -> None:
    """Photo rows `ready` (thumbnail up, catalog columns filled) with their objects
    uploaded, written into a stopped daemon's queue as the upload and thumbnail stages
    leave them. With `s3`, the objects are put in the bucket too (fake rows' bytes), so
    the inventory's listing finds them there and does not send them again."""
    if s3 is not None:
        for r in rows:
            s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{r.md5}.dat", Body=fake_body(r.seed, r.size))
    con = sqlite3.connect(str(Path(state_dir) / "queue.db"), timeout=10)
    try:
        with con:
            now = time.time()
            con.executemany("INSERT OR IGNORE INTO object(md5, size, state, updatedAt, uploadedAt) VALUES (?, ?, 'uploaded', ?, ?)",
                            [(r.md5, r.size, now, now) for r in rows])
            con.executemany("INSERT INTO photo(md5, state, headMD5, size, format, takenAt, updatedAt) "
                            "VALUES (?, 'ready', ?, ?, ?, ?, ?)",
                            [(r.md5, r.head_md5, r.size, r.format, r.date, now) for r in rows])
    finally:
        con.close()
