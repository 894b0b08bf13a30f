#!/usr/bin/env python3
"""The Photolala app on a phone, for scripts/demo: it uploads photos to the account the way
the app does (the object with its content type and original-format, its thumbnail, then
the whole catalog rewritten from the app's copy: snapshot first, pointer last, no
condition), and unstars one (its object and thumbnail deleted, the catalog rewritten
without its row).

Usage: scripts/phone.py STACK_JSON USER_ID take N      (prints one "md5 date" line a photo)
       scripts/phone.py STACK_JSON USER_ID unstar MD5
(STACK_JSON: the first line `fake_backend.py --with-moto` prints, as scripts/demo keeps it.)"""
from __future__ import annotations

import hashlib
import io
import json
import sys
import time
from pathlib import Path

import boto3
from botocore.config import Config
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "e2e"))
from support.app_catalog import publish_as_app, read_catalog, thumbnail_key  # noqa: E402


def main(argv: list[str]) -> int:
    stack, uid, verb = json.loads(argv[1]), argv[2], argv[3]
    s3 = boto3.client("s3", endpoint_url=stack["moto"], region_name=stack["region"],
                      aws_access_key_id=stack["adminAccessKeyId"], aws_secret_access_key=stack["adminSecretAccessKey"],
                      config=Config(s3={"addressing_style": "path"}))
    bucket = stack["bucket"]
    catalog = read_catalog(s3, bucket, uid)
    rows = list(catalog.lines) if catalog else []
    if verb == "take":
        now = int(time.time())
        for i in range(int(argv[4])):
            img = Image.new("RGB", (1200, 900), (40 + 60 * i % 200, 90, 160))
            ImageDraw.Draw(img).text((40, 40), f"from a phone #{i + 1}", fill=(255, 255, 255))
            out = io.BytesIO()
            img.save(out, "JPEG", quality=90)
            body = out.getvalue()
            md5 = hashlib.md5(body).hexdigest()
            date = now - 86_400 * (i + 1)
            s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{md5}.dat", Body=body, ContentType="image/jpeg",
                          Metadata={"original-format": "JPEG"})
            thumb = io.BytesIO()
            img.resize((341, 256)).crop((0, 0, 341, 256)).save(thumb, "JPEG", quality=85)
            s3.put_object(Bucket=bucket, Key=thumbnail_key(uid, md5), Body=thumb.getvalue(), ContentType="image/jpeg")
            rows.append(f"{hashlib.md5(body[:4096]).hexdigest()},{len(body)},{md5},{date},JPEG")
            print(md5, date)
    elif verb == "unstar":
        md5 = argv[4]
        s3.delete_object(Bucket=bucket, Key=f"photos/{uid}/{md5}.dat")
        s3.delete_object(Bucket=bucket, Key=thumbnail_key(uid, md5))
        rows = [r for r in rows if r.split(",")[2] != md5]
    else:
        print(__doc__, file=sys.stderr)
        return 2
    publish_as_app(s3, bucket, uid, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
