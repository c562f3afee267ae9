#!/usr/bin/env python3
"""The peers of `delta create --strategy lossless` on one base / fine-tune pair, for
scripts/bench-lossless.sh. Run in the benchmark's venv (scripts/requirements-bench.txt: reminis
and zipnn from PyPI), never the test venv.

    lossless_peers.py pair BASE FT WORKDIR DTYPE   one JSON line: each peer's bytes and seconds
    lossless_peers.py nobase FT WORKDIR DTYPE      one JSON line: ZipNN alone on FT
    lossless_peers.py zerobase FT OUT              OUT: FT's tensors, every one all zeros

- reminis: `reminis convert` of both files into its SQLite databases, then `reminis diff
  BASE.db FT.db -o PACK` (its lossless delta pack; `--lossy` is off by default). The pack is
  applied back (`reminis apply`, which checks its hashes) to check it is complete.
- ZipNN delta mode: `ZipNN(delta_compressed_type="byte", bytearray_dtype=D).compress(FT,
  delta_second_data=BASE)` (the XOR of the two files, byte-grouped for dtype D, then
  compressed), with D the pair's element type; the decompression is checked to give FT back.
  Files of different lengths (it requires equal ones) are padded with zeros, as for the XOR.
- `zstd -19 --long=27` of the XOR of the two files (BitX's baseline), by the zstd CLI.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

ZIPNN_DTYPE = {"float32": "float32", "bfloat16": "bfloat16", "f16": "float16", "q8_0": "float16"}


def xor(a, b):
    n = max(len(a), len(b))
    a = np.pad(np.frombuffer(a, np.uint8), (0, n - len(a)))
    b = np.pad(np.frombuffer(b, np.uint8), (0, n - len(b)))
    return (a ^ b).tobytes(), a.tobytes(), b.tobytes()


def copy(data):
    return bytes(bytearray(data))


def timed(f):
    t = time.perf_counter()
    r = f()
    return r, time.perf_counter() - t


def reminis(base, ft, work):
    exe = os.path.join(os.path.dirname(sys.executable), "reminis")
    dbs = []
    for p, name in [(base, "base.db"), (ft, "ft.db")]:
        db = os.path.join(work, name)
        if os.path.exists(db):
            os.remove(db)
        subprocess.run([exe, "convert", "-q", p, "-o", db], check=True)
        dbs.append(db)
    pack = os.path.join(work, "reminis.pack")
    _, secs = timed(lambda: subprocess.run([exe, "diff", "-q", dbs[0], dbs[1], "-o", pack], check=True))
    back = os.path.join(work, "reminis-back.db")
    if os.path.exists(back):
        os.remove(back)
    subprocess.run([exe, "apply", "-q", dbs[0], pack, "-o", back], check=True)
    size = os.path.getsize(pack)
    for p in dbs + [back, pack]:
        os.remove(p)
    return size, secs


def zipnn_delta(base_bytes, ft_bytes, dtype):
    from zipnn import ZipNN

    _, a, b = xor(ft_bytes, base_bytes)
    z = ZipNN(input_format="byte", bytearray_dtype=dtype, delta_compressed_type="byte")
    # ZipNN reorders the bytes of its input in place: it gets copies.
    c, secs = timed(lambda: z.compress(copy(a), delta_second_data=copy(b)))
    assert bytes(z.decompress(bytes(c), delta_second_data=copy(b))) == a, "ZipNN delta did not round-trip"
    return len(c), secs


def zipnn_alone(data, dtype):
    from zipnn import ZipNN

    z = ZipNN(input_format="byte", bytearray_dtype=dtype)
    c, secs = timed(lambda: z.compress(copy(data)))
    assert bytes(z.decompress(bytes(c))) == data, "ZipNN did not round-trip"
    return len(c), secs


def zstd_xor(base_bytes, ft_bytes, work):
    x, _, _ = xor(ft_bytes, base_bytes)
    path = os.path.join(work, "xor.bin")
    with open(path, "wb") as f:
        f.write(x)
    _, secs = timed(lambda: subprocess.run(["zstd", "-q", "-f", "-19", "--long=27", path, "-o", path + ".zst"],
                                           check=True))
    size = os.path.getsize(path + ".zst")
    os.remove(path)
    os.remove(path + ".zst")
    return size, secs


def read(p):
    with open(p, "rb") as f:
        return f.read()


def main():
    mode = sys.argv[1]
    if mode == "pair":
        base, ft, work, dtype = sys.argv[2:6]
        b, f = read(base), read(ft)
        out = {"ft_bytes": len(f)}
        out["reminis"], out["reminis_s"] = reminis(base, ft, work)
        out["zipnn"], out["zipnn_s"] = zipnn_delta(b, f, ZIPNN_DTYPE[dtype])
        out["zstd_xor"], out["zstd_xor_s"] = zstd_xor(b, f, work)
    elif mode == "zerobase":
        from safetensors.torch import load_file, save_file
        import torch

        save_file({k: torch.zeros_like(v) for k, v in load_file(sys.argv[2]).items()}, sys.argv[3])
        return
    else:
        ft, dtype = sys.argv[2], sys.argv[4]
        f = read(ft)
        out = {"ft_bytes": len(f)}
        out["zipnn"], out["zipnn_s"] = zipnn_alone(f, ZIPNN_DTYPE[dtype])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
