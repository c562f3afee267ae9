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
  check-rebuilt BASE REBUILT WDELTA...
      fails unless REBUILT (float32 tensors) holds, bit for bit, the reconstruction of the
      lineage WDELTA... from BASE as docs/wdelta.md defines it, link by link: each parent hash
      verified (deltatensors.hash_state_dict), each delta decoded by deltatensors'
      decompress (version 2's int4 layout, which deltatensors 0.2.0 cannot read, in numpy as
      the format defines it), added in float32 where it is not zero.
  check-encoding PARENT FT WDELTA [--through LINK...]
      fails unless every tensor's records in WDELTA are what the strategy's definition gives
      for float32(FT) - float32(PARENT) (equal bits taken as no change; with --through, the
      parent is what the links rebuild from PARENT, as check-rebuilt computes it): a top-k of largest
      magnitude (any among equal magnitudes) with its values exact; quantized's records as
      deltatensors computes them; int4's scale, zero point and every nibble as numpy computes
      them from the chosen outliers (layout 1 or 2).
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


def read_any_version(path):
    """(version, parent hash, tensors) through deltatensors' own reader, which checks the
    checksum and parses the records; its version check is widened to this file's version, as
    version 2 frames its records as version 1 does."""
    import deltatensors.format as fmt
    with open(path, "rb") as f:
        content = f.read()
    version = struct.unpack("<I", content[7:11])[0]
    if version not in (1, 2):
        raise SystemExit(f"{path}: version {version} is not one this reference decodes")
    saved = fmt.VERSION
    fmt.VERSION = version
    try:
        import io
        parent_hash, _, tensors = fmt.read_wdelta(io.BytesIO(content))
    finally:
        fmt.VERSION = saved
    return version, parent_hash, tensors


def unpack_nibbles(packed, n):
    """High nibble first, as the format packs them."""
    out = np.empty(packed.size * 2, dtype=np.uint8)
    out[0::2] = packed >> 4
    out[1::2] = packed & 0x0F
    return out[:n]


def decode_as_defined(payload):
    """The float32 delta of one tensor: deltatensors' decompress, but for int4 layout 2 (all
    n positions quantized, outliers written over them), decoded as docs/wdelta.md says."""
    if payload["strategy"] != "int4" or payload.get("int4_layout", 1) != 2:
        return np.asarray(decompress(payload), dtype=np.float32).reshape(-1)
    n = payload["n_elements"]
    q = unpack_nibbles(payload["packed"], n).astype(np.float32)
    scale = float(payload["scale"][0])
    zero_point = float(payload["zero_point"][0])
    flat = q / 15.0 * (scale * 15.0) + zero_point
    flat[payload["outlier_idx"].astype(np.int64)] = payload["outlier_vals"].astype(np.float32)
    return flat


def reconstruct(base_path, links):
    """The model `links` rebuild from the model at `base_path`, as float32, link by link.

    Two states are kept: deltatensors' (float32 parent + delta), whose hash each next link
    names as its parent, and the rebuilt file's, which keeps the parent's own bits where the
    delta is zero (docs/wdelta.md, "Reconstruction": numpy's -0.0 + 0.0 is +0.0, and a NaN
    payload would not survive). They differ only in the sign of zeros and in NaN payloads."""
    base = {k: np.asarray(v, dtype=np.float32) for k, v in load_file(base_path).items()}
    hashed, kept = dict(base), dict(base)
    for path in links:
        _, parent_hash, tensors = read_any_version(path)
        got_hash = dt.hash_state_dict(hashed)
        if got_hash != parent_hash:
            raise SystemExit(f"{path}: parent hash {parent_hash}, its parent has {got_hash}")
        for name, payload in tensors.items():
            shape = base[name].shape
            delta = decode_as_defined(payload)
            hashed[name] = (hashed[name].reshape(-1) + delta).reshape(shape)
            parent = kept[name].reshape(-1)
            kept[name] = np.where(delta == 0, parent, parent + delta).reshape(shape)
    return kept


def check_rebuilt(args):
    want = reconstruct(args.base, args.wdeltas)
    got = load_file(args.rebuilt)
    if sorted(got) != sorted(want):
        raise SystemExit(f"{args.rebuilt}: tensors {sorted(got)}, expected {sorted(want)}")
    for name in sorted(want):
        a = np.asarray(got[name])
        b = np.asarray(want[name], dtype=np.float32)
        if a.dtype != np.float32 or a.shape != b.shape:
            raise SystemExit(f"{args.rebuilt}: {name} is {a.dtype} {a.shape}, expected float32 {b.shape}")
        differ = np.flatnonzero(a.reshape(-1).view(np.uint32) != b.reshape(-1).view(np.uint32))
        if differ.size:
            i = differ[0]
            raise SystemExit(
                f"{args.rebuilt}: {name} differs from the reference reconstruction at "
                f"{differ.size} of {a.size} elements; first at {i}: {a.reshape(-1)[i]!r}, "
                f"expected {b.reshape(-1)[i]!r}")
    print(f"{args.rebuilt}: {len(want)} tensors, bit for bit the reference reconstruction")


