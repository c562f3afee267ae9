"""Base/fine-tune pairs for the lossless .wdelta tests and benchmark, written by the reference
writers (the safetensors package, gguf-py's GGUFWriter).

The fine-tune is a deterministic small-noise update of the base made with numpy (base + N(0,
scale) in float32, cast back to the stored dtype), not a real gradient step: torch is not
installed here. Some tensors are left unchanged (with -0.0 and NaN payloads in them), one is
new and one changes shape, and the metadata differs, so every kind of segment is exercised.

Usage:
  lossless_pair.py safetensors DIR [--dtypes float32,bfloat16,float16,int64] [--seed S] [--rows R]
  lossless_pair.py sharded DIR ...            DIR/base/ and DIR/ft/, each with an index
  lossless_pair.py gguf DIR [--types f32,f16,q8_0,...] [--split N] ...
  lossless_pair.py bench DIR --mb M [--dtype float32|bfloat16] [--frozen F]
      a larger pair for the benchmark: about M MB of weights, fraction F of the tensors frozen
  lossless_pair.py gguf-q8 DIR --mb M          a q8_0 GGUF pair quantized by gguf-py
"""
import argparse
import json
import os

import numpy as np

np.seterr(all="ignore")


def np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def update(rng, a, scale):
    """a plus small noise, in float32, cast back (integers: +/- small steps)."""
    if np.issubdtype(a.dtype, np.integer):
        return (a + rng.integers(-2, 3, size=a.shape)).astype(a.dtype)
    f = a.astype(np.float32)
    return (f + rng.standard_normal(a.shape).astype(np.float32) * np.float32(scale)).astype(a.dtype)


def special(dtype):
    """Signed zeros, NaN payloads and infinities, bit for bit."""
    d = np_dtype(dtype)
    if not np.issubdtype(d, np.floating) and d.name != "bfloat16":
        return np.array([0, 1, 7], dtype=d)
    bits = {
        2: np.array([0x8000, 0x0000, 0x7C01, 0xFE03, 0x7F80, 0xFFFF], dtype=np.uint16),
        4: np.array([0x80000000, 0, 0x7FC00001, 0xFFA00123, 0x7F800000, 0xFFFFFFFF], dtype=np.uint32),
        8: np.array([1 << 63, 0, 0x7FF8000000000001, 0xFFF0000000000123, 0x7FF0000000000000,
                     (1 << 64) - 1], dtype=np.uint64),
    }[d.itemsize]
    return bits.view(d)


