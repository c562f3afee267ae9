#!/usr/bin/env python3
"""Independent reference implementation of weight-inspect's structural identity (schema 1).

    reference_identity.py FILE...              one JSON line per file:
                                               {"file", "canonical", "structural_hash"}, and for
                                               a training checkpoint (docs/SPEC.md §5d)
                                               "model_canonical" and "model_identity"
    reference_identity.py --canonical FILE     the canonical JSON bytes alone, plus "\\n"
                                               (what `weight-inspect id --canonical` prints)

Shares no code with weight-inspect. Parsing is done by the formats' own Python packages:
gguf-py's GGUFReader for GGUF v2/v3 (either byte order), the safetensors package for safetensors
(safe_open validates the file and gives __metadata__; dtype/shape/offsets come from a json parse
of the header). gguf-py cannot read GGUF v1, so v1 has a small struct-based reader here.
PyTorch checkpoints are read with Python's zipfile and pickle (a restricted Unpickler; torch is
never imported).

The canonical form (see docs/SPEC.md): one JSON object, no whitespace, keys sorted by UTF-8
bytes, {"format", "gguf_version" (GGUF only), "metadata", "tensors": {name: {"byte_length",
"dtype", "shape"}}}; integers as JSON integers, f64 as the integer of its bit pattern, f32 as
"f32:<bit pattern as u32>", strings escaped minimally (checked below against our own escaper).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import re
import os
import pickle
import shutil
import struct
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType
from safetensors import safe_open

VT = GGUFValueType

# ggml's type table: gguf-py's GGML_QUANT_SIZES with two documented differences.
TYPES: dict[int, tuple[str, int, int]] = {
    int(t): (t.name.lower(), *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType
}
# gguf-py 0.19 says 40 bytes per q8_1 block; ggml's block_q8_1 is 2 x f16 + 32 x i8 = 36 bytes.
TYPES[int(GGMLQuantizationType.Q8_1)] = ("q8_1", 32, 36)
# ggml type 42 postdates gguf-py 0.19.
TYPES[42] = ("q2_0", 64, 18)


class Invalid(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Canonical JSON


def escape_reference(s: str) -> str:
    """The string escaping rule of the canonical form, written out independently of json."""
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    out = []
    for ch in s:
        if ch in short:
            out.append(short[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def check_strings(value: Any) -> None:
    """Asserts json.dumps escapes every string (key or value) exactly as the rule says."""
    if isinstance(value, str):
        got = json.dumps(value, ensure_ascii=False)
        if got != escape_reference(value):
            raise AssertionError(f"json.dumps escapes {value!r} as {got}, rule says {escape_reference(value)}")
    elif isinstance(value, dict):
        for k, v in value.items():
            check_strings(k)
            check_strings(v)
    elif isinstance(value, list):
        for v in value:
            check_strings(v)


def canonical(doc: dict[str, Any]) -> bytes:
    check_strings(doc)
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # Python orders keys by code point; for valid Unicode that is the UTF-8 byte order.
    return text.encode("utf-8")


def f32_bits(raw: bytes) -> str:
    return f"f32:{int.from_bytes(raw, 'little')}"


def f64_bits(raw: bytes) -> int:
    return int.from_bytes(raw, "little")


def tensor_entry(name: str, type_id: int, dims: list[int]) -> dict[str, Any]:
    if type_id not in TYPES:
        raise Invalid(f"tensor {name!r}: unknown ggml type {type_id}")
    type_name, block, size = TYPES[type_id]
    n = 1
    for d in dims:
        n *= d
    if dims and dims[0] % block != 0:
        raise Invalid(f"tensor {name!r}: ne[0]={dims[0]} is not a multiple of the {type_name} block size {block}")
    return {"byte_length": n // block * size, "dtype": type_name, "shape": dims}


# --------------------------------------------------------------------------------------------
# GGUF v2/v3 through gguf-py


class HeaderOnlyReader(GGUFReader):
    """GGUFReader without its tensor-data step, which needs the whole file and gguf-py's type
    enum: we only need the tensor infos, and must handle partial files and type 42."""

    def _build_tensors(self, start_offs: int, fields: list[Any]) -> None:
        self.tensor_infos = []
        for field in fields:
            _name_len, name_data, _n_dims, dims, raw_dtype, _offset = field.parts
            self.tensor_infos.append((bytes(name_data).decode("utf-8"), int(raw_dtype[0]), [int(d) for d in dims]))


def np_scalar_bytes_le(arr: np.ndarray) -> bytes:
    """The little-endian bytes of a one-element array of either byte order."""
    big = arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big")
    raw = arr.tobytes()
    return raw[::-1] if big else raw


def gguf_value(parts: list[np.ndarray], i: int, vtype: int) -> tuple[Any, int]:
    """Decodes one value from a ReaderField's parts starting at index i; returns (value, next i).

    gguf-py's ReaderField.contents() flattens arrays of arrays, so walk the raw parts instead:
    a string is [length, bytes], a scalar one part, an array [element type, count, items...].
    """
    if vtype == VT.STRING:
        return bytes(parts[i + 1]).decode("utf-8"), i + 2
    if vtype == VT.ARRAY:
        itype, count = int(parts[i][0]), int(parts[i + 1][0])
        i += 2
        items = []
        for _ in range(count):
            item, i = gguf_value(parts, i, itype)
            items.append(item)
        return items, i
    part = parts[i]
    if vtype == VT.FLOAT32:
        return f32_bits(np_scalar_bytes_le(part)), i + 1
    if vtype == VT.FLOAT64:
        return f64_bits(np_scalar_bytes_le(part)), i + 1
    if vtype == VT.BOOL:
        return bool(part[0]), i + 1
    return int(part[0]), i + 1


def gguf_doc_gguf_py(path: Path) -> dict[str, Any]:
    reader = HeaderOnlyReader(path)
    version = int(reader.fields["GGUF.version"].parts[0][0])
    metadata = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):  # gguf-py's pseudo-fields for the header
            continue
        value, end = gguf_value(field.parts, 3, int(field.parts[2][0]))
        assert end == len(field.parts), name
        metadata[name] = value
    tensors = {}
    for name, type_id, dims in reader.tensor_infos:
        if name in tensors:
            raise Invalid(f"duplicate tensor {name!r}")
        tensors[name] = tensor_entry(name, type_id, dims)
    return {"format": "gguf", "gguf_version": version, "metadata": metadata, "tensors": tensors}


# --------------------------------------------------------------------------------------------
# GGUF v1 (gguf-py reads only v2 and v3): u32 counts, string lengths, array lengths and dims.


class V1Reader:
    SCALARS = {
        VT.UINT8: "B", VT.INT8: "b", VT.UINT16: "H", VT.INT16: "h", VT.UINT32: "I", VT.INT32: "i",
        VT.FLOAT32: "f", VT.UINT64: "Q", VT.INT64: "q", VT.FLOAT64: "d", VT.BOOL: "?",
    }

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise Invalid(f"v1 header ends early at offset {self.pos}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def string(self) -> str:
        return self.take(self.u32()).decode("utf-8")

    def value(self, vtype: int) -> Any:
        if vtype == VT.STRING:
            return self.string()
        if vtype == VT.ARRAY:
            itype, count = self.u32(), self.u32()
            return [self.value(itype) for _ in range(count)]
        fmt = self.SCALARS[VT(vtype)]
        raw = self.take(struct.calcsize(fmt))
        if vtype == VT.FLOAT32:
            return f32_bits(raw)
        if vtype == VT.FLOAT64:
            return f64_bits(raw)
        return struct.unpack("<" + fmt, raw)[0]


def gguf_doc_v1(data: bytes) -> dict[str, Any]:
    r = V1Reader(data)
    r.take(8)  # magic, version
    n_tensors, n_kv = r.u32(), r.u32()
    metadata = {}
    for _ in range(n_kv):
        key = r.string()
        if key in metadata:
            raise Invalid(f"duplicate key {key!r}")
        metadata[key] = r.value(r.u32())
    tensors = {}
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.u32() for _ in range(r.u32())]
        type_id = r.u32()
        r.take(8)  # offset
        if name in tensors:
            raise Invalid(f"duplicate tensor {name!r}")
        tensors[name] = tensor_entry(name, type_id, dims)
    return {"format": "gguf", "gguf_version": 1, "metadata": metadata, "tensors": tensors}


def gguf_doc(path: Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        head = f.read(8)
    le_version, be_version = struct.unpack("<I", head[4:8])[0], struct.unpack(">I", head[4:8])[0]
    if le_version == 1:
        return gguf_doc_v1(path.read_bytes())
    if be_version == 1:
        raise Invalid("big-endian GGUF v1 does not exist")
    return gguf_doc_gguf_py(path)


# --------------------------------------------------------------------------------------------
# safetensors


def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise Invalid(f"duplicate JSON key {k!r}")
        out[k] = v
    return out


def safetensors_doc(path: Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"), object_pairs_hook=no_duplicates)
    metadata = header.pop("__metadata__", None)
    tensors = {}
    data_end = 0
    for name, info in header.items():
        begin, end = info["data_offsets"]
        data_end = max(data_end, end)
        tensors[name] = {"byte_length": end - begin, "dtype": info["dtype"].lower(), "shape": info["shape"]}

    # Let the safetensors package validate the file and read __metadata__. A partial download
    # (header complete, data cut short) is padded in a temporary copy, since safe_open insists
    # on the whole file and the identity does not depend on the data.
    expected_size = 8 + n + data_end
    with tempfile.TemporaryDirectory() as tmp:
        target = path
        if os.path.getsize(path) < expected_size:
            target = Path(tmp) / path.name
            shutil.copyfile(path, target)
            with open(target, "r+b") as f:
                f.truncate(expected_size)
        with safe_open(str(target), framework="numpy") as st:
            package_metadata = st.metadata()
            package_names = set(st.keys())
    if package_metadata != metadata:
        raise AssertionError(f"safetensors package metadata {package_metadata!r} != header {metadata!r}")
    if package_names != set(tensors):
        raise AssertionError("safetensors package sees other tensors than the header lists")
    return {"format": "safetensors", "metadata": metadata or {}, "tensors": tensors}


# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# PyTorch checkpoints (docs/SPEC.md, "PyTorch checkpoints"): Python's own Unpickler with
# find_class limited to the globals torch.save names for dense tensors, each standing for a
# plain Python function here (torch is never imported); persistent_load gives a storage's dtype.

TORCH_DTYPES = {
    "float32": "f32", "float": "f32", "float64": "f64", "double": "f64", "float16": "f16",
    "half": "f16", "bfloat16": "bf16", "int64": "i64", "long": "i64", "int32": "i32", "int": "i32",
    "int16": "i16", "short": "i16", "int8": "i8", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "bool": "bool", "complex32": "c32", "chalf": "c32", "complex64": "c64",
    "cfloat": "c64", "complex128": "c128", "cdouble": "c128", "float8_e4m3fn": "f8_e4m3",
    "float8_e4m3fnuz": "f8_e4m3fnuz", "float8_e5m2": "f8_e5m2", "float8_e5m2fnuz": "f8_e5m2fnuz",
    "float8_e8m0fnu": "f8_e8m0", "float4_e2m1fn_x2": "f4_e2m1_x2", "bits8": "bits8",
    "bits16": "bits16", "bits1x8": "bits1x8", "bits2x4": "bits2x4", "bits4x2": "bits4x2",
}
DTYPE_BYTES = {
    "f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1,
    "u16": 2, "u32": 4, "u64": 8, "bool": 1, "c32": 4, "c64": 8, "c128": 16, "f8_e4m3": 1,
    "f8_e4m3fnuz": 1, "f8_e5m2": 1, "f8_e5m2fnuz": 1, "f8_e8m0": 1, "f4_e2m1_x2": 1,
    "bits8": 1, "bits16": 2, "bits1x8": 1, "bits2x4": 1, "bits4x2": 1,
}
TYPED_STORAGES = {
    "FloatStorage": "f32", "DoubleStorage": "f64", "HalfStorage": "f16", "BFloat16Storage": "bf16",
    "LongStorage": "i64", "IntStorage": "i32", "ShortStorage": "i16", "CharStorage": "i8",
    "ByteStorage": "u8", "BoolStorage": "bool", "ComplexFloatStorage": "c64",
    "ComplexDoubleStorage": "c128",
}


class TorchTensor:
    def __init__(self, dtype: str, size: tuple):
        self.dtype, self.size = dtype, list(size)


class StorageType:
    def __init__(self, dtype: str | None):
        self.dtype = dtype


class TorchDtype:
    def __init__(self, dtype: str):
        self.dtype = dtype


class Storage:
    def __init__(self, dtype: str | None):
        self.dtype = dtype


def rebuild_tensor(storage, _offset, size, _stride, *_rest):
    return TorchTensor(storage.dtype, size)


def rebuild_tensor_v3(storage, _offset, size, _stride, _grad, _hooks, dtype, *_rest):
    return TorchTensor(dtype.dtype, size)


def rebuild_parameter(data, *_rest):
    return data


def rebuild_from_type_v2(func, _new_type, args, _state):
    return func(*args)


class TensorClass:
    pass


class Namespace:
    """argparse.Namespace of a fairseq checkpoint, inert: its BUILD state (a dict of training
    arguments) is kept and walked as the attributes under the stand-in's name (`args.lr`), as
    docs/pytorch.md says of stand-ins; nothing of argparse is imported."""

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, dict):
            raise Invalid("argparse.Namespace with a BUILD state that is not a dict")
        self.state = state


class RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file, storages: dict[str, Storage]):
        super().__init__(file)
        self.storages = storages

    def find_class(self, module: str, name: str):
        known = {
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("torch._utils", "_rebuild_tensor"): rebuild_tensor,
            ("torch._utils", "_rebuild_tensor_v2"): rebuild_tensor,
            ("torch._utils", "_rebuild_tensor_v3"): rebuild_tensor_v3,
            ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): rebuild_parameter,
            ("torch._tensor", "_rebuild_from_type_v2"): rebuild_from_type_v2,
            ("torch", "Tensor"): TensorClass,
            ("argparse", "Namespace"): Namespace,
            ("torch.nn.parameter", "Parameter"): TensorClass,
            ("torch", "UntypedStorage"): StorageType(None),
            ("torch.storage", "UntypedStorage"): StorageType(None),
        }
        if (module, name) in known:
            return known[(module, name)]
        if module == "torch" and name in TYPED_STORAGES:
            return StorageType(TYPED_STORAGES[name])
        if module == "torch" and name in TORCH_DTYPES:
            return TorchDtype(TORCH_DTYPES[name])
        raise Invalid(f"refused global {module}.{name}")

    def persistent_load(self, pid):
        kind, storage_type, key = pid[0], pid[1], str(pid[2])
        if kind != "storage":
            raise Invalid(f"persistent id {pid!r}")
        return self.storages.setdefault(key, Storage(storage_type.dtype))


# docs/SPEC.md §5b: a container or str met again (shared through the pickle's memo) that
# weighs more than this is walked once, at its first path; each later path is the metadata
# entry `PATH.__alias__` naming the first.
SHARED_COPY_BYTES = 4096


def shareable(value: Any) -> bool:
    """What the walk tells apart by identity: containers and strings."""
    return isinstance(value, (dict, list, tuple, str, Namespace))


def weight_children(value: Any) -> list[Any]:
    """Everything a part holds, keys included, for its weight."""
    if isinstance(value, dict):
        return [x for pair in value.items() for x in pair]
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Namespace):
        # Its call's arguments (an empty tuple) and its BUILD state.
        return [(), getattr(value, "state", {})]
    return []


def own_weight(value: Any) -> int:
    if isinstance(value, str):
        return 64 + len(value.encode("utf-8", "surrogatepass"))
    return 64


def weigher() -> Any:
    """What walking a part at one path makes, roughly in bytes (64 per object in it, keys
    included, plus the bytes of its strings), memoized by identity; a cycle weighs infinity."""
    known: dict[int, float] = {}

    def weight(root: Any) -> float:
        stack = [(root, False)]
        while stack:
            part, children_done = stack.pop()
            if children_done:
                total: float = own_weight(part)
                for child in weight_children(part):
                    total += known.get(id(child), float("inf")) if shareable(child) else own_weight(child)
                known[id(part)] = total
                continue
            if id(part) in known:
                continue
            known[id(part)] = float("inf")
            stack.append((part, True))
            stack.extend((c, False) for c in weight_children(part) if shareable(c) and id(c) not in known)
        return known[id(root)]

    return weight


def pytorch_walk(root: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    tensors: dict[str, Any] = {}
    weight = weigher()
    first_paths: dict[int, str] = {}

    def plain(value: Any) -> Any:
        if isinstance(value, bool):
            return ("bool", value)
        if isinstance(value, int) and -(2**63) <= value < 2**63:
            return ("int", value)
        if isinstance(value, float):
            return ("float", struct.unpack("<Q", struct.pack("<d", value))[0])
        if isinstance(value, str):
            return ("str", value)
        return None

    def visit(value: Any, name: str) -> None:
        if shareable(value) and weight(value) > SHARED_COPY_BYTES:
            if id(value) in first_paths:
                metadata[f"{name}.__alias__" if name else "__alias__"] = first_paths[id(value)]
                return
            first_paths[id(value)] = name
        if isinstance(value, TorchTensor):
            elements = 1
            for d in value.size:
                elements *= d
            tensors[name] = {"byte_length": elements * DTYPE_BYTES[value.dtype], "dtype": value.dtype, "shape": value.size}
            return
        if isinstance(value, Namespace):
            value = getattr(value, "state", {})
        if isinstance(value, dict):
            for key, child in value.items():
                if isinstance(key, bool) or key is None:
                    key = str(key)
                elif not isinstance(key, (str, int)):
                    continue
                visit(child, f"{name}.{key}" if name else str(key))
            return
        if isinstance(value, (list, tuple)):
            items = [plain(v) for v in value]
            if items and items[0] is not None and all(i is not None and i[0] == items[0][0] for i in items):
                metadata[name] = [i[1] for i in items]
                return
            for i, child in enumerate(value):
                visit(child, f"{name}.{i}" if name else str(i))
            return
        scalar = plain(value)
        if scalar is not None:
            metadata[name] = scalar[1]

    visit(root, "")
    return {"format": "pytorch", "metadata": metadata, "tensors": tensors}


# docs/SPEC.md §5d: a training checkpoint (model weights beside optimizer, scheduler or RNG
# state, told by the root dict's keys) has a second identity beside its structural one, its
# model identity: that of its model weights and its groups.
GROUP_KEYS = {
    "model": {"state_dict", "model", "module", "model_state_dict"},
    "optimizer": {"optimizer_states", "optimizer", "optimizer_state_dict", "optimizer_history",
                  "last_optimizer_state"},
    "scheduler": {"lr_schedulers", "scheduler", "lr_scheduler"},
    "rng": {"rng_state", "rng_states", "numpy_rng", "torch_rng_state"},
}


def training_rule(root: Any, doc: dict[str, Any]) -> dict[str, Any] | None:
    """The model identity's document of a training checkpoint; None for every other file."""
    if not isinstance(root, dict):
        return None
    keys = [str(k) if isinstance(k, bool) or k is None else k for k in root
            if isinstance(k, (str, int)) or k is None]
    keys = [str(k) for k in keys]
    group_of = {k: next((g for g, names in GROUP_KEYS.items() if k in names), "other") for k in keys}
    groups = sorted(set(group_of.values()))
    if "model" not in groups or not {"optimizer", "scheduler", "rng"} & set(groups):
        return None
    model_keys = sorted(k for k, g in group_of.items() if g == "model")

    def model_name(name: str) -> str | None:
        for key in model_keys:
            if name == key or name.startswith(key + "."):
                return name[len(key) + 1:] if len(model_keys) == 1 else name
        return None

    def kept(items: dict[str, Any]) -> dict[str, Any]:
        return {model_name(k): v for k, v in items.items() if model_name(k) is not None}

    return {"format": "pytorch", "groups": groups, "metadata": kept(doc["metadata"]),
            "tensors": kept(doc["tensors"])}


