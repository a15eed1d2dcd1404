"""Small inputs whose headers claim far more data than they hold (issue 30, class 2): each
must be refused after reading its few bytes, never after allocating what it claims.

    python3 tests/helpers/lying_inputs.py KIND OUT
      idx-gz        OUT/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz: train images claim
                    65536 x 256 x 256 (4 GB) in a 32-byte-ish gzip stream
      idx-trailer   the same, with the gzip trailer forged to agree with the header
      cifar10-tar   OUT (a .tar.gz): data_batch_1.bin declared 30,730,000 bytes, 100 held
      cifar100-tar  OUT (a .tar.gz): train.bin declared 1 GB - 1, 100 bytes held
      png-lie       OUT (a folder tree train/a, test/a): a PNG of 9000 x 9000 RGB declared
                    in 100 bytes
      jpeg-lie      the same with a baseline JPEG of 9000 x 9000 (its header, a scan start)
      jpeg-prog     the same with a progressive JPEG (whole-image coefficient buffers)
"""
import gzip
import io
import os
import struct
import sys
import tarfile
import zlib


def idx_header(ndim, dims):
    return bytes([0, 0, 8, ndim]) + b"".join(struct.pack(">I", d) for d in dims)


def write_idx_folder(out, forge_trailer):
    os.makedirs(out, exist_ok=True)
    small = {"t10k-images-idx3-ubyte": idx_header(3, [1, 2, 2]) + b"\1\2\3\4",
             "t10k-labels-idx1-ubyte": idx_header(1, [1]) + b"\1",
             "train-labels-idx1-ubyte": idx_header(1, [1]) + b"\1"}
    for name, data in small.items():
        with open(os.path.join(out, name + ".gz"), "wb") as f:
            f.write(gzip.compress(data))
    lie = idx_header(3, [65536, 256, 256]) + b"\7" * 16
    gz = bytearray(gzip.compress(lie))
    if forge_trailer:  # ISIZE = the header's size mod 2^32, as a truthful stream would say
        total = 16 + 65536 * 256 * 256
        gz[-4:] = struct.pack("<I", total & 0xFFFFFFFF)
    with open(os.path.join(out, "train-images-idx3-ubyte.gz"), "wb") as f:
        f.write(gz)


def tar_with_lie(out, member, declared):
    # A ustar header declaring `declared` bytes, then only 100: the gzip stream ends there.
    info = tarfile.TarInfo(member)
    info.size = declared
    head = info.tobuf(format=tarfile.USTAR_FORMAT)
    with open(out, "wb") as f:
        f.write(gzip.compress(head + b"\5" * 100))


def png_lie():
    ihdr = struct.pack(">IIBBBBB", 9000, 9000, 8, 2, 0, 0, 0)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    idat = zlib.compress(b"\0" * 64)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def jpeg_lie(progressive):
    # SOI, a DQT, SOF0/SOF2 of 9000 x 9000 x 3, standard-size Huffman tables, SOS, a few bytes.
    seg = lambda m, d: bytes([0xFF, m]) + struct.pack(">H", len(d) + 2) + d
    dqt = seg(0xDB, b"\0" + bytes([1] * 64))
    sof = seg(0xC2 if progressive else 0xC0, struct.pack(">BHHB", 8, 9000, 9000, 3) +
              b"\1\x11\0" + b"\2\x11\0" + b"\3\x11\0")
    # One DC table: a single 1-bit code for category 0; one AC table: a single code, EOB.
    dht = seg(0xC4, b"\x00" + bytes([1] + [0] * 15) + b"\0" + b"\x10" + bytes([1] + [0] * 15) + b"\0")
    if progressive:
        sos = seg(0xDA, b"\3" + b"\1\0" + b"\2\0" + b"\3\0" + b"\0\0\0")  # DC first scan
    else:
        sos = seg(0xDA, b"\3" + b"\1\0" + b"\2\0" + b"\3\0" + b"\0\x3f\0")
    return b"\xFF\xD8" + dqt + sof + dht + sos + b"\0" * 20


def image_folder(out, data, ext):
    for split in ("train", "test"):
        os.makedirs(os.path.join(out, split, "a"), exist_ok=True)
        with open(os.path.join(out, split, "a", "x." + ext), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    kind, out = sys.argv[1], sys.argv[2]
    if kind in ("idx-gz", "idx-trailer"):
        write_idx_folder(out, kind == "idx-trailer")
    elif kind == "cifar10-tar":
        tar_with_lie(out, "cifar-10-batches-bin/data_batch_1.bin", 30730000)
    elif kind == "cifar100-tar":
        tar_with_lie(out, "cifar-100-binary/train.bin", (1 << 30) - 1)
    elif kind == "png-lie":
        image_folder(out, png_lie(), "png")
    elif kind in ("jpeg-lie", "jpeg-prog"):
        image_folder(out, jpeg_lie(kind == "jpeg-prog"), "jpg")
    else:
        sys.exit(f"unknown kind {kind}")
