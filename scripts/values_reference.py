#!/usr/bin/env python3
"""Reference weight-value diff: numpy (float64) over gguf-py's dequantization.

Usage: values_reference.py OLD NEW      prints JSON {tensor name: figures} for the tensors on
                                        both sides with the same element count.

Independent of weight-inspect: GGUF files are read with gguf.GGUFReader and dequantized with
gguf.quants.dequantize; safetensors files are read from their JSON header with numpy
(bfloat16 widened by a shift). The figures follow docs/values.md:
  changed_elements    positions whose values differ (NaN = NaN; a non-finite on one side only
                      counts as changed)
  nonfinite_elements  positions with NaN or ±inf on either side
  max_abs_diff        max |b - a| over positions finite on both sides
  rel_l2              ||b - a|| / ||a|| (finite positions); null when ||a|| = 0 and b differs
  cosine              a.b / (||a|| ||b||); 1 when nothing differs; null when a norm is 0
Tensors of the same dtype with identical bytes are identical (rel_l2 0, cosine 1, and no
non-finite count), without decoding them. Tensors of the same dtype whose bytes differ while
every value is equal are not changed; for float dtypes their "bits_differ" counts positions
holding zeros of opposite signs and NaNs with other bits.
"""
import json
import math
import struct
import sys

import numpy as np

ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        raw = data[begin:end]
        dtype = t["dtype"]

        def values(raw=raw, dtype=dtype):
            if dtype == "BF16":
                return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            return raw.view(ST_DTYPES[dtype])

        out[name] = (dtype.lower(), raw, values)
    return out


def read_gguf(path):
    import gguf

    reader = gguf.GGUFReader(path)
    out = {}
    for t in reader.tensors:
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        qtype = t.tensor_type

        def values(t=t, qtype=qtype):
            return gguf.quants.dequantize(np.asarray(t.data), qtype)

        out[t.name] = (qtype.name.lower(), raw, values)
    return out


def read_model(path):
    with open(path, "rb") as f:
        magic = f.read(4)
    return read_gguf(path) if magic == b"GGUF" else read_safetensors(path)


def figures(a, b):
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    finite = np.isfinite(a) & np.isfinite(b)
    nonfinite = int((~finite).sum())
    same_nonfinite = (np.isnan(a) & np.isnan(b)) | (a == b)
    changed = int((finite & (a != b)).sum() + (~finite & ~same_nonfinite).sum())
    fa, fb = a[finite], b[finite]
    d = fb - fa
    ssd, ssa, ssb = float(d @ d), float(fa @ fa), float(fb @ fb)
    dot = float(fa @ fb)
    if ssd == 0:
        rel = 0.0
    elif ssa > 0:
        rel = math.sqrt(ssd) / math.sqrt(ssa)
    else:
        rel = None
    if ssd == 0 and changed == 0:
        cos = 1.0
    elif ssa > 0 and ssb > 0:
        cos = dot / (math.sqrt(ssa) * math.sqrt(ssb))
    else:
        cos = None
    return {
        "changed_elements": changed,
        "nonfinite_elements": nonfinite,
        "max_abs_diff": float(np.abs(d).max()) if d.size else 0.0,
        "rel_l2": rel,
        "cosine": cos,
    }


# The float dtypes whose raw bytes are one value each (bf16 as a 16-bit float of its own bits).
FLOATS = {"f64": np.float64, "f32": np.float32, "f16": np.float16}


def bits_differ(a, b):
    """Equal values of one float dtype: what makes their bits differ, position by position."""
    unsigned = np.dtype(f"u{a.dtype.itemsize}")
    differ = a.view(unsigned) != b.view(unsigned)
    return {
        "signed_zeros": int((differ & (a == 0) & (b == 0)).sum()),
        "nan_payloads": int((differ & np.isnan(a) & np.isnan(b)).sum()),
        "other_encodings": 0,
    }


def main():
    old, new = read_model(sys.argv[1]), read_model(sys.argv[2])
    out = {}
    for name in sorted(set(old) & set(new)):
        (da, ra, va), (db, rb, vb) = old[name], new[name]
        if da == db and ra.size == rb.size and np.array_equal(ra, rb):
            out[name] = {
                "changed_elements": 0, "nonfinite_elements": 0, "max_abs_diff": 0.0,
                "rel_l2": 0.0, "cosine": 1.0, "changed": False,
            }
            continue
        a, b = va(), vb()
        if a.size != b.size:
            continue
        entry = figures(a, b)
        entry["changed"] = da != db or entry["changed_elements"] > 0
        if not entry["changed"] and da in FLOATS:
            entry["bits_differ"] = bits_differ(ra.view(FLOATS[da]), rb.view(FLOATS[da]))
        out[name] = entry
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