def pytorch_root(path: Path) -> Any:
    storages: dict[str, Storage] = {}
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            pickles = [n for n in z.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
            if len(pickles) != 1:
                raise Invalid(f"{path}: {len(pickles)} data.pkl members")
            return RestrictedUnpickler(io.BytesIO(z.read(pickles[0])), storages).load()
    with open(path, "rb") as f:
        for _ in range(3):  # magic number, protocol, sys info
            RestrictedUnpickler(f, storages).load()
        return RestrictedUnpickler(f, storages).load()


def pytorch_doc(path: Path) -> dict[str, Any]:
    return pytorch_walk(pytorch_root(path))


def model_identity_doc(path: Path) -> dict[str, Any] | None:
    """A single PyTorch file's model identity document (§5d), or None."""
    if path.is_dir():
        return None
    with open(path, "rb") as f:
        magic = f.read(4)
    if not (magic.startswith(b"PK\x03\x04") or magic.startswith(b"\x80")):
        return None
    root = pytorch_root(path)
    return training_rule(root, pytorch_walk(root))


# --------------------------------------------------------------------------------------------
# multi-file models (docs/SPEC.md, "Multi-file models"): the identity of the same model written
# as one file. Written from the spec, without validating more than the merge needs.

SPLIT_KEYS = ("split.no", "split.count", "split.tensors.count")


def merged(docs: list[dict[str, Any]], metadata: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    tensors: dict[str, Any] = {}
    for doc in docs:
        for name, entry in doc["tensors"].items():
            if name in tensors:
                raise Invalid(f"tensor {name!r} in two parts")
            tensors[name] = entry
    return {**base, "metadata": metadata, "tensors": tensors}


def sharded_safetensors_doc(index_path: Path) -> dict[str, Any]:
    index = json.loads(index_path.read_text(encoding="utf-8"))
    shards = sorted(set(index["weight_map"].values()))
    docs = [safetensors_doc(index_path.parent / shard) for shard in shards]
    for shard, doc in zip(shards, docs):
        for name in doc["tensors"]:
            if index["weight_map"].get(name) != shard:
                raise Invalid(f"{shard}: tensor {name!r} not mapped to it by the index")
    if any(doc["metadata"] != docs[0]["metadata"] for doc in docs):
        raise Invalid("shards disagree on __metadata__")
    return merged(docs, docs[0]["metadata"] if docs else {}, {"format": "safetensors"})


def sharded_pytorch_doc(index_path: Path) -> dict[str, Any]:
    index = json.loads(index_path.read_text(encoding="utf-8"))
    shards = sorted(set(index["weight_map"].values()))
    docs = [pytorch_doc(index_path.parent / shard) for shard in shards]
    if any(doc["metadata"] != docs[0]["metadata"] for doc in docs):
        raise Invalid("shards disagree on metadata")
    return merged(docs, docs[0]["metadata"] if docs else {}, {"format": "pytorch"})


def split_gguf_doc(part: Path) -> dict[str, Any]:
    match = re.fullmatch(r"(.+)-(\d+)-of-(\d+)\.gguf", part.name)
    if match is None:
        raise Invalid(f"{part.name} is not named like a split GGUF part")
    base, count = match.group(1), int(match.group(3))
    docs = [gguf_doc(part.parent / f"{base}-{n:05d}-of-{count:05d}.gguf") for n in range(1, count + 1)]
    metadata = {k: v for k, v in docs[0]["metadata"].items() if k not in SPLIT_KEYS}
    return merged(docs, metadata, {"format": "gguf", "gguf_version": docs[0]["gguf_version"]})


def model_doc(path: Path) -> dict[str, Any]:
    if path.is_dir():
        indexes = sorted(path.glob("*.safetensors.index.json"))
        if len(indexes) == 1:
            return sharded_safetensors_doc(indexes[0])
        bin_indexes = sorted(path.glob("*.bin.index.json"))
        if len(bin_indexes) == 1:
            return sharded_pytorch_doc(bin_indexes[0])
        firsts = sorted(path.glob("*-00001-of-*.gguf"))
        if len(firsts) == 1:
            return split_gguf_doc(firsts[0])
        raise Invalid(f"{path}: not one multi-file model")
    if path.name.endswith(".safetensors.index.json"):
        return sharded_safetensors_doc(path)
    if path.name.endswith(".bin.index.json"):
        return sharded_pytorch_doc(path)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic.startswith(b"PK\x03\x04") or magic.startswith(b"\x80"):
        return pytorch_doc(path)
    if magic == b"GGUF":
        doc = gguf_doc(path)
        count = doc["metadata"].get("split.count")
        if isinstance(count, int) and count >= 1 and re.fullmatch(r".+-\d+-of-\d+\.gguf", path.name):
            return split_gguf_doc(path)
        return doc
    return safetensors_doc(path)


def identity(path: Path) -> bytes:
    return canonical(model_doc(path))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--canonical", action="store_true", help="print only the canonical JSON of one file")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    if args.canonical:
        if len(args.files) != 1:
            parser.error("--canonical takes one file")
        sys.stdout.buffer.write(identity(args.files[0]) + b"\n")
        return 0
    for path in args.files:
        text = identity(path)
        line = {"file": str(path), "canonical": text.decode("utf-8"), "structural_hash": hashlib.sha256(text).hexdigest()}
        model = model_identity_doc(path)
        if model is not None:
            model_text = canonical(model)
            line["model_canonical"] = model_text.decode("utf-8")
            line["model_identity"] = hashlib.sha256(model_text).hexdigest()
        print(json.dumps(line, ensure_ascii=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
