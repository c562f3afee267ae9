#!/usr/bin/env python3
"""Writes the test fixtures of weight-inspect with writers independent of it.

    make_fixtures.py OUTDIR          the small fixtures committed under tests/fixtures/
    make_fixtures.py OUTDIR --big    also vocab262k.gguf (about 7 MB; generated at test or
                                     bench time, never committed)
    make_fixtures.py OUTDIR --only vocab262k.gguf    just that one file

Writers:
  * GGUF v3 (both endians): gguf-py's GGUFWriter (package `gguf`, pinned in
    scripts/requirements-test.txt). GGUF v2 is GGUFWriter output with the version field patched
    to 2 (v2 and v3 share the layout; v3 only added big-endian files).
  * GGUF v1, and v3 content GGUFWriter cannot express (empty arrays, nested arrays whose inner
    element type is not i32/f32/bool/string, a file without any key), come from RawGGUF below: a
    few lines of struct.pack following the GGUF spec.
  * safetensors: the `safetensors` package (safetensors.numpy.save_file, and the low-level
    safetensors.serialize_file with raw bytes for dtypes numpy lacks). safetensors 0.8.0's
    TensorSpec refuses F6_E2M3 and F6_E3M2 ("Unknown dtype"), so f6-dtypes.safetensors is
    written by write_raw_safetensors below (struct.pack + json, as the format spec says).

Data bytes are arithmetic patterns, no randomness. Running the script again reproduces every GGUF
byte for byte; safetensors' writer emits __metadata__ in the order of a randomly seeded hash map,
so those bytes vary while the structural identity does not (tests/reference_identity.rs checks
that regenerated fixtures have the committed identities).
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFEndian, GGUFValueType, GGUFWriter
from safetensors import TensorSpec, serialize_file
from safetensors.numpy import save_file

VT = GGUFValueType

# ggml type 42 (q2_0, 64 elements in 18 bytes) postdates gguf-py 0.19, which lacks it.
GGML_Q2_0 = 42


def pattern(n: int, seed: int = 0) -> bytes:
    """n deterministic, non-constant bytes."""
    return bytes((i * 31 + seed * 7 + 11) % 251 for i in range(n))


def as_int8(data: bytes) -> np.ndarray:
    # GGUFWriter treats a uint8 array with raw_dtype as the byte shape of a quantized tensor
    # (converting it with gguf-py's size table); an int8 array keeps raw_shape as the element
    # shape, which lets us write types gguf-py sizes differently from ggml (q8_1) or lacks (q2_0).
    return np.frombuffer(data, dtype=np.int8).copy()


def finish(writer: GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# --------------------------------------------------------------------------------------------
# Strings and keys that exercise the escaping rules of the canonical form.

TRICKY_STRINGS = {
    "empty": "",
    "ascii": "plain ascii",
    "latin1": "héllo wörld ß",
    "cjk": "日本語のテキスト",
    "emoji": "llama 🦙 and 🤗 (4-byte UTF-8)",
    "controls": "nul\x00 soh\x01 us\x1f del\x7f",
    "short_escapes": 'quote" backslash\\ slash/ bs\b ff\f nl\n cr\r tab\t',
    "line_separators": "ls\u2028 ps\u2029 bom\ufeff nbsp\u00a0",
    "max_codepoint": "\U0010ffff",
}

TRICKY_KEYS = [
    "test.ключ.🔑",
    'test.quote"back\\slash',
    "test.ctl\x01\ttab",
    "Test.UPPER",  # sorts before lowercase by byte
    "test.é",
    "test.z",
]


def add_all_scalars(w: GGUFWriter) -> None:
    w.add_uint8("test.u8", 255)
    w.add_int8("test.i8", -128)
    w.add_uint16("test.u16", 65535)
    w.add_int16("test.i16", -32768)
    w.add_uint32("test.u32", 4294967295)
    w.add_int32("test.i32", -2147483648)
    w.add_float32("test.f32", 3.0)
    w.add_float32("test.f32_neg_zero", -0.0)
    w.add_float32("test.f32_nan", float("nan"))
    w.add_float32("test.f32_inf", float("-inf"))
    w.add_float32("test.f32_subnormal", 1e-45)
    w.add_float32("test.f32_tenth", 0.1)
    w.add_uint64("test.u64", 2**64 - 1)
    w.add_int64("test.i64", -(2**63))
    w.add_float64("test.f64", 2.0)
    w.add_float64("test.f64_neg_zero", -0.0)
    w.add_float64("test.f64_nan", float("nan"))
    w.add_float64("test.f64_min_subnormal", 5e-324)
    w.add_float64("test.f64_tenth", 0.1)
    w.add_bool("test.bool_true", True)
    w.add_bool("test.bool_false", False)
    for name, s in TRICKY_STRINGS.items():
        # add_string drops empty strings; add_key_value keeps them.
        w.add_key_value(f"test.str.{name}", s, VT.STRING)
    for i, key in enumerate(TRICKY_KEYS):
        w.add_uint32(key, i)


def add_all_arrays(w: GGUFWriter) -> None:
    typed = {
        VT.UINT8: [0, 1, 255],
        VT.INT8: [-128, 0, 127],
        VT.UINT16: [0, 65535],
        VT.INT16: [-32768, 32767],
        VT.UINT32: [0, 4294967295],
        VT.INT32: [-2147483648, 2147483647],
        VT.FLOAT32: [1.5, -0.0, float("nan"), float("inf")],
        VT.UINT64: [0, 1, 2**64 - 1],
        VT.INT64: [-(2**63), 0, 2**63 - 1],
        VT.FLOAT64: [2.0, -0.0, 0.1, float("-inf")],
        VT.BOOL: [True, False, True],
        VT.STRING: list(TRICKY_STRINGS.values()),
    }
    for vtype, values in typed.items():
        w.add_key_value(f"test.arr.{vtype.name.lower()}", values, VT.ARRAY, sub_type=vtype)
    # Nested arrays: GGUFWriter infers each inner array's element type from its first item
    # (int -> i32, float -> f32, bool -> bool, str -> string) and each inner array has its own.
    w.add_key_value("test.nested.i32", [[1, 2, 3], [4], [-5, 6]], VT.ARRAY)
    w.add_key_value("test.nested.strings", [["a", "b"], ["ü", "\n"]], VT.ARRAY)
    w.add_key_value("test.nested.three_levels", [[[1], [2, 3]], [[4]]], VT.ARRAY)
    w.add_key_value("test.nested.mixed_inner_types", [[1, 2], ["x"], [0.5], [True]], VT.ARRAY)


# --------------------------------------------------------------------------------------------
# Hand-built GGUF (v1 layout, and what GGUFWriter cannot express).

SCALAR_FMT = {
    VT.UINT8: "B", VT.INT8: "b", VT.UINT16: "H", VT.INT16: "h", VT.UINT32: "I", VT.INT32: "i",
    VT.FLOAT32: "f", VT.UINT64: "Q", VT.INT64: "q", VT.FLOAT64: "d", VT.BOOL: "?",
}


class RawGGUF:
    """A GGUF writer in struct.pack, straight from the GGUF spec.

    Values are (type, value) pairs; an array value is (VT.ARRAY, (element_type, [items])) and
    an item of an array of arrays is itself (element_type, [items]). v1 stores tensor and kv
    counts, string lengths, array lengths and dims as u32; v2/v3 as u64.
    """

    def __init__(self, version: int = 3, endian: str = "<", alignment: int = 32):
        self.version = version
        self.e = endian
        self.alignment = alignment
        self.kv: list[tuple[str | bytes, int, object]] = []
        self.tensors: list[tuple[str, int, list[int], bytes]] = []

    def count(self, n: int) -> bytes:
        return struct.pack(self.e + ("I" if self.version == 1 else "Q"), n)

    def string(self, s: str | bytes) -> bytes:
        b = s.encode("utf-8") if isinstance(s, str) else s
        return self.count(len(b)) + b

    def value(self, vtype: int, val: object) -> bytes:
        if vtype == VT.STRING:
            return self.string(val)  # type: ignore[arg-type]
        if vtype == VT.ARRAY:
            itype, items = val  # type: ignore[misc]
            out = struct.pack(self.e + "I", itype) + self.count(len(items))
            return out + b"".join(self.value(itype, item) for item in items)
        return struct.pack(self.e + SCALAR_FMT[VT(vtype)], val)

    def add(self, key: str | bytes, vtype: int, val: object) -> None:
        self.kv.append((key, vtype, val))

    def add_tensor(self, name: str, ggml_type: int, dims: list[int], data: bytes) -> None:
        self.tensors.append((name, ggml_type, dims, data))

    def to_bytes(self) -> bytes:
        out = bytearray(struct.pack("<I", 0x46554747))  # "GGUF", byte order independent
        out += struct.pack(self.e + "I", self.version)
        out += self.count(len(self.tensors)) + self.count(len(self.kv))
        for key, vtype, val in self.kv:
            out += self.string(key) + struct.pack(self.e + "I", vtype) + self.value(vtype, val)
        offset = 0
        for name, ggml_type, dims, data in self.tensors:
            out += self.string(name) + struct.pack(self.e + "I", len(dims))
            out += b"".join(self.count(d) for d in dims)
            out += struct.pack(self.e + "IQ", ggml_type, offset)
            offset += pad(len(data), self.alignment)
        out += bytes(pad(len(out), self.alignment) - len(out))
        for _, _, _, data in self.tensors:
            out += data + bytes(pad(len(data), self.alignment) - len(data))
        return bytes(out)


def pad(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


# --------------------------------------------------------------------------------------------
# GGUF fixtures.


def gguf_all_types(path: Path, endian: GGUFEndian = GGUFEndian.LITTLE, alignment: int | None = None) -> None:
    w = GGUFWriter(path, "llama", endianess=endian)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_name("all metadata value types")
    add_all_scalars(w)
    add_all_arrays(w)
    w.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    w.add_tensor("blk.0.attn_norm.weight", np.linspace(-1, 1, 8, dtype=np.float32))
    w.add_tensor("blk.0.ffn_down.weight", np.arange(16, dtype=np.float16).reshape(2, 8))
    w.add_tensor("blk.0.idx", np.arange(6, dtype=np.int32))
    w.add_tensor("blk.0.ffn_up.weight", as_int8(pattern(2 * 18)), raw_shape=[2, 32], raw_dtype=GGMLQuantizationType.Q4_0)
    w.add_tensor("naïve.tensor.名前", np.zeros(3, dtype=np.float64))
    finish(w)


def gguf_v2(path: Path) -> None:
    w = GGUFWriter(path, "llama")
    w.add_name("version 2 file")
    w.add_uint32("llama.block_count", 1)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_key_value("tokenizer.ggml.tokens", ["<s>", "</s>", "▁a"], VT.ARRAY, sub_type=VT.STRING)
    w.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))
    w.add_tensor("output.weight", as_int8(pattern(34 * 2)), raw_shape=[2, 32], raw_dtype=GGMLQuantizationType.Q8_0)
    finish(w)
    data = bytearray(path.read_bytes())
    assert struct.unpack_from("<I", data, 4)[0] == 3
    struct.pack_into("<I", data, 4, 2)
    path.write_bytes(bytes(data))


def gguf_v1(path: Path) -> None:
    g = RawGGUF(version=1)
    g.add("general.architecture", VT.STRING, "llama")
    g.add("general.name", VT.STRING, "version 1 file ✓")
    g.add("llama.context_length", VT.UINT32, 2048)
    g.add("llama.rope.freq_base", VT.FLOAT32, 10000.0)
    g.add("test.f64", VT.FLOAT64, 2.0)
    g.add("test.u64", VT.UINT64, 2**40)
    g.add("test.bool", VT.BOOL, True)
    g.add("tokenizer.ggml.tokens", VT.ARRAY, (VT.STRING, ["<unk>", "<s>", "</s>", "é"]))
    g.add("tokenizer.ggml.scores", VT.ARRAY, (VT.FLOAT32, [0.0, -1.5, -2.5, 3.0]))
    g.add("test.nested", VT.ARRAY, (VT.ARRAY, [(VT.UINT16, [1, 2]), (VT.STRING, ["x"])]))
    g.add_tensor("token_embd.weight", GGMLQuantizationType.F32, [4, 2], pattern(32))
    g.add_tensor("blk.0.attn_q.weight", GGMLQuantizationType.Q4_0, [32, 2], pattern(36, 1))
    g.add_tensor("output_norm.weight", GGMLQuantizationType.F16, [4], pattern(8, 2))
    path.write_bytes(g.to_bytes())


def gguf_handbuilt_edge(path: Path) -> None:
    """v3 content GGUFWriter refuses or cannot type: empty arrays, typed nested arrays."""
    g = RawGGUF(version=3)
    g.add("general.architecture", VT.STRING, "llama")
    g.add("test.empty_u32", VT.ARRAY, (VT.UINT32, []))
    g.add("test.empty_strings", VT.ARRAY, (VT.STRING, []))
    g.add("test.empty_nested", VT.ARRAY, (VT.ARRAY, []))
    g.add("test.nested_with_empty", VT.ARRAY, (VT.ARRAY, [(VT.INT64, []), (VT.INT64, [-1])]))
    g.add("test.nested_u64", VT.ARRAY, (VT.ARRAY, [(VT.UINT64, [2**64 - 1]), (VT.UINT64, [0, 7])]))
    g.add("test.nested_f64", VT.ARRAY, (VT.ARRAY, [(VT.FLOAT64, [2.0, -0.0]), (VT.FLOAT32, [3.0])]))
    g.add("test.nested_u8_i8_u16_i16", VT.ARRAY, (VT.ARRAY, [
        (VT.UINT8, [255]), (VT.INT8, [-1]), (VT.UINT16, [65535]), (VT.INT16, [-2])]))
    g.add("test.empty_string", VT.STRING, "")
    # Four dims (the most ggml has), a dim of 1, and a zero-element tensor.
    g.add_tensor("four_dims", GGMLQuantizationType.F32, [2, 1, 3, 2], pattern(48))
    g.add_tensor("zero_elements", GGMLQuantizationType.F32, [0, 4], b"")
    g.add_tensor("q4_k", GGMLQuantizationType.Q4_K, [256], pattern(144, 3))
    path.write_bytes(g.to_bytes())


def gguf_empty(path: Path) -> None:
    """No metadata and no tensors: the smallest valid GGUF (24 bytes + padding)."""
    path.write_bytes(RawGGUF(version=3).to_bytes())


def quant_type_table() -> list[tuple[int, str, int, int]]:
    """(id, name, block size, bytes per block) for every ggml type, as ggml defines them."""
    table = [(int(t), t.name.lower(), *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType]
    # gguf-py 0.19 gives q8_1 40 bytes per block; ggml's block_q8_1 is 2 x f16 + 32 x i8 = 36.
    table = [(i, n, b, 36 if n == "q8_1" else s) for i, n, b, s in table]
    table.append((GGML_Q2_0, "q2_0", 64, 18))
    return sorted(table)


def gguf_quant_types(path: Path) -> None:
    """One tensor of every ggml type gguf-py knows (plus q2_0), each 3 blocks along ne[1]."""
    w = GGUFWriter(path, "llama")
    w.add_name("one tensor per ggml type")
    for type_id, name, block, size in quant_type_table():
        ne0 = block if block > 1 else 8
        nbytes = 3 * ne0 // block * size
        w.add_tensor(f"t.{name}", as_int8(pattern(nbytes, type_id)), raw_shape=[3, ne0], raw_dtype=type_id)
    finish(w)


def gguf_truncated(path: Path) -> None:
    """A complete header whose tensor data stops part way through the second tensor."""
    full = path.with_suffix(".full")
    w = GGUFWriter(full, "llama")
    w.add_name("truncated download")
    w.add_uint32("llama.block_count", 2)
    w.add_tensor("a", np.arange(64, dtype=np.float32))
    w.add_tensor("b", np.arange(64, dtype=np.float32))
    finish(w)
    data = full.read_bytes()
    full.unlink()
    path.write_bytes(data[: len(data) - 100])


def gguf_golden_minimal(path: Path) -> None:
    w = GGUFWriter(path, "llama")
    w.add_tensor("w", np.arange(4, dtype=np.float32))
    finish(w)


def gguf_golden_types(path: Path, **writer) -> None:
    w = GGUFWriter(path, "llama", **writer)
    w.add_uint8("u8", 1)
    w.add_int8("i8", -1)
    w.add_uint16("u16", 2)
    w.add_int16("i16", -2)
    w.add_uint32("u32", 3)
    w.add_int32("i32", -3)
    w.add_float32("f32", 3.0)
    w.add_uint64("u64", 4)
    w.add_int64("i64", -4)
    w.add_float64("f64", 2.0)
    w.add_bool("bool", True)
    w.add_string("string", 'é"\\\n\x01/')
    w.add_key_value("array", [["a"], ["b", "c"]], VT.ARRAY)
    w.add_tensor("q", as_int8(pattern(144)), raw_shape=[1, 256], raw_dtype=GGMLQuantizationType.Q4_K)
    w.add_tensor("n", np.ones((2, 3), dtype=np.float32))
    finish(w)


# --------------------------------------------------------------------------------------------
# safetensors fixtures.

# TensorSpec dtype names accepted by safetensors 0.8.0 and the header code they produce.
SPEC_DTYPES = {
    "bool": "BOOL", "int8": "I8", "uint8": "U8", "int16": "I16", "uint16": "U16",
    "int32": "I32", "uint32": "U32", "int64": "I64", "uint64": "U64", "float16": "F16",
    "float32": "F32", "float64": "F64", "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3",
    "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2": "F8_E5M2", "float8_e5m2fnuz": "F8_E5M2FNUZ",
    "float8_e8m0fnu": "F8_E8M0", "float4_e2m1fn_x2": "F4", "complex64": "C64",
}
BITS = {
    "BOOL": 8, "I8": 8, "U8": 8, "I16": 16, "U16": 16, "I32": 32, "U32": 32, "I64": 64,
    "U64": 64, "F16": 16, "F32": 32, "F64": 64, "BF16": 16, "F8_E4M3": 8, "F8_E4M3FNUZ": 8,
    "F8_E5M2": 8, "F8_E5M2FNUZ": 8, "F8_E8M0": 8, "F4": 4, "C64": 64, "F6_E2M3": 6, "F6_E3M2": 6,
}

TRICKY_METADATA = {
    "format": "pt",
    "empty": "",
    "unicode ключ 🔑": "значение 🦙",
    "escapes": 'quote" backslash\\ slash/ nl\n tab\t nul\x00 del\x7f ls\u2028',
    "Upper": "sorts first",
}


def st_all_dtypes(path: Path) -> None:
    keep = []
    specs = {}
    for i, (spec_name, code) in enumerate(SPEC_DTYPES.items()):
        # F4 packs two values per byte; TensorSpec takes its storage shape and doubles the last dim.
        storage_shape = [2, 2] if code == "F4" else [2, 4]
        n_bytes = 2 * 4 * BITS[code] // 8
        if code == "BOOL":
            buf = np.frombuffer(bytes(j % 2 for j in range(n_bytes)), dtype=np.uint8).copy()
        else:
            buf = np.frombuffer(pattern(n_bytes, i), dtype=np.uint8).copy()
        keep.append(buf)
        specs[f"t.{code.lower()}"] = TensorSpec(dtype=spec_name, shape=storage_shape, data_ptr=buf.ctypes.data, data_len=n_bytes)
    serialize_file(specs, str(path), metadata=TRICKY_METADATA)
    del keep


def write_raw_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]], metadata: dict[str, str] | None) -> None:
    """safetensors by hand: u64 LE header length, JSON header padded with spaces to 8 bytes, data."""
    header: dict[str, object] = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(d for _, _, d in tensors.values()))


def st_f6(path: Path) -> None:
    # 8 six-bit values pack into 6 bytes.
    write_raw_safetensors(path, {
        "t.f6_e2m3": ("F6_E2M3", [2, 4], pattern(6, 1)),
        "t.f6_e3m2": ("F6_E3M2", [8], pattern(6, 2)),
    }, {"writer": "struct.pack (safetensors 0.8.0 has no TensorSpec for F6)"})


def st_no_metadata(path: Path) -> None:
    save_file({
        "model.embed_tokens.weight": np.arange(24, dtype=np.float32).reshape(6, 4),
        "model.norm.weight": np.ones(4, dtype=np.float16),
        "scalar": np.array(7, dtype=np.int64),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "名前": np.arange(3, dtype=np.uint8),
    }, str(path))


def st_with_metadata(path: Path) -> None:
    save_file({
        "model.embed_tokens.weight": np.arange(24, dtype=np.float32).reshape(6, 4),
        "model.norm.weight": np.ones(4, dtype=np.float16),
    }, str(path), metadata={"format": "pt", "total_size": "104"})


def st_empty(path: Path) -> None:
    save_file({}, str(path))


def st_truncated(path: Path) -> None:
    full = path.with_suffix(".full")
    save_file({"a": np.arange(64, dtype=np.float32), "b": np.arange(64, dtype=np.float32)}, str(full), metadata={"note": "truncated download"})
    data = full.read_bytes()
    full.unlink()
    path.write_bytes(data[: len(data) - 100])


def st_golden_tensors() -> dict[str, np.ndarray]:
    return {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.zeros(3, dtype=np.float16),
    }


def st_golden(path: Path) -> None:
    save_file(st_golden_tensors(), str(path), metadata={"format": "pt", "note": "é\n"})


def st_golden_sharded(path: Path) -> None:
    """golden.safetensors as transformers would shard it: huggingface_hub's planner with a 24-byte
    limit (w, then b), the safetensors package, and the index."""
    from huggingface_hub import split_state_dict_into_shards_factory

    path.mkdir(exist_ok=True)
    tensors = st_golden_tensors()
    split = split_state_dict_into_shards_factory(
        tensors, get_storage_size=lambda a: a.nbytes, filename_pattern="model{suffix}.safetensors", max_shard_size=24
    )
    for filename, names in split.filename_to_tensors.items():
        save_file({n: tensors[n] for n in names}, str(path / filename), metadata={"format": "pt", "note": "é\n"})
    index = {"metadata": split.metadata, "weight_map": split.tensor_to_filename}
    (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def gguf_golden_split(path: Path) -> None:
    """golden-types.gguf split by gguf-py's writer into one part per tensor."""
    path.mkdir(exist_ok=True)
    gguf_golden_types(path / "golden-types.gguf", split_max_tensors=1)


