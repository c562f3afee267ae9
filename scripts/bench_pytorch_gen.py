#!/usr/bin/env python3
"""Writes two ~500 MB PyTorch checkpoints (torch.save's zip layout) for scripts/bench-pytorch.sh:
OUT/a/pytorch_model.bin and OUT/b/pytorch_model.bin, the same Llama-shaped state dict with every
value of b nudged. Standard library and numpy only (no torch): the pickle names torch's globals
through stand-in modules registered under torch's names, so `pickle` writes the same GLOBAL and
persistent-id opcodes torch.save writes; storages are stored zip members as torch writes them.

    bench_pytorch_gen.py OUT [--layers N]

Tensors: the embedding and the norms in float32, attention in bfloat16, MLP in float16.
"""

import argparse
import io
import os
import pickle
import sys
import zipfile
from collections import OrderedDict

import numpy as np


# The stand-in modules the hostile-checkpoint tests use (torch's globals without torch).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "common"))
from hostile_pytorch import _rebuild_tensor_v2, stand_in  # noqa: E402


class FloatStorage: ...
class HalfStorage: ...
class BFloat16Storage: ...


stand_in("torch", FloatStorage=FloatStorage, HalfStorage=HalfStorage, BFloat16Storage=BFloat16Storage)
STORAGE = {"float32": FloatStorage, "float16": HalfStorage, "bfloat16": BFloat16Storage}


class Storage:
    def __init__(self, key: str, dtype: str, numel: int):
        self.key, self.dtype, self.numel = key, dtype, numel


class Tensor:
    def __init__(self, storage: Storage, shape: tuple):
        stride, step = [], 1
        for dim in reversed(shape):
            stride.insert(0, step)
            step *= dim
        self.args = (storage, 0, shape, tuple(stride), False, OrderedDict())

    def __reduce__(self):
        return (_rebuild_tensor_v2, self.args)


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", STORAGE[obj.dtype], obj.key, "cpu", obj.numel)
        return None


def shapes(layers: int):
    hidden, ffn, vocab = 1024, 2816, 32000
    yield "model.embed_tokens.weight", (vocab, hidden), "float32"
    for i in range(layers):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            yield p + f"self_attn.{name}.weight", (hidden, hidden), "bfloat16"
        yield p + "mlp.gate_proj.weight", (ffn, hidden), "float16"
        yield p + "mlp.up_proj.weight", (ffn, hidden), "float16"
        yield p + "mlp.down_proj.weight", (hidden, ffn), "float16"
        yield p + "input_layernorm.weight", (hidden,), "float32"
        yield p + "post_attention_layernorm.weight", (hidden,), "float32"
    yield "model.norm.weight", (hidden,), "float32"


def encode(values: np.ndarray, dtype: str) -> bytes:
    if dtype == "bfloat16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return values.astype(dtype).tobytes()


def write(path: str, state: OrderedDict, storages: list) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
        out = io.BytesIO()
        TorchPickler(out, protocol=2).dump(state)
        pickled = out.getvalue()
        z.writestr("archive/data.pkl", pickled)
        z.writestr("archive/byteorder", "little")
        for key, data in storages:
            with z.open(f"archive/data/{key}", "w", force_zip64=True) as member:
                member.write(data)
        z.writestr("archive/version", "3\n")
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=14)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    states = {"a": (OrderedDict(), []), "b": (OrderedDict(), [])}
    for key, (name, shape, dtype) in enumerate(shapes(args.layers)):
        numel = int(np.prod(shape))
        base = rng.standard_normal(numel, dtype=np.float32) * 0.02
        nudged = base + rng.standard_normal(numel, dtype=np.float32) * 0.001
        for side, values in (("a", base), ("b", nudged)):
            state, storages = states[side]
            storage = Storage(str(key), dtype, numel)
            state[name] = Tensor(storage, shape)
            storages.append((str(key), encode(values, dtype)))
    for side, (state, storages) in states.items():
        write(os.path.join(args.out, side, "pytorch_model.bin"), state, storages)
        print(os.path.join(args.out, side, "pytorch_model.bin"))


if __name__ == "__main__":
    main()
