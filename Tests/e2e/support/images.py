"""Real photos made for the thumbnail tests with Pillow (and pillow-heif for HEIC):
patterns whose thumbnails show whether they are upright and cropped where the spec says,
EXIF dates with and without offsets, and the hostile kind."""
from __future__ import annotations

import io
import random
import struct
import zlib

from PIL import Image

try:
    import pillow_heif
    pillow_heif.register_heif_opener()
except ImportError:  # the HEIC cases say so when they run
    pillow_heif = None

RED, GREEN, BLUE, WHITE = (220, 20, 20), (20, 200, 20), (20, 20, 220), (255, 255, 255)
BAND = 15  # grey step between bands: far above JPEG's error at 256 px


def exif(date: str | None = None, offset: str | None = None, orientation: int | None = None) -> Image.Exif:
    e = Image.Exif()
    if orientation:
        e[0x0112] = orientation
    if date or offset:
        ifd = e.get_ifd(0x8769)
        if date:
            ifd[0x9003] = date
        if offset:
            ifd[0x9011] = offset
    return e


def upright_pattern(w: int, h: int) -> Image.Image:
    """Blue along the top, green along the bottom, a red square top-left: any turn or
    mirror of it shows."""
    img = Image.new("RGB", (w, h), (128, 128, 128))
    img.paste(BLUE, (0, 0, w, h // 8))
    img.paste(GREEN, (0, h - h // 8, w, h))
    img.paste(RED, (0, 0, w // 4, w // 4))
    return img


def stored_for_orientation_6(upright: Image.Image) -> Image.Image:
    """The pixels a camera stores for a photo that orientation 6 (turn 90° clockwise to
    show) makes upright."""
    return upright.transpose(Image.Transpose.ROTATE_90)


def bands(w: int, h: int, vertical: bool, size: int) -> Image.Image:
    """Grey bands `size` px wide (vertical) or tall, band i at grey i × BAND."""
    img = Image.new("L", (w, h))
    px = img.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = min(255, ((x if vertical else y) // size) * BAND)
    return img.convert("RGB")


def encode(img: Image.Image, fmt: str, **kw) -> bytes:
    out = io.BytesIO()
    img.save(out, fmt, **kw)
    return out.getvalue()


def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares `width` × `height` pixels, with a few bytes of data."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 1024)) + chunk(b"IEND", b"")


def mutated(seed: bytes, rng: random.Random, keep: int = 16) -> bytes:
    """`seed` with a few random bytes changed after its first `keep` (so its format is
    still recognised), or cut short."""
    b = bytearray(seed)
    if rng.random() < 0.25:
        return bytes(b[: rng.randrange(keep + 1, len(b))])
    for _ in range(rng.randint(1, 12)):
        i = rng.randrange(keep, len(b))
        b[i] = rng.randrange(256)
    return bytes(b)


def mp4_header() -> bytes:
    return struct.pack(">I", 24) + b"ftypisom" + b"\0\0\2\0" + b"isomiso2" + b"\0" * 4000
