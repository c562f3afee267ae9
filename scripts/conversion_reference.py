#!/usr/bin/env python3
"""Reference conversion diff: a Hugging Face safetensors model against the GGUF that llama.cpp's
convert_hf_to_gguf.py (and llama-quantize) made of it. numpy (float64) over gguf-py.

Usage: conversion_reference.py SOURCE GGUF     prints JSON (below)

SOURCE is a .safetensors file, a *.safetensors.index.json, or a directory holding
model.safetensors or model-0000K-of-0000N.safetensors shards (with or without the index).
Runs in the test venv (numpy, safetensors' format read by hand, gguf 0.19.0); never needs torch.

Output:
  {"architecture": general.architecture,
   "pairs": [{"source": [HF names], "target": GGUF name, "transform": T, "target_type": ggml type,
              "elements", "changed_elements", "nonfinite_elements", "max_abs_diff", "rel_l2",
              "cosine"}, ...]               sorted by target name
   "unpaired_source": [...], "unpaired_target": [...]}

Names are paired with gguf-py's TensorNameMap for the architecture and block count in the
GGUF's metadata, after the renames convert_hf_to_gguf.py makes before mapping (a leading
"bert." / "roberta." is dropped; ".gamma"/".beta" become ".weight"/".bias"). Transforms undone
(from the converter's source, llama.cpp as vendored in llama-cpp-python 0.3.36):
  identity        the tensor as is (only the dtype may change)
  permute_qk      LlamaModel.permute on q_proj/k_proj rows: for the llama architecture (Llama,
                  Mistral, Mixtral) q is permuted with head_count heads and k with head_count_kv
                  (both read from the GGUF), so that rope pairs are interleaved as ggml expects
  stack_experts   per-expert 2-d tensors experts.{e}.{w1,w2,w3} stacked in expert order into
                  one 3-d tensor [n_expert, rows, cols] (Mixtral: ffn_{gate,down,up}_exps)
  fuse_qkv        --fuse-qkv: the rows of q, k and v concatenated into attn_qkv; reported as
                  "fuse_qkv+permute_qk" where q and k were permuted first (llama)
  drop_rows:N     the first N rows of the source are not in the target (RoBERTa / XLM-R
                  position embeddings start at pad_token_id + 1: the converter cuts them); the
                  figures cover the rows the target has
A GGUF tensor is read with gguf.GGUFReader and dequantized with gguf.quants.dequantize; its ggml
dims are the reverse of the numpy shape, so it is reshaped to reversed(dims) and compared with
the source in the source's row-major order. Figures are scripts/values_reference.py's
`figures` (float64; a = source, b = target).
"""
import json
import os
import re
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from values_reference import figures  # noqa: E402

ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}

# GGUF architectures whose q/k rows convert_hf_to_gguf.py permutes (LlamaModel.undo_permute)
PERMUTE_QK_ARCHS = {"llama"}


# --------------------------------------------------------------------------- reading
def safetensors_files(source):
    p = Path(source)
    if p.is_file() and p.name.endswith(".index.json"):
        index = json.loads(p.read_text(encoding="utf-8"))
        return [p.parent / f for f in sorted(set(index["weight_map"].values()))]
    if p.is_file():
        return [p]
    index = p / "model.safetensors.index.json"
    if index.is_file():
        return safetensors_files(index)
    if (p / "model.safetensors").is_file():
        return [p / "model.safetensors"]
    shards = sorted(p.glob("model-*-of-*.safetensors"))
    if shards:
        return shards
    raise SystemExit(f"{source}: no safetensors model found")


def read_source(source):
    """{name: lazily read numpy array in its shape} over all files."""
    out = {}
    for path in safetensors_files(source):
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
        for name, t in header.items():
            if name == "__metadata__":
                continue
            begin, end = t["data_offsets"]

            def load(raw=data[begin:end], dtype=t["dtype"], shape=tuple(t["shape"])):
                if dtype == "BF16":
                    v = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
                else:
                    v = raw.view(ST_DTYPES[dtype])
                return v.reshape(shape)

            out[name] = (tuple(t["shape"]), load)
    return out


def read_gguf(path):
    import gguf

    reader = gguf.GGUFReader(path)
    meta = {}
    for field in reader.fields.values():
        if field.types and field.types[0] != gguf.GGUFValueType.ARRAY:
            meta[field.name] = field.contents()
    tensors = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))

        def load(t=t, shape=shape):
            return np.asarray(gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)).reshape(shape)

        tensors[t.name] = (shape, t.tensor_type.name, load)
    return meta, tensors


