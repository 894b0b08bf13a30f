"""A small but valid DNG (Adobe DNG 1.4), written byte by byte: what a camera or a
converter stores, reduced to what a reader needs. IFD0 is the camera's preview (a
baseline JPEG, NewSubFileType 1, as DNG files carry it) and names the DNG version, the
maker, the orientation and the date; its SubIFDs entry points at the raw image, a 16-bit
RGGB Bayer mosaic (CFA) with its colour matrix, uncompressed.

The mosaic is a flat dark grey and far smaller than the preview, so a thumbnail made
from it (rather than from the preview) shows at once: wrong size, no colours."""
from __future__ import annotations

import struct

BYTE, ASCII, SHORT, LONG, SRATIONAL = 1, 2, 3, 4, 10
_SIZE = {BYTE: 1, ASCII: 1, SHORT: 2, LONG: 4, SRATIONAL: 8}


def _values(kind: int, values) -> bytes:
    if kind == ASCII:
        return values.encode() + b"\0"
    if kind == BYTE:
        return bytes(values)
    if kind == SHORT:
        return struct.pack(f"<{len(values)}H", *values)
    if kind == LONG:
        return struct.pack(f"<{len(values)}I", *values)
    if kind == SRATIONAL:
        return b"".join(struct.pack("<ii", n, d) for n, d in values)
    raise ValueError(kind)


def _ifd(entries: list[tuple[int, int, object]], at: int) -> bytes:
    """One directory placed at offset `at`, values longer than 4 bytes right after it."""
    entries = sorted(entries, key=lambda e: e[0])
    table = struct.pack("<H", len(entries))
    extra = b""
    data_at = at + 2 + 12 * len(entries) + 4
    for tag, kind, values in entries:
        raw = _values(kind, values)
        count = len(raw) // _SIZE[kind]
        if len(raw) <= 4:
            table += struct.pack("<HHI", tag, kind, count) + raw.ljust(4, b"\0")
        else:
            if (data_at + len(extra)) % 2:
                extra += b"\0"
            table += struct.pack("<HHII", tag, kind, count, data_at + len(extra))
            extra += raw
    return table + struct.pack("<I", 0) + extra


def dng(preview_jpeg: bytes, preview_size: tuple[int, int], orientation: int = 1,
        date: str = "2021:05:06 07:08:09", raw_size: tuple[int, int] = (160, 120)) -> bytes:
    """A DNG whose embedded preview is `preview_jpeg` (`preview_size` pixels, stored as
    the sensor saw them; `orientation` is the EXIF value that turns them upright)."""
    pw, ph = preview_size
    rw, rh = raw_size
    mosaic = struct.pack(f"<{rw * rh}H", *([4096] * (rw * rh)))

    def preview(raw_ifd: int, jpeg_at: int) -> list:
        return [
            (254, LONG, [1]),                       # NewSubFileType: reduced-resolution image
            (256, LONG, [pw]), (257, LONG, [ph]),
            (258, SHORT, [8, 8, 8]), (259, SHORT, [7]),  # 8-bit, JPEG
            (262, SHORT, [6]),                      # YCbCr
            (271, ASCII, "Photolala"), (272, ASCII, "Test Camera"),
            (273, LONG, [jpeg_at]), (274, SHORT, [orientation]), (277, SHORT, [3]),
            (278, LONG, [ph]), (279, LONG, [len(preview_jpeg)]), (284, SHORT, [1]),
            (305, ASCII, "photolalad tests"), (306, ASCII, date),
            (330, LONG, [raw_ifd]),                 # SubIFDs: the raw image
            (50706, BYTE, [1, 4, 0, 0]),            # DNGVersion
            (50707, BYTE, [1, 1, 0, 0]),            # DNGBackwardVersion
            (50708, ASCII, "Photolala Test Camera"),  # UniqueCameraModel
            (50721, SRATIONAL, [(1, 1), (0, 1), (0, 1), (0, 1), (1, 1), (0, 1), (0, 1), (0, 1), (1, 1)]),  # ColorMatrix1
            (50778, SHORT, [21]),                   # CalibrationIlluminant1: D65
        ]

    def raw(mosaic_at: int) -> list:
        return [
            (254, LONG, [0]),                       # the main image
            (256, LONG, [rw]), (257, LONG, [rh]),
            (258, SHORT, [16]), (259, SHORT, [1]),  # 16-bit, uncompressed
            (262, SHORT, [32803]),                  # CFA
            (273, LONG, [mosaic_at]), (277, SHORT, [1]), (278, LONG, [rh]),
            (279, LONG, [len(mosaic)]), (284, SHORT, [1]),
            (33421, SHORT, [2, 2]),                 # CFARepeatPatternDim
            (33422, BYTE, [0, 1, 1, 2]),            # CFAPattern: RGGB
            (50717, LONG, [65535]),                 # WhiteLevel
        ]

    # Two passes: the sizes do not depend on the offsets, so lay out with zeros first.
    ifd0_at = 8
    size0 = len(_ifd(preview(0, 0), ifd0_at))
    raw_at = ifd0_at + size0 + (size0 % 2)
    size_raw = len(_ifd(raw(0), raw_at))
    jpeg_at = raw_at + size_raw + (size_raw % 2)
    mosaic_at = jpeg_at + len(preview_jpeg) + (len(preview_jpeg) % 2)
    out = bytearray(b"II*\0" + struct.pack("<I", ifd0_at))
    out += _ifd(preview(raw_at, jpeg_at), ifd0_at)
    out += b"\0" * (raw_at - len(out))
    out += _ifd(raw(mosaic_at), raw_at)
    out += b"\0" * (jpeg_at - len(out))
    out += preview_jpeg
    out += b"\0" * (mosaic_at - len(out))
    out += mosaic
    return bytes(out)