def magnitude_keys(x):
    """|x|'s bit pattern: the order of magnitudes, NaN above infinity (numpy's sort order)."""
    return x.view(np.uint32) & np.uint32(0x7FFFFFFF)


def check_top_k(where, idx, d, k):
    """`idx` is k ascending positions of largest magnitude in `d` (any among equal ones)."""
    n = d.size
    if idx.size != k:
        raise SystemExit(f"{where}: {idx.size} positions kept, the definition keeps {k}")
    if idx.size and (np.any(np.diff(idx) <= 0) or idx[0] < 0 or idx[-1] >= n):
        raise SystemExit(f"{where}: positions not strictly ascending in 0..{n}")
    if 0 < k < n:
        keys = magnitude_keys(d)
        kept = np.zeros(n, dtype=bool)
        kept[idx] = True
        smallest_kept, largest_dropped = keys[kept].min(), keys[~kept].max()
        if smallest_kept < largest_dropped:
            raise SystemExit(f"{where}: a kept magnitude is below a dropped one")


def check_tensor(name, payload, d, version):
    strategy = payload["strategy"]
    where = f"{name} ({strategy}, version {version})"
    n = d.size
    def same(label, got, want):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape or got.tobytes() != want.tobytes():
            bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1)) if got.shape == want.shape else []
            raise SystemExit(f"{where}: {label} is not as defined (first difference at {list(bad[:1])})")
    if strategy == "sparse":
        k = min(n, max(1, int(n * (1.0 - payload["sparsity"]))))
        idx = payload["indices"].astype(np.int64)
        check_top_k(where, idx, d, k)
        same("values", payload["values"].view(np.uint32), d[idx].view(np.uint32))
    elif strategy == "quantized":
        want = dt.compress.compress_quantized(d.reshape(payload["shape"]))
        same("scales", payload["scales"], want["scales"])
        same("packed_signs", payload["packed_signs"], want["packed_signs"])
    elif strategy == "int4":
        m = min(n, max(1, int(n * payload["outlier_fraction"])))
        idx = payload["outlier_idx"].astype(np.int64)
        check_top_k(where, idx, d, m)
        same("outlier_vals", payload["outlier_vals"], d[idx].astype(np.float16))
        rest_mask = np.ones(n, dtype=bool)
        rest_mask[idx] = False
        rest = d[rest_mask]
        q_min, q_max = (float(rest.min()), float(rest.max())) if rest.size else (0.0, 0.0)
        q_range = q_max - q_min
        flat = q_range < 1e-8
        scale = np.float16(1.0) if flat else np.float16(q_range / 15.0)
        zero_point = np.float16(q_min)
        same("scale", payload["scale"], np.array([scale], dtype=np.float16))
        same("zero_point", payload["zero_point"], np.array([zero_point], dtype=np.float16))
        with np.errstate(invalid="ignore"):
            if payload.get("int4_layout", 1) == 2:
                z, s = np.float32(float(zero_point)), np.float32(float(scale) * 15.0)
                q = np.zeros(n, dtype=np.uint8)
                if not flat:
                    q[rest_mask] = np.clip(np.round((rest - z) / s * np.float32(15)), 0, 15).astype(np.uint8)
            else:
                q = np.zeros(rest.size, dtype=np.uint8)
                if not flat:
                    q = np.clip(np.round((rest - q_min) / q_range * 15.0), 0, 15).astype(np.uint8)
        if q.size % 2:
            q = np.concatenate([q, np.zeros(1, dtype=np.uint8)])
        same("packed", payload["packed"], (q[0::2] << 4) | q[1::2])
    else:
        raise SystemExit(f"{where}: unknown strategy")


def check_encoding(args):
    parent = reconstruct(args.parent, args.through) if args.through else load_file(args.parent)
    ft = load_file(args.ft)
    version, _, tensors = read_any_version(args.wdelta)
    for name, payload in tensors.items():
        p = np.asarray(parent[name], dtype=np.float32).reshape(-1)
        f = np.asarray(ft[name], dtype=np.float32).reshape(-1)
        with np.errstate(invalid="ignore"):
            d = np.where(p.view(np.uint32) == f.view(np.uint32), np.float32(0), f - p)
        check_tensor(name, payload, d, version)
        del p, f, d
    print(f"{args.wdelta}: {len(tensors)} tensors encoded as defined")


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
    a = sub.add_parser("check-rebuilt")
    a.add_argument("base")
    a.add_argument("rebuilt")
    a.add_argument("wdeltas", nargs="+")
    a.set_defaults(fn=check_rebuilt)
    a = sub.add_parser("check-encoding")
    a.add_argument("parent")
    a.add_argument("ft")
    a.add_argument("wdelta")
    a.add_argument("--through", nargs="+", default=[])
    a.set_defaults(fn=check_encoding)
    a = sub.add_parser("shard")
    a.add_argument("model")
    a.add_argument("dir")
    a.add_argument("n", type=int)
    a.set_defaults(fn=shard)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