# --------------------------------------------------------------------------- transforms
def permute(w, n_head):
    """LlamaModel.permute as in convert_hf_to_gguf.py."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def converter_name(name):
    """The renames convert_hf_to_gguf.py makes before mapping (BertModel.filter_tensors & co)."""
    for prefix in ("bert.", "roberta."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    if name.endswith(".gamma"):
        name = name[:-6] + ".weight"
    if name.endswith(".beta"):
        name = name[:-5] + ".bias"
    return name


EXPERT = re.compile(r"^(?P<pre>.*\.experts)\.(?P<e>\d+)\.(?P<w>[A-Za-z0-9_]+)\.weight$")


def main():
    import gguf

    source_path, gguf_path = sys.argv[1], sys.argv[2]
    src = read_source(source_path)
    meta, tgt = read_gguf(gguf_path)
    arch = meta["general.architecture"]
    block_count = int(meta[f"{arch}.block_count"])
    n_head = meta.get(f"{arch}.attention.head_count")
    n_head_kv = meta.get(f"{arch}.attention.head_count_kv", n_head)
    arch_enum = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch)
    tmap = gguf.get_tensor_name_map(arch_enum, block_count)
    permute_qk = arch in PERMUTE_QK_ARCHS

    def mapped(name):
        r = tmap.get_type_and_name(converter_name(name), try_suffixes=(".weight", ".bias"))
        return r if r is not None else (None, None)

    # 1. map every source tensor; group per-expert tensors under their stacked name
    groups = {}        # target name -> list of (source name, kind)
    experts = {}       # stacked target -> {expert index: source name}
    unpaired_source = []
    for name in src:
        m = EXPERT.match(name)
        if m:
            stacked = f"{m['pre']}.{m['w']}.weight"
            ttype, tname = mapped(stacked)
            if tname is not None:
                experts.setdefault(tname, {})[int(m["e"])] = name
                continue
        ttype, tname = mapped(name)
        if tname is None:
            unpaired_source.append(name)
            continue
        groups.setdefault(tname, []).append((name, ttype))

    pairs = []
    used_targets = set()

    def emit(sources, target, transform, a, b):
        f = figures(a, b)
        pairs.append(dict({"source": sources, "target": target, "transform": transform,
                           "target_type": tgt[target][1], "elements": int(np.asarray(a).size)}, **f))
        used_targets.add(target)

    # 2. fused QKV: attn_q/k/v of a block absent from the GGUF, attn_qkv present
    fused = {}
    for tname, members in list(groups.items()):
        ttype = members[0][1]
        if tname in tgt or ttype not in (gguf.MODEL_TENSOR.ATTN_Q, gguf.MODEL_TENSOR.ATTN_K, gguf.MODEL_TENSOR.ATTN_V):
            continue
        bid = next(int(p) for p in tname.split(".") if p.isdecimal())
        suffix = ".bias" if tname.endswith(".bias") else ".weight"
        qkv = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ATTN_QKV].format(bid=bid) + suffix
        if qkv in tgt:
            fused.setdefault(qkv, {})[ttype] = members[0][0]
            del groups[tname]
    for qkv, parts in sorted(fused.items()):
        order = [gguf.MODEL_TENSOR.ATTN_Q, gguf.MODEL_TENSOR.ATTN_K, gguf.MODEL_TENSOR.ATTN_V]
        if set(parts) != set(order):
            raise SystemExit(f"{qkv}: q, k and v not all found in the source: {parts}")
        names = [parts[k] for k in order]
        b = tgt[qkv][2]()
        rows = [src[n][0][0] for n in names]
        q, k, v = np.split(b, np.cumsum(rows)[:-1], axis=0)
        if permute_qk:
            q, k = unpermute(q, n_head), unpermute(k, n_head_kv)
        a = np.concatenate([src[n][1]().reshape(-1).astype(np.float64) for n in names])
        bb = np.concatenate([x.reshape(-1).astype(np.float64) for x in (q, k, v)])
        emit(names, qkv, "fuse_qkv" + ("+permute_qk" if permute_qk else ""), a, bb)

    # 3. stacked experts
    for tname, by_e in sorted(experts.items()):
        names = [by_e[e] for e in sorted(by_e)]
        if tname not in tgt:
            unpaired_source.extend(names)
            continue
        b = tgt[tname][2]()
        if b.shape != (len(names),) + src[names[0]][0]:
            raise SystemExit(f"{tname}: shape {b.shape} is not {len(names)} x {src[names[0]][0]}")
        a = np.stack([src[n][1]() for n in names])
        emit(names, tname, "stack_experts", a, b)

    # 4. one source tensor per target
    for tname, members in sorted(groups.items()):
        if len(members) != 1:
            raise SystemExit(f"{tname}: several source tensors map to it: {members}")
        name, ttype = members[0]
        if tname not in tgt:
            unpaired_source.append(name)
            continue
        a, b = src[name][1](), tgt[tname][2]()
        transform = "identity"
        if permute_qk and ttype == gguf.MODEL_TENSOR.ATTN_Q:
            b, transform = unpermute(b, n_head), "permute_qk"
        elif permute_qk and ttype == gguf.MODEL_TENSOR.ATTN_K:
            b, transform = unpermute(b, n_head_kv), "permute_qk"
        if a.shape != b.shape:
            if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[1] and a.shape[0] > b.shape[0] \
                    and ttype == gguf.MODEL_TENSOR.POS_EMBD:
                cut = a.shape[0] - b.shape[0]
                a, transform = a[cut:], f"drop_rows:{cut}"
            else:
                raise SystemExit(f"{name} {a.shape} -> {tname} {b.shape}: shapes differ")
        emit([name], tname, transform, a, b)

    pairs.sort(key=lambda p: p["target"])
    out = {
        "architecture": arch,
        "pairs": pairs,
        "unpaired_source": sorted(unpaired_source),
        "unpaired_target": sorted(set(tgt) - used_targets),
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