# --------------------------------------------------------------------------------------------
# The big vocabulary file (benchmarks and scale tests).

CHAT_TEMPLATE_BLOCK = (
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- bos_token }}{%- if tools is not none %}{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{%- for message in messages %}{%- if not (message.role == 'ipython' or message.role == 'tool') %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endif %}{%- endfor %}{%- endif %}\n"
)


def vocab_tokens(n: int) -> list[str]:
    """Token strings shaped like a BPE vocabulary: byte tokens, word pieces, some non-ASCII."""
    syllables = ["an", "er", "in", "th", "on", "re", "é", "ст", "の", "ing", "ed", "al", "ou", "🦙", "ze", "qu"]
    tokens = []
    for i in range(n):
        if i < 256:
            tokens.append(f"<0x{i:02X}>")
            continue
        word = "Ġ" if i % 3 == 0 else ""
        k = i
        while k:
            word += syllables[k % len(syllables)]
            k //= len(syllables)
        tokens.append(word)
    return tokens


def gguf_vocab262k(path: Path) -> None:
    n_vocab = 262_144
    w = GGUFWriter(path, "llama")
    w.add_name("Synthetic 262k vocabulary")
    w.add_type("model")
    w.add_size_label("8B")
    w.add_license("apache-2.0")
    w.add_context_length(131072)
    w.add_embedding_length(4096)
    w.add_block_count(33)
    w.add_feed_forward_length(14336)
    w.add_rope_dimension_count(128)
    w.add_head_count(32)
    w.add_head_count_kv(8)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(15)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_key_value("tokenizer.ggml.tokens", vocab_tokens(n_vocab), VT.ARRAY, sub_type=VT.STRING)
    w.add_key_value("tokenizer.ggml.scores", [float(-i) / 1000.0 for i in range(n_vocab)], VT.ARRAY, sub_type=VT.FLOAT32)
    w.add_key_value("tokenizer.ggml.token_type", [3 if i < 256 else 1 for i in range(n_vocab)], VT.ARRAY, sub_type=VT.INT32)
    w.add_bos_token_id(128000)
    w.add_eos_token_id(128009)
    w.add_chat_template(CHAT_TEMPLATE_BLOCK * 12)
    w.add_quantization_version(2)
    w.add_tensor("token_embd.weight", as_int8(pattern(144 * 4)), raw_shape=[4, 256], raw_dtype=GGMLQuantizationType.Q4_K)
    w.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
    w.add_tensor("output.weight", as_int8(pattern(210 * 4)), raw_shape=[4, 256], raw_dtype=GGMLQuantizationType.Q6_K)
    for b in range(33):
        for name in ("attn_norm", "ffn_norm", "attn_q_norm", "attn_k_norm"):
            w.add_tensor(f"blk.{b}.{name}.weight", np.full(64, b, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate"):
            w.add_tensor(f"blk.{b}.{name}.weight", as_int8(pattern(144, b)), raw_shape=[1, 256], raw_dtype=GGMLQuantizationType.Q4_K)
    finish(w)


# --------------------------------------------------------------------------------------------

SMALL = {
    "all-types.gguf": gguf_all_types,
    "big-endian.gguf": lambda p: gguf_all_types(p, GGUFEndian.BIG, alignment=64),
    "v2.gguf": gguf_v2,
    "v1.gguf": gguf_v1,
    "handbuilt-edge.gguf": gguf_handbuilt_edge,
    "empty.gguf": gguf_empty,
    "quant-types.gguf": gguf_quant_types,
    "truncated.gguf": gguf_truncated,
    "golden-minimal.gguf": gguf_golden_minimal,
    "golden-types.gguf": gguf_golden_types,
    "all-dtypes.safetensors": st_all_dtypes,
    "f6-dtypes.safetensors": st_f6,
    "no-metadata.safetensors": st_no_metadata,
    "with-metadata.safetensors": st_with_metadata,
    "empty.safetensors": st_empty,
    "truncated.safetensors": st_truncated,
    "golden.safetensors": st_golden,
    "golden-sharded": st_golden_sharded,
    "golden-split": gguf_golden_split,
}
BIG = {"vocab262k.gguf": gguf_vocab262k}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--big", action="store_true", help="also write vocab262k.gguf")
    parser.add_argument("--only", action="append", default=[], help="write only this file (repeatable)")
    args = parser.parse_args()
    args.outdir.mkdir(parents=True, exist_ok=True)
    writers = dict(SMALL)
    if args.big or any(name in BIG for name in args.only):
        writers.update(BIG)
    if args.only:
        unknown = [n for n in args.only if n not in writers]
        if unknown:
            parser.error(f"unknown fixture(s): {', '.join(unknown)}")
        writers = {n: writers[n] for n in args.only}
    for name, write in writers.items():
        write(args.outdir / name)
    return 0


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)  # GGUFWriter logs every file it plans to write
    sys.exit(main())
