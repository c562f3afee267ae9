#!/usr/bin/env python3
"""Writes the safetensors twin of a PyTorch fixture: every tensor of tests/fixtures/pytorch's
manifest, laid out contiguously, under the name weight-inspect gives it (its key path joined by
"."), so `weight-inspect diff --values CHECKPOINT TWIN` can compare every value.

    pytorch_twin.py MANIFEST FILE OUT.safetensors

Independent of weight-inspect and without torch: storages come out of the checkpoint with
Python's zipfile (zip layout) or at the offsets the legacy layout's storage-keys pickle gives
(read with a restricted Unpickler that builds nothing but a list of strings); each tensor is
numpy's `as_strided` view of its storage (offset, shape and stride from the manifest, which the
fixture generator recorded from torch) and must hash to the manifest's SHA-256 of torch's own
contiguous bytes before it is written. Prints the names written as a JSON list. Dtypes
safetensors has no name for (complex128, complex32, bits8/16, float4_e2m1fn_x2) are left out.
"""

import hashlib
import io
import json
import pickle
import pickletools
import sys
import zipfile

import numpy as np
from safetensors import TensorSpec, serialize_file

SPEC = {
    "bool": "bool", "int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16",
    "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
    "float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "bfloat16",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2": "float8_e5m2", "float8_e5m2fnuz": "float8_e5m2fnuz",
    "float8_e8m0fnu": "float8_e8m0fnu", "complex64": "complex64",
}
SIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "float16": 2, "float32": 4, "float64": 8, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1, "complex64": 8,
}
UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class KeysOnly(pickle.Unpickler):
    """Unpickles the storage-keys pickle: strings and a list, no global of any kind."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing {module}.{name}")


def legacy_storages(data: bytes, entry: dict) -> dict[str, bytes]:
    stream = io.BytesIO(data)
    for _ in range(4):
        for _op in pickletools.genops(stream):
            pass
    keys = KeysOnly(stream).load()
    nbytes = {t["storage_key"]: t["storage_nbytes"] for t in entry["tensors"]}
    out, at = {}, stream.tell()
    for key in keys:
        at += 8
        out[key] = data[at : at + nbytes[key]]
        at += nbytes[key]
    return out


def name_of(path: list) -> str:
    return ".".join(str(k) for k in path)


def main() -> None:
    manifest = json.load(open(sys.argv[1]))
    file = sys.argv[2]
    entry = manifest["files"][file]
    path = f"{sys.argv[1].rsplit('/', 1)[0]}/{file}"
    data = open(path, "rb").read()
    if entry["layout"] == "zip":
        z = zipfile.ZipFile(path)
        folder = entry["archive_folder"]
        storages = {t["storage_key"]: z.read(f"{folder}/data/{t['storage_key']}") for t in entry["tensors"]}
    else:
        storages = legacy_storages(data, entry)
    specs, keep, names = {}, [], []
    for t in entry["tensors"]:
        dtype = t["dtype"]
        if dtype not in SPEC:
            continue
        size = SIZE[dtype]
        raw = np.frombuffer(storages[t["storage_key"]], dtype=UNSIGNED[size])
        view = np.lib.stride_tricks.as_strided(
            raw[t["storage_offset"] :],
            shape=t["shape"],
            strides=[s * size for s in t["stride"]],
            writeable=False,
        )
        contiguous = np.ascontiguousarray(view).tobytes()
        if hashlib.sha256(contiguous).hexdigest() != t["sha256"]:
            sys.exit(f"{file}: {t['path']}: the bytes differ from torch's")
        buf = np.frombuffer(contiguous, dtype=np.uint8).copy()
        keep.append(buf)
        name = name_of(t["path"])
        specs[name] = TensorSpec(dtype=SPEC[dtype], shape=t["shape"], data_ptr=buf.ctypes.data, data_len=len(contiguous))
        names.append(name)
    serialize_file(specs, sys.argv[3])
    del keep
    print(json.dumps(names))


if __name__ == "__main__":
    main()
