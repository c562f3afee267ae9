#!/usr/bin/env python3
"""Generates the model pairs of scripts/bench-values.sh.

  bench_values_gen.py gguf DIR [--mb N]         DIR/a.gguf, DIR/b.gguf: N MB (default 300)
      each, llama-like layers of q4_k, q5_0, q6_k, q8_0 and f32 tensors of random valid blocks
      (f16 scales set to sane values); in b every quantized tensor has new blocks in 1 of 8
      rows and one changed byte per row elsewhere, and the f32 tensors are scaled by 1.001.
  bench_values_gen.py safetensors DIR [--mb N]  DIR/a.safetensors, DIR/b.safetensors: N MB
      (default 1100) each of float32 and bfloat16 tensors; b = a * (1 + 1e-3 noise).
  bench_values_gen.py gguf-q4km DIR [--mb N]    DIR/a-q4km.gguf, DIR/b-q4km.gguf: N MB (default
      253, 241 MiB) each, laid out as llama.cpp's Q4_K_M lays out a Llama: q4_k everywhere but
      attn_v and ffn_down in every other layer and the output matrix, which are q6_k; every
      block of b is new (a fine-tune quantized again), so every value is decoded and compared.
  bench_values_gen.py gguf-type DIR --type T [--mb N]   DIR/a-T.gguf, DIR/b-T.gguf: N MB
      (default 100) each of 2048-wide tensors of one quantized type T (q4_0, q4_k, q5_0,
      q6_k, q8_0); every block of b is new, so both sides are decoded and compared everywhere.
Written with gguf-py's GGUFWriter and the safetensors package.
"""
import argparse
import os

import numpy as np
import gguf
import safetensors
from gguf import GGMLQuantizationType as T

F16_SCALES = {T.Q4_0: [0], T.Q4_K: [0, 2], T.Q5_0: [0], T.Q6_K: [208], T.Q8_0: [0]}


def blocks(rng, qtype, rows, cols):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = rows * cols // block
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for at in F16_SCALES[qtype]:
        raw[:, at:at + 2] = (rng.standard_normal(n) * 0.01).astype(np.float16).view(np.uint8).reshape(n, 2)
    return raw.reshape(rows, -1)