def safetensors_tensors(dtypes, seed, rows):
    rng = np.random.default_rng(seed)
    base, ft = {}, {}
    for i, name in enumerate(dtypes):
        d = np_dtype(name)
        shape = (rows, 96)
        if np.issubdtype(d, np.integer):
            a = rng.integers(-1000, 1000, size=shape).astype(d)
        else:
            a = (rng.standard_normal(shape) * 0.05).astype(np.float32).astype(d)
        base[f"layer{i}.{name}.weight"] = a
        ft[f"layer{i}.{name}.weight"] = update(rng, a, 1e-3)
        frozen = (rng.standard_normal((rows // 2, 32)) * 0.05).astype(np.float32).astype(d) \
            if not np.issubdtype(d, np.integer) else rng.integers(0, 9, size=(rows // 2, 32)).astype(d)
        base[f"layer{i}.{name}.frozen"] = frozen
        ft[f"layer{i}.{name}.frozen"] = frozen.copy()
        base[f"layer{i}.{name}.special"] = special(name)
        ft[f"layer{i}.{name}.special"] = special(name)
    base["head.reshaped"] = np.zeros((4, 6), dtype=np.float32)
    ft["head.reshaped"] = np.ones((6, 4), dtype=np.float32)
    ft["head.new"] = np.arange(17, dtype=np.int32)
    return base, ft


def write_safetensors(path, tensors, metadata):
    from safetensors.numpy import save_file

    save_file(tensors, path, metadata=metadata)


def cmd_safetensors(a):
    os.makedirs(a.dir, exist_ok=True)
    base, ft = safetensors_tensors(a.dtypes.split(","), a.seed, a.rows)
    write_safetensors(os.path.join(a.dir, "base.safetensors"), base, {"format": "pt", "step": "0"})
    write_safetensors(os.path.join(a.dir, "ft.safetensors"), ft,
                      {"format": "pt", "step": "300", "note": "fine-tuned"})


def write_sharded(path, tensors, metadata, per_shard):
    os.makedirs(path, exist_ok=True)
    names = sorted(tensors)
    groups = [names[i:i + per_shard] for i in range(0, len(names), per_shard)]
    weight_map, total = {}, 0
    for k, group in enumerate(groups):
        fname = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        write_safetensors(os.path.join(path, fname), {n: tensors[n] for n in group}, metadata)
        for n in group:
            weight_map[n] = fname
            total += tensors[n].nbytes
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")


def cmd_sharded(a):
    base, ft = safetensors_tensors(a.dtypes.split(","), a.seed, a.rows)
    write_sharded(os.path.join(a.dir, "base"), base, {"format": "pt"}, 3)
    write_sharded(os.path.join(a.dir, "ft"), ft, {"format": "pt", "step": "1"}, 3)


def gguf_tensor(rng, qtype, rows, cols):
    import gguf

    qt = gguf.GGMLQuantizationType[qtype.upper()]
    a = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
    if qtype == "f32":
        return a, None
    if qtype == "f16":
        return a.astype(np.float16), None
    try:
        return gguf.quants.quantize(a, qt), qt
    except (NotImplementedError, gguf.quants.QuantError):
        # No quantizer in gguf-py for this type: random blocks of the right size.
        block, size = gguf.GGML_QUANT_SIZES[qt]
        return rng.integers(0, 256, size=(rows, cols // block * size), dtype=np.uint8), qt


def write_gguf(path, tensors, metadata, split):
    import gguf

    kwargs = {"split_max_tensors": split} if split else {}
    w = gguf.GGUFWriter(path, "llama", **kwargs)
    for k, v in metadata.items():
        w.add_string(k, v)
    for name, (arr, qt) in tensors.items():
        if qt is None:
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_pair(types, seed, rows, cols):
    import gguf

    rng = np.random.default_rng(seed)
    base, ft = {}, {}
    for i, t in enumerate(types):
        arr, qt = gguf_tensor(rng, t, rows, cols)
        base[f"blk.{i}.{t}.weight"] = (arr, qt)
        frozen, _ = gguf_tensor(rng, t, rows, cols)
        base[f"blk.{i}.{t}.frozen"] = (frozen, qt)
        ft[f"blk.{i}.{t}.frozen"] = (frozen.copy(), qt)
        if qt is None:
            ft[f"blk.{i}.{t}.weight"] = (update(rng, arr, 1e-3), None)
        else:
            try:
                deq = gguf.quants.dequantize(arr, qt)
                moved = deq + rng.standard_normal(deq.shape).astype(np.float32) * np.float32(1e-3)
                ft[f"blk.{i}.{t}.weight"] = (gguf.quants.quantize(moved, qt), qt)
            except (NotImplementedError, gguf.quants.QuantError):
                flip = arr.copy()
                flip[:, ::7] ^= 1
                ft[f"blk.{i}.{t}.weight"] = (flip, qt)
    ft["output.new"] = (np.arange(64, dtype=np.float32), None)
    return base, ft


def cmd_gguf(a):
    os.makedirs(a.dir, exist_ok=True)
    base, ft = gguf_pair(a.types.split(","), a.seed, a.rows, 256)
    write_gguf(os.path.join(a.dir, "base.gguf"), base, {"general.name": "base"}, a.split)
    write_gguf(os.path.join(a.dir, "ft.gguf"), ft, {"general.name": "fine-tuned", "x": "y"}, a.split)


def cmd_bench(a):
    """Layers of 1024 x 1024 until about --mb MB; --frozen of them unchanged."""
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    d = np_dtype(a.dtype)
    n = max(1, int(a.mb * 1e6 / (1024 * 1024 * d.itemsize)))
    base, ft = {}, {}
    for i in range(n):
        w = (rng.standard_normal((1024, 1024)) * 0.02).astype(np.float32)
        base[f"layer{i}.weight"] = w.astype(d)
        if i < int(n * a.frozen):
            ft[f"layer{i}.weight"] = w.astype(d)
        else:
            # An AdamW-like step: relative updates of about 1e-3 plus decoupled weight decay.
            step = rng.standard_normal(w.shape).astype(np.float32) * np.float32(2e-5)
            ft[f"layer{i}.weight"] = (w * np.float32(1 - 1e-4) + step).astype(d)
    write_safetensors(os.path.join(a.dir, "base.safetensors"), base, {"format": "pt"})
    write_safetensors(os.path.join(a.dir, "ft.safetensors"), ft, {"format": "pt"})


def cmd_gguf_q8(a):
    import gguf

    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    n = max(1, int(a.mb * 1e6 / (1024 * 1024 * 34 / 32)))
    base, ft = {}, {}
    for i in range(n):
        w = (rng.standard_normal((1024, 1024)) * 0.02).astype(np.float32)
        step = rng.standard_normal(w.shape).astype(np.float32) * np.float32(2e-5)
        q8 = gguf.GGMLQuantizationType.Q8_0
        base[f"blk.{i}.weight"] = (gguf.quants.quantize(w, q8), q8)
        ft[f"blk.{i}.weight"] = (gguf.quants.quantize(w * np.float32(1 - 1e-4) + step, q8), q8)
    write_gguf(os.path.join(a.dir, "base.gguf"), base, {"general.name": "base"}, 0)
    write_gguf(os.path.join(a.dir, "ft.gguf"), ft, {"general.name": "ft"}, 0)


p = argparse.ArgumentParser()
p.add_argument("kind", choices=["safetensors", "sharded", "gguf", "bench", "gguf-q8"])
p.add_argument("dir")
p.add_argument("--dtypes", default="float32,bfloat16,float16,int64")
p.add_argument("--types", default="f32,f16,q8_0,q4_0,q4_k,q6_k")
p.add_argument("--split", type=int, default=0)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--rows", type=int, default=64)
p.add_argument("--mb", type=float, default=64)
p.add_argument("--dtype", default="float32")
p.add_argument("--frozen", type=float, default=0.0)
a = p.parse_args()
{"safetensors": cmd_safetensors, "sharded": cmd_sharded, "gguf": cmd_gguf, "bench": cmd_bench,
 "gguf-q8": cmd_gguf_q8}[a.kind](a)
