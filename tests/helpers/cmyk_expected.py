"""The RGB Pillow gives for the 4-channel JPEG fixtures (tests/fixtures/jpeg/*.jpg), written
next to them as NAME.rgb (raw H x W x 3 bytes) for the unit test on machines without Pillow.

Adobe-marked files: Pillow's own convert("RGB"). Files without the marker: Pillow assumes
Adobe's inverted samples for every CMYK JPEG, the toolkit only where the marker says so; the
expected value is then Pillow's CMYK -> RGB formula on the samples as stored.

    python3 tests/helpers/cmyk_expected.py tests/fixtures/jpeg/*.jpg
"""
import sys

from PIL import Image


def muldiv255(a, b):
    t = a * b + 128
    return ((t >> 8) + t) >> 8


def expected_rgb(path):
    im = Image.open(path)
    im.load()
    if im.mode != "CMYK":
        return im.convert("RGB").tobytes()
    if "adobe" in im.info:
        return im.convert("RGB").tobytes()
    out = bytearray()
    for c, m, y, k in im.getdata():  # Pillow inverted them: the stored samples are 255 - x
        c, m, y, k = 255 - c, 255 - m, 255 - y, 255 - k
        nk = 255 - k
        out += bytes(max(0, min(255, nk - muldiv255(v, nk))) for v in (c, m, y))
    return bytes(out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        with open(p[: -len(".jpg")] + ".rgb", "wb") as f:
            f.write(expected_rgb(p))
