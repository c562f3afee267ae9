"""Writes the model files of the weight-value tests with gguf-py and the safetensors package.

Usage: values_fixtures.py blocks DIR   DIR/blocks.gguf: one tensor per GGUF type gguf-py can
                                       dequantize, of random valid blocks ("random.TYPE") and,
                                       for the types gguf-py can quantize, of real quantized
                                       data ("real.TYPE"); DIR/NAME.f32 holds gguf-py's
                                       dequantization of tensor NAME (little-endian float32).
       values_fixtures.py pairs DIR    DIR/old.gguf, DIR/new.gguf, DIR/old.safetensors,
                                       DIR/new.safetensors: pairs with the changes the tests
                                       name (scaled tensors, one changed row or element, dtype
                                       changes, NaN/Inf, zero norms, empty tensors).
"""
import os
import sys

import numpy as np
import gguf
import safetensors
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

# Byte offsets of each type's f16 scales: set to sane values in random blocks, so that the
# blocks are what a quantizer could write (no inf/NaN scales).
F16_SCALES = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0], "IQ1_S": [0],
    "IQ1_M": [], "IQ4_NL": [0], "IQ4_XS": [0], "TQ1_0": [52], "TQ2_0": [64], "MXFP4": [],
    "NVFP4": [], "BF16": [],
}
QUANTIZABLE = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16", "TQ1_0", "TQ2_0", "MXFP4"]


