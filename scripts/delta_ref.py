"""Reference side of the .wdelta tests: drives deltatensors 0.2.0 (numpy only) and makes models.

Commands:
  make-pair DIR --shapes 64x48,33,1 [--dtype f32|f16|bf16] [--seed N] [--steps K]
      writes DIR/base.safetensors and DIR/ft1.safetensors ... DIR/ftK.safetensors, each a small
      fine-tune-like step from the one before.
  create BASE FT OUT STRATEGY [--sparsity S] [--outlier-fraction F]
      deltatensors.save_delta over the models loaded with safetensors.numpy.
  decode WDELTA OUT
      deltatensors.format.read_wdelta + compress.decompress: every tensor's delta as float32.
  load WDELTA BASE OUT
      deltatensors.load_delta(WDELTA, base) (verifies the parent hash), saved as float32.
  load-chain BASE OUT WDELTA...
      deltatensors.load_delta_chain with the base as a state dict, saved as float32.
  shard MODEL DIR N
      splits MODEL into N shards in DIR with model.safetensors.index.json.
  hash MODEL
      deltatensors.hash_state_dict of the model (bf16 hashed as its raw 16-bit patterns).
  apply-bf16 WDELTA BASE OUT
      the reference reconstruction (base as float32 + decoded delta) rounded to bf16 (nearest
      even), for a bf16 base that numpy cannot load: read as raw uint16.
"""

import argparse
import json
import struct
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

import deltatensors as dt
from deltatensors.compress import decompress
from deltatensors.format import read_wdelta


def read_raw(path):
    """name -> (dtype string, shape, raw numpy array); bf16 as uint16."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        data = f.read()
    out = {}
    np_types = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=np_types[meta["dtype"]]).reshape(meta["shape"])
        out[name] = (meta["dtype"], arr)
    return out


def bf16_to_f32(u16):
    u16 = np.asarray(u16, dtype=np.uint16)
    return (u16.reshape(-1).astype(np.uint32) << 16).view(np.float32).reshape(u16.shape)


def f32_to_bf16(x):
    x = np.asarray(x, dtype=np.float32)
    shape = x.shape
    x = x.reshape(-1)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(x)
    out = rounded.astype(np.uint16)
    out[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return out.reshape(shape)


def write_bf16(path, tensors):
    """tensors: name -> uint16 array, written as BF16."""
    header = {}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        arr = np.array(tensors[name])
        raw = arr.tobytes()
        header[name] = {"dtype": "BF16", "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def parse_shapes(text):
    shapes = []
    for part in text.split(","):
        part = part.strip()
        if part in ("", "scalar"):
            shapes.append(())
        else:
            shapes.append(tuple(int(d) for d in part.split("x")))
    return shapes


def make_pair(args):
    rng = np.random.default_rng(args.seed)
    shapes = parse_shapes(args.shapes)
    model = {}
    for i, shape in enumerate(shapes):
        model[f"layer{i}.weight"] = np.asarray(rng.standard_normal(shape) * 0.02, dtype=np.float32)
    models = [model]
    for _ in range(args.steps):
        prev = models[-1]
        nxt = {}
        for name, arr in prev.items():
            d = np.asarray(rng.standard_normal(arr.shape) * 1e-3, dtype=np.float32)
            # A few large updates, as fine-tuning produces.
            if d.size > 4:
                idx = rng.choice(d.size, size=max(1, d.size // 50), replace=False)
                d.reshape(-1)[idx] *= 20
            nxt[name] = np.asarray(arr + d, dtype=np.float32)
        models.append(nxt)
    names = ["base"] + [f"ft{k + 1}" for k in range(args.steps)]
    for name, m in zip(names, models):
        path = f"{args.dir}/{name}.safetensors"
        if args.dtype == "f32":
            save_file(m, path, metadata={"step": name})
        elif args.dtype == "f16":
            save_file({k: np.asarray(v, dtype=np.float16) for k, v in m.items()}, path, metadata={"step": name})
        else:
            write_bf16(path, {k: f32_to_bf16(v) for k, v in m.items()})


def create(args):
    kwargs = {}
    if args.sparsity is not None:
        kwargs["sparsity"] = args.sparsity
    if args.outlier_fraction is not None:
        kwargs["outlier_fraction"] = args.outlier_fraction
    dt.save_delta(args.out, load_file(args.ft), load_file(args.base), strategy=args.strategy,
                  use_gpu=False, **kwargs)


def decode(args):
    with open(args.wdelta, "rb") as f:
        _, _, tensors = read_wdelta(f)
    save_file({k: np.array(decompress(p), dtype=np.float32) for k, p in tensors.items()}, args.out)


def load(args):
    rec = dt.load_delta(args.wdelta, load_file(args.base), verify=True)
    save_file({k: np.array(v) for k, v in rec.items()}, args.out)


def load_chain(args):
    rec = dt.load_delta_chain(args.wdeltas, load_file(args.base), verify=True)
    save_file({k: np.array(v) for k, v in rec.items()}, args.out)


def hash_model(args):
    raw = read_raw(args.model)
    print(dt.hash_state_dict({k: v for k, (_, v) in raw.items()}))


def apply_bf16(args):
    with open(args.wdelta, "rb") as f:
        _, _, tensors = read_wdelta(f)
    raw = read_raw(args.base)
    out = {}
    for name, payload in tensors.items():
        base = bf16_to_f32(raw[name][1])
        out[name] = f32_to_bf16(np.asarray(base + decompress(payload), dtype=np.float32))
    write_bf16(args.out, out)


def shard(args):
    """Splits a float32/float16 safetensors file into a directory of shards with an index."""
    import os
    tensors = load_file(args.model)
    names = sorted(tensors)
    os.makedirs(args.dir, exist_ok=True)
    weight_map = {}
    for k in range(args.n):
        part = names[k::args.n]
        fname = f"model-{k + 1:05d}-of-{args.n:05d}.safetensors"
        save_file({n: tensors[n] for n in part}, f"{args.dir}/{fname}", metadata={"format": "pt"})
        for n in part:
            weight_map[n] = fname
    with open(f"{args.dir}/model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("make-pair")
    a.add_argument("dir")
    a.add_argument("--shapes", required=True)
    a.add_argument("--dtype", default="f32")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--steps", type=int, default=1)
    a.set_defaults(fn=make_pair)
    a = sub.add_parser("create")
    a.add_argument("base")
    a.add_argument("ft")
    a.add_argument("out")
    a.add_argument("strategy")
    a.add_argument("--sparsity", type=float)
    a.add_argument("--outlier-fraction", type=float)
    a.set_defaults(fn=create)
    a = sub.add_parser("decode")
    a.add_argument("wdelta")
    a.add_argument("out")
    a.set_defaults(fn=decode)
    a = sub.add_parser("load")
    a.add_argument("wdelta")
    a.add_argument("base")
    a.add_argument("out")
    a.set_defaults(fn=load)
    a = sub.add_parser("load-chain")
    a.add_argument("base")
    a.add_argument("out")
    a.add_argument("wdeltas", nargs="+")
    a.set_defaults(fn=load_chain)
    a = sub.add_parser("hash")
    a.add_argument("model")
    a.set_defaults(fn=hash_model)
    a = sub.add_parser("apply-bf16")
    a.add_argument("wdelta")
    a.add_argument("base")
    a.add_argument("out")
    a.set_defaults(fn=apply_bf16)
    a = sub.add_parser("shard")
    a.add_argument("model")
    a.add_argument("dir")
    a.add_argument("n", type=int)
    a.set_defaults(fn=shard)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