def gguf_pair(out, mb):
    rng = np.random.default_rng(1)
    dim, ff = 2048, 5632
    layout = [("attn_q", T.Q4_K, dim, dim), ("attn_k", T.Q5_0, dim, dim),
              ("attn_v", T.Q6_K, dim, dim), ("attn_output", T.Q8_0, dim, dim),
              ("ffn_gate", T.Q4_K, ff, dim), ("ffn_up", T.Q4_K, ff, dim),
              ("ffn_down", T.Q6_K, dim, ff), ("attn_norm", None, 1, dim),
              ("ffn_norm", None, 1, dim)]
    per_layer = 0
    for _, qtype, rows, cols in layout:
        per_layer += rows * cols * 4 if qtype is None else \
            rows * cols // gguf.GGML_QUANT_SIZES[qtype][0] * gguf.GGML_QUANT_SIZES[qtype][1]
    layers = max(1, -(-mb * 1_000_000 // per_layer))
    wa = gguf.GGUFWriter(os.path.join(out, "a.gguf"), "llama")
    wb = gguf.GGUFWriter(os.path.join(out, "b.gguf"), "llama")
    emb = rng.standard_normal((8192, dim)).astype(np.float32)
    wa.add_tensor("token_embd.weight", emb)
    wb.add_tensor("token_embd.weight", emb)
    for i in range(layers):
        for name, qtype, rows, cols in layout:
            tname = f"blk.{i}.{name}.weight"
            if qtype is None:
                a = (1 + 0.1 * rng.standard_normal((rows, cols))).astype(np.float32)
                wa.add_tensor(tname, a)
                wb.add_tensor(tname, a * np.float32(1.001))
                continue
            a = blocks(rng, qtype, rows, cols)
            b = a.copy()
            b[::8] = blocks(rng, qtype, len(b[::8]), cols)
            b[1::8, -1] ^= 1
            wa.add_tensor(tname, a, raw_dtype=qtype)
            wb.add_tensor(tname, b, raw_dtype=qtype)
    for w in (wa, wb):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def gguf_q4km_pair(out, mb):
    rng = np.random.default_rng(4)
    dim, ff = 2048, 5632

    def layout(i):
        more_bits = T.Q6_K if i % 2 == 0 else T.Q4_K
        return [("attn_q", T.Q4_K, dim, dim), ("attn_k", T.Q4_K, dim, dim),
                ("attn_v", more_bits, dim, dim), ("attn_output", T.Q4_K, dim, dim),
                ("ffn_gate", T.Q4_K, ff, dim), ("ffn_up", T.Q4_K, ff, dim),
                ("ffn_down", more_bits, dim, ff)]

    def size(qtype, rows, cols):
        return rows * cols // gguf.GGML_QUANT_SIZES[qtype][0] * gguf.GGML_QUANT_SIZES[qtype][1]

    wa = gguf.GGUFWriter(os.path.join(out, "a-q4km.gguf"), "llama")
    wb = gguf.GGUFWriter(os.path.join(out, "b-q4km.gguf"), "llama")
    tensors = [("output.weight", T.Q6_K, 8192, dim)]
    total, i = size(T.Q6_K, 8192, dim), 0
    while total < mb * 1_000_000:
        for name, qtype, rows, cols in layout(i):
            tensors.append((f"blk.{i}.{name}.weight", qtype, rows, cols))
            total += size(qtype, rows, cols)
        i += 1
    for name, qtype, rows, cols in tensors:
        wa.add_tensor(name, blocks(rng, qtype, rows, cols), raw_dtype=qtype)
        wb.add_tensor(name, blocks(rng, qtype, rows, cols), raw_dtype=qtype)
    for w in (wa, wb):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def gguf_type_pair(out, mb, name):
    rng = np.random.default_rng(3)
    qtype = {"q4_0": T.Q4_0, "q4_k": T.Q4_K, "q5_0": T.Q5_0, "q6_k": T.Q6_K, "q8_0": T.Q8_0}[name]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rows, cols = 2048, 2048
    count = max(1, -(-mb * 1_000_000 // (rows * cols // block * size)))
    wa = gguf.GGUFWriter(os.path.join(out, f"a-{name}.gguf"), "llama")
    wb = gguf.GGUFWriter(os.path.join(out, f"b-{name}.gguf"), "llama")
    for i in range(count):
        wa.add_tensor(f"blk.{i}.weight", blocks(rng, qtype, rows, cols), raw_dtype=qtype)
        wb.add_tensor(f"blk.{i}.weight", blocks(rng, qtype, rows, cols), raw_dtype=qtype)
    for w in (wa, wb):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def safetensors_pair(out, mb):
    rng = np.random.default_rng(2)
    a, b, keep = {}, {}, []
    total, i = 0, 0
    while total < mb * 1_000_000:
        x = rng.standard_normal((4096, 4096), dtype=np.float32)
        y = x * (1 + np.float32(1e-3) * rng.standard_normal(x.shape, dtype=np.float32))
        if i % 2:
            x = (x.view(np.uint32) >> 16).astype(np.uint16)
            y = (y.view(np.uint32) >> 16).astype(np.uint16)
            dtype = "bfloat16"
        else:
            dtype = "float32"
        keep += [x, y]
        spec = lambda arr: safetensors.TensorSpec(
            dtype=dtype, shape=[4096, 4096], data_ptr=arr.ctypes.data, data_len=arr.nbytes)
        a[f"model.layers.{i}.weight"] = spec(x)
        b[f"model.layers.{i}.weight"] = spec(y)
        total += x.nbytes
        i += 1
    safetensors.serialize_file(a, os.path.join(out, "a.safetensors"))
    safetensors.serialize_file(b, os.path.join(out, "b.safetensors"))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["gguf", "gguf-q4km", "gguf-type", "safetensors"])
    p.add_argument("dir")
    p.add_argument("--mb", type=int)
    p.add_argument("--type", choices=["q4_0", "q4_k", "q5_0", "q6_k", "q8_0"])
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    if args.kind == "gguf":
        gguf_pair(args.dir, args.mb or 300)
    elif args.kind == "gguf-q4km":
        gguf_q4km_pair(args.dir, args.mb or 253)
    elif args.kind == "gguf-type":
        gguf_type_pair(args.dir, args.mb or 100, args.type)
    else:
        safetensors_pair(args.dir, args.mb or 1100)
