#!/usr/bin/env python3
"""What the Photolala apps will show: the user's catalog read back from the bucket the way
the apps read it (pointer → snapshot → thumbnails/{userId}/{md5}.jpg), drawn as a contact
sheet PNG, newest first, each thumbnail with its date and format. Every row must have a
valid PTM-256 thumbnail (a baseline JPEG, 256 px on the short edge, at most 512 on the
long one, at most 50 KB); the exit status says whether they all did.

Usage: scripts/contact_sheet.py STACK_JSON USER_ID OUT.png
(STACK_JSON: the first line `fake_backend.py --with-moto` prints, with the bucket's
admin keys, as scripts/demo keeps it.)"""
from __future__ import annotations

import datetime as dt
import io
import json
import sys
from pathlib import Path

import boto3
from botocore.config import Config
from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "e2e"))
from support.app_catalog import read_catalog, thumbnail_key  # noqa: E402

CELL_W, THUMB_H, LABEL_H, PAD, COLUMNS = 256, 256, 40, 12, 5
BACKGROUND, CARD, INK, MUTED, BAD = (245, 245, 242), (255, 255, 255), (30, 30, 30), (110, 110, 110), (200, 40, 40)


def font(size: int):
    for path in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSans.ttf"):
        if Path(path).exists():
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size)


def check_thumbnail(data: bytes) -> tuple[Image.Image | None, str | None]:
    """The thumbnail and None, or None and why the apps could not use it."""
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except Exception as e:  # noqa: BLE001 — any decoding failure is the finding
        return None, f"not an image ({e})"
    if img.format != "JPEG":
        return None, f"{img.format}, not JPEG"
    if img.info.get("progressive") or img.info.get("progression"):
        return None, "progressive JPEG"
    if min(img.size) != 256 or max(img.size) > 512:
        return None, f"{img.size[0]}×{img.size[1]}, not PTM-256"
    if len(data) > 50_000:
        return None, f"{len(data)} bytes (> 50 KB)"
    return img.convert("RGB"), None


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    stack = json.loads(Path(sys.argv[1]).read_text().splitlines()[0])
    uid, out = sys.argv[2], Path(sys.argv[3])
    s3 = boto3.client("s3", endpoint_url=stack["moto"], region_name=stack["region"],
                      aws_access_key_id=stack["adminAccessKeyId"], aws_secret_access_key=stack["adminSecretAccessKey"],
                      config=Config(s3={"addressing_style": "path"}))
    bucket = stack["bucket"]
    catalog = read_catalog(s3, bucket, uid)
    if catalog is None:
        print("contact sheet: the user has no catalog: the apps would show an empty library", file=sys.stderr)
        return 1
    rows = catalog.rows
    problems: list[str] = []
    cells: list[tuple[Image.Image | None, str, str]] = []
    for row in rows:
        when = dt.datetime.fromtimestamp(row.date, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        try:
            data = s3.get_object(Bucket=bucket, Key=thumbnail_key(uid, row.md5))["Body"].read()
            img, why = check_thumbnail(data)
        except s3.exceptions.NoSuchKey:
            img, why = None, "no thumbnail in the bucket"
        if why:
            problems.append(f"{row.md5} ({row.format}, {when}): {why}")
        cells.append((img, f"{when}", f"{row.format}" + (f" — {why}" if why else "")))

    columns = min(COLUMNS, max(1, len(cells)))
    lines = -(-len(cells) // columns)
    title_h = 64
    sheet = Image.new("RGB", (PAD + columns * (CELL_W + PAD), title_h + PAD + lines * (THUMB_H + LABEL_H + PAD)), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    draw.text((PAD, 14), f"What the Photolala apps show: {len(rows)} photos, newest first", fill=INK, font=font(22))
    draw.text((PAD, 42), f"catalogs/{uid}/.photolala.{catalog.md5}.csv", fill=MUTED, font=font(12))
    small, tiny = font(14), font(12)
    for i, (img, when, what) in enumerate(cells):
        x = PAD + (i % columns) * (CELL_W + PAD)
        y = title_h + PAD + (i // columns) * (THUMB_H + LABEL_H + PAD)
        draw.rectangle((x, y, x + CELL_W - 1, y + THUMB_H + LABEL_H - 1), fill=CARD)
        if img is not None:
            # The whole PTM-256 image (up to 512 × 256), fitted into the cell.
            fitted = img.copy()
            fitted.thumbnail((CELL_W, THUMB_H))
            sheet.paste(fitted, (x + (CELL_W - fitted.width) // 2, y + (THUMB_H - fitted.height) // 2))
        else:
            draw.rectangle((x, y, x + CELL_W - 1, y + THUMB_H - 1), outline=BAD, width=3)
        draw.text((x + 6, y + THUMB_H + 4), when, fill=INK, font=small)
        draw.text((x + 6, y + THUMB_H + 22), what, fill=BAD if "—" in what else MUTED, font=tiny)
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(out)
    newest = cells[0][1] if cells else "-"
    oldest = cells[-1][1] if cells else "-"
    print(f"contact sheet: {out} ({len(rows)} photos, newest {newest}, oldest {oldest}, snapshot {catalog.md5})")
    for p in problems:
        print(f"  NO VALID THUMBNAIL: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
