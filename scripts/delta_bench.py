"""Benchmark helpers for scripts/bench_delta.sh (not used by the tests).

  gen DIR [--dtype f32|bf16] [--scale 1.0]
      writes DIR/base.safetensors and DIR/ft.safetensors: a Qwen2.5-0.5B-shaped model
      (~494M parameters at scale 1.0) and a fine-tune-like copy (small Gaussian updates, 2% of
      them 10x larger). Tensors are generated and written one at a time.
  ref-create BASE FT OUT [STRATEGY]
      deltatensors 0.2.0: save_delta over the models loaded with safetensors.numpy (its API
      that works without torch; save_delta_from_paths needs torch).
  ref-apply WDELTA BASE OUT
      deltatensors 0.2.0: load_delta, then safetensors.numpy.save_file of the result.
  error BASE FT RECON
      reconstruction error of RECON (float32) against FT, relative to the true delta FT - BASE:
      prints max |err|, RMS err, max |delta|, RMS delta and the two ratios.
"""

import argparse
import json
import struct
import sys

import numpy as np


def shapes(scale):
    hidden, inter, kv, vocab, layers = 896, 4864, 128, 151936, 24
    vocab = max(1, int(vocab * scale))
    layers = max(1, int(round(layers * scale)))
    out = [("model.embed_tokens.weight", (vocab, hidden)), ("model.norm.weight", (hidden,))]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (hidden,)),
            (p + "post_attention_layernorm.weight", (hidden,)),
            (p + "self_attn.q_proj.weight", (hidden, hidden)),
            (p + "self_attn.q_proj.bias", (hidden,)),
            (p + "self_attn.k_proj.weight", (kv, hidden)),
            (p + "self_attn.k_proj.bias", (kv,)),
            (p + "self_attn.v_proj.weight", (kv, hidden)),
            (p + "self_attn.v_proj.bias", (kv,)),
            (p + "self_attn.o_proj.weight", (hidden, hidden)),
            (p + "mlp.gate_proj.weight", (inter, hidden)),
            (p + "mlp.up_proj.weight", (inter, hidden)),
            (p + "mlp.down_proj.weight", (hidden, inter)),
        ]
    return sorted(out)


def f32_to_bf16(x):
    bits = x.view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def write_streaming(path, specs, dtype, make):
    """specs: [(name, shape)]; make(i) returns the float32 array of tensor i."""
    size = 4 if dtype == "f32" else 2
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in specs:
        n = int(np.prod(shape)) * size
        header[name] = {"dtype": "F32" if dtype == "f32" else "BF16", "shape": list(shape),
                        "data_offsets": [offset, offset + n]}
        offset += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for i in range(len(specs)):
            a = make(i)
            f.write((a if dtype == "f32" else f32_to_bf16(a)).tobytes())


def gen(args):
    specs = shapes(args.scale)

    def base(i):
        rng = np.random.default_rng(1000 + i)
        return (rng.standard_normal(specs[i][1], dtype=np.float32) * 0.02).astype(np.float32)

    def ft(i):
        b = base(i)
        rng = np.random.default_rng(5000 + i)
        d = rng.standard_normal(b.shape, dtype=np.float32) * np.float32(2e-4)
        flat = d.reshape(-1)
        big = rng.random(flat.size) < 0.02
        flat[big] *= 10
        return b + d

    write_streaming(f"{args.dir}/base.safetensors", specs, args.dtype, base)
    write_streaming(f"{args.dir}/ft.safetensors", specs, args.dtype, ft)
    print(sum(int(np.prod(s)) for _, s in specs), "parameters")


def ref_create(args):
    import deltatensors as dt
    from safetensors.numpy import load_file
    dt.save_delta(args.out, load_file(args.ft), load_file(args.base), strategy=args.strategy, use_gpu=False)


def ref_apply(args):
    import deltatensors as dt
    from safetensors.numpy import load_file, save_file
    rec = dt.load_delta(args.wdelta, load_file(args.base))
    save_file(rec, args.out)


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    for name in sorted(k for k in header if k != "__metadata__"):
        meta = header[name]
        a, b = meta["data_offsets"]
        raw = mm[8 + n + a: 8 + n + b]
        if meta["dtype"] == "F32":
            yield name, raw.view(np.float32)
        elif meta["dtype"] == "BF16":
            yield name, (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: {name}: unsupported dtype {meta['dtype']}")


def error(args):
    max_err = max_d = 0.0
    se = sd = 0.0
    count = 0
    for (n1, b), (n2, f), (n3, r) in zip(tensors(args.base), tensors(args.ft), tensors(args.recon)):
        assert n1 == n2 == n3
        d = f.astype(np.float64) - b
        e = r.astype(np.float64) - f
        max_err = max(max_err, float(np.abs(e).max()))
        max_d = max(max_d, float(np.abs(d).max()))
        se += float((e * e).sum())
        sd += float((d * d).sum())
        count += e.size
    rms_e, rms_d = (se / count) ** 0.5, (sd / count) ** 0.5
    print(json.dumps({"max_abs_err": max_err, "rms_err": rms_e, "max_abs_delta": max_d, "rms_delta": rms_d,
                      "max_err_over_max_delta": max_err / max_d, "rms_err_over_rms_delta": rms_e / rms_d}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("gen")
    a.add_argument("dir")
    a.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    a.add_argument("--scale", type=float, default=1.0)
    a.set_defaults(fn=gen)
    a = sub.add_parser("ref-create")
    a.add_argument("base")
    a.add_argument("ft")
    a.add_argument("out")
    a.add_argument("strategy", nargs="?", default="int4")
    a.set_defaults(fn=ref_create)
    a = sub.add_parser("ref-apply")
    a.add_argument("wdelta")
    a.add_argument("base")
    a.add_argument("out")
    a.set_defaults(fn=ref_apply)
    a = sub.add_parser("error")
    a.add_argument("base")
    a.add_argument("ft")
    a.add_argument("recon")
    a.set_defaults(fn=error)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
