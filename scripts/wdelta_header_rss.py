"""Writes a .wdelta of N empty tensors (shape [0]), to measure what a large header costs.

  python scripts/wdelta_header_rss.py OUT N [--hash HEX] [--int4] [--name-len L] [--ndim D]
  python scripts/wdelta_header_rss.py --sizes FILE

A sparse tensor takes about 130 bytes of header and two empty records; --int4 gives five
records per tensor, --name-len longer names, --ndim D a header shape of D zeros (each
dimension 2 bytes of JSON, the most memory per header byte). Used by
scripts/wdelta_header_rss.sh (peak RSS of `delta inspect` and `inspect` at and above the header
caps). --sizes prints, for any .wdelta, the bytes of its JSON header, of its array records'
framing (everything in a record but the raw array bytes), of the raw array bytes, and of the
file.
"""

import argparse
import hashlib
import json
import mmap
import struct
import sys


def sizes(path):
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        total = len(m)
        header = struct.unpack_from("<I", m, 11)[0]
        pos, end, payload = 15 + header, total - 32, 0
        while pos < end:
            for _ in range(3):  # tensor name, field name, dtype
                pos += 4 + struct.unpack_from("<I", m, pos)[0]
            ndim = struct.unpack_from("<I", m, pos)[0]
            pos += 4 + 8 * ndim
            n = struct.unpack_from("<Q", m, pos)[0]
            pos += 8 + n
            payload += n
    return header, total - 15 - header - 32 - payload, payload, total


if len(sys.argv) == 3 and sys.argv[1] == "--sizes":
    print(*sizes(sys.argv[2]))
    sys.exit(0)

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("n", type=int)
p.add_argument("--hash", default="0" * 64)
p.add_argument("--int4", action="store_true")
p.add_argument("--name-len", type=int, default=9)
p.add_argument("--ndim", type=int, default=1)
a = p.parse_args()

names = [f"t{i:08d}".rjust(a.name_len, "x") for i in range(a.n)]
if a.int4:
    strategy = "int4"
    entry = {
        "strategy": "int4",
        "shape": [0] * a.ndim,
        "dtype": "float32",
        "outlier_fraction": 0.01,
        "n_elements": 0,
        "n_outliers": 0,
    }
    arrays = [
        ("outlier_idx", "int64", 0, 8),
        ("outlier_vals", "float16", 0, 2),
        ("scale", "float16", 1, 2),
        ("zero_point", "float16", 1, 2),
        ("packed", "uint8", 0, 1),
    ]
else:
    strategy = "sparse"
    entry = {"strategy": "sparse", "shape": [0] * a.ndim, "dtype": "float32", "sparsity": 0.9}
    arrays = [("indices", "int64", 0, 8), ("values", "float32", 0, 4)]
for field, _, _, _ in arrays:
    entry[field] = {"_ref": field}
header = json.dumps(
    {"parent_hash": a.hash, "strategy": strategy, "tensors": {n: entry for n in names}},
    separators=(",", ":"),
).encode()


def record(name, field, dtype, n, size):
    out = b""
    for s in (name.encode(), field.encode(), dtype.encode()):
        out += struct.pack("<I", len(s)) + s
    return out + struct.pack("<I", 1) + struct.pack("<Q", n) + struct.pack("<Q", n * size) + b"\0" * (n * size)


body = bytearray(b"wdelta\0" + struct.pack("<I", 1) + struct.pack("<I", len(header)) + header)
for n in names:
    for field, dtype, count, size in arrays:
        body += record(n, field, dtype, count, size)
with open(a.out, "wb") as f:
    f.write(body)
    f.write(hashlib.sha256(body).digest())
print(f"{a.out}: {a.n} tensors, header {len(header)} bytes, file {len(body) + 32} bytes")