def random_blocks(rng, qtype, n_blocks):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for at in F16_SCALES[qtype.name]:
        scales = (rng.standard_normal(n_blocks) * 0.05).astype(np.float16)
        raw[:, at:at + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    if qtype == T.IQ1_M:
        raw[:, 55] &= 0xBF  # bit 14 of the scale packed in the top nibbles: no inf/NaN
    if qtype == T.BF16:
        raw = (rng.standard_normal(n_blocks).astype(np.float32).view(np.uint32) >> 16)
        raw = raw.astype(np.uint16).view(np.uint8).reshape(n_blocks, 2)
    return raw


def blocks(out):
    rng = np.random.default_rng(11)
    w = gguf.GGUFWriter(os.path.join(out, "blocks.gguf"), "llama")
    for name in F16_SCALES:
        qtype = T[name]
        block, _ = gguf.GGML_QUANT_SIZES[qtype]
        raw = random_blocks(rng, qtype, 96).reshape(8, -1)
        tensors = [(f"random.{name.lower()}", raw)]
        if name in QUANTIZABLE:
            data = rng.standard_normal((8, block * 12)).astype(np.float32)
            tensors.append((f"real.{name.lower()}", quantize(data, qtype)))
        for tname, q in tensors:
            w.add_tensor(tname, q, raw_dtype=qtype)
            values = dequantize(q, qtype).astype("<f4")
            values.tofile(os.path.join(out, tname + ".f32"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_gguf(path, tensors):
    w = gguf.GGUFWriter(path, "llama")
    for name, (qtype, data) in tensors.items():
        if qtype is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_safetensors(path, tensors):
    specs, keep = {}, []
    for name, (dtype, array) in tensors.items():
        array = np.ascontiguousarray(array)
        keep.append(array)
        specs[name] = safetensors.TensorSpec(
            dtype=dtype, shape=list(array.shape) if dtype != "bfloat16" else list(array.shape),
            data_ptr=array.ctypes.data, data_len=array.nbytes)
    safetensors.serialize_file(specs, path)


def bf16(x):
    """float32 to bfloat16 bits, round to nearest even (as gguf-py's BF16 quantizer)."""
    return quantize(np.asarray(x, dtype=np.float32), T.BF16).view(np.uint16).reshape(x.shape)


def pairs(out):
    rng = np.random.default_rng(5)
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    old, new = {}, {}

    a = normal(64, 32)
    old["blk.0.scaled"], new["blk.0.scaled"] = (None, a), (None, a * np.float32(1.01))
    a = normal(64, 32)
    old["blk.0.same"], new["blk.0.same"] = (None, a), (None, a.copy())
    a = normal(64, 16)
    b = a.copy()
    b[7] += np.float32(0.25)
    old["blk.1.row"], new["blk.1.row"] = (None, a), (None, b)
    q = quantize(normal(16, 256), T.Q8_0)
    q2 = q.copy()
    q2[3, 2 + 34 * 5 + 7] ^= 0x01  # one element of one block
    old["blk.1.q8_0"], new["blk.1.q8_0"] = (T.Q8_0, q), (T.Q8_0, q2)
    for i, name in enumerate(["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                              "Q6_K", "IQ4_XS", "IQ2_XXS", "IQ3_S", "IQ1_M", "TQ1_0", "MXFP4"]):
        qtype = T[name]
        q = random_blocks(rng, qtype, 32).reshape(4, -1)
        q2 = q.copy()
        size = gguf.GGML_QUANT_SIZES[qtype][1]
        q2[1, size * 2 + size - 1] ^= 0x10  # a quant byte of one block (the last byte)
        if i % 3 == 0:
            q2[3] = random_blocks(rng, qtype, 8).reshape(-1)  # a whole row of blocks
        old[f"blk.2.{name.lower()}"], new[f"blk.2.{name.lower()}"] = (qtype, q), (qtype, q2)
    a = normal(32, 256)
    old["blk.3.f16_to_q8_0"] = (None, a.astype(np.float16))
    new["blk.3.f16_to_q8_0"] = (T.Q8_0, quantize(a.astype(np.float16).astype(np.float32), T.Q8_0))
    old["blk.3.f32_to_q4_k_shape"] = (None, normal(4, 8))
    new["blk.3.f32_to_q4_k_shape"] = (None, normal(4, 9))
    a = normal(8, 32)
    a[0, 0], a[0, 1], a[0, 2], a[0, 3] = np.nan, np.inf, -np.inf, np.nan
    b = a.copy()
    b[0, 0] = 1.0  # NaN -> 1: changed
    b[0, 2] = np.inf  # -inf -> inf: changed
    b[1, 5] = np.nan  # finite -> NaN: changed
    b[2, 2] += np.float32(0.5)
    old["blk.4.nonfinite"], new["blk.4.nonfinite"] = (None, a), (None, b)
    z = np.zeros((4, 32), dtype=np.float32)
    z2 = z.copy()
    z2[1, 1] = 3.0
    old["blk.4.zero_norm"], new["blk.4.zero_norm"] = (None, z), (None, z2)
    old["blk.4.to_zero"], new["blk.4.to_zero"] = (None, normal(4, 32)), (None, z.copy())
    old["blk.4.signed_zero"], new["blk.4.signed_zero"] = (None, z.copy()), (None, -z)
    # Equal values, other bits: 3 signed zeros and 2 NaNs with another payload or sign.
    a = normal(4, 32)
    a[0, 0:3] = 0.0
    a.view(np.uint32)[1, 0:2] = 0x7FC00000
    b = a.copy()
    b[0, 0:3] = -0.0
    b.view(np.uint32)[1, 0] = 0x7FC00001
    b.view(np.uint32)[1, 1] = 0xFFC00000
    old["blk.4.bits"], new["blk.4.bits"] = (None, a), (None, b)
    write_gguf(os.path.join(out, "old.gguf"), old)
    write_gguf(os.path.join(out, "new.gguf"), new)

    a = normal(48, 40)
    st_old = {
        "layers.0.scaled": ("float32", a),
        "layers.0.to_bf16": ("float32", a),
        "layers.1.bf16": ("bfloat16", bf16(a)),
        "layers.1.f16_tiny": ("float64", a.astype(np.float64)),
        "layers.2.empty": ("float32", np.zeros((0, 4), dtype=np.float32)),
        "layers.2.ints": ("int32", np.arange(100, dtype=np.int32)),
        "layers.2.bytes": ("uint8", np.arange(256, dtype=np.uint8)),
        "layers.3.f16": ("float16", a.astype(np.float16)),
    }
    b64 = a.astype(np.float64)
    b64[5, 5] += 1e-12
    ints = np.arange(100, dtype=np.int32)
    ints[10] = -7
    st_new = {
        "layers.0.scaled": ("float32", a * np.float32(0.5)),
        "layers.0.to_bf16": ("bfloat16", bf16(a)),
        "layers.1.bf16": ("bfloat16", bf16(a * np.float32(1.001))),
        "layers.1.f16_tiny": ("float64", b64),
        "layers.2.empty": ("float32", np.zeros((0, 4), dtype=np.float32)),
        "layers.2.ints": ("int32", ints),
        "layers.2.bytes": ("uint8", np.arange(256, dtype=np.uint8)),
        "layers.3.f16": ("float16", a.astype(np.float16)),
    }
    write_safetensors(os.path.join(out, "old.safetensors"), st_old)
    write_safetensors(os.path.join(out, "new.safetensors"), st_new)


if __name__ == "__main__":
    {"blocks": blocks, "pairs": pairs}[sys.argv[1]](sys.argv[2])
