"""Writes the model and checkpoint files of the integration tests with the reference libraries.

Usage: make_models.py < SPECS, run in the directory the paths are relative to. SPECS is a JSON
object {"path": spec, ...}; parent directories are created. Every spec has a "kind":

  gguf         gguf-py's GGUFWriter. "arch" (default "llama"); "metadata": {key: value}, where
               bools are bools, ints u32, floats f32, lists arrays, strings strings, and
               "__u64:N" strings u64; "tensors": [tensor, ...]; "writer": keyword arguments of
               GGUFWriter, e.g. {"split_max_tensors": 2}, which writes PATH-0000K-of-0000N.gguf;
               "no_arch": true leaves out general.architecture (to hand-make a later part).
  sharded_safetensors  a directory as transformers writes it: huggingface_hub's shard planner
               ("max_shard_size" in bytes), shards written by the safetensors package with
               "metadata" (default {"format": "pt"}), model.safetensors.index.json.
  safetensors  safetensors.numpy.save_file. "metadata": {key: str} (none when absent or empty);
               "tensors": [tensor, ...].
  torch_zip    the zip layout of torch.save (archive/data.pkl, stored), made without torch;
               "evil": true adds an object whose __reduce__ calls os.system.
  raw_pickle   a bare pickle ("protocol": 2..5, default 2); "legacy": true prepends the
               magic/protocol/sys_info pickles of the pre-1.6 torch.save format; "evil" as above.
  os_system    a hand-written protocol-2 pickle whose GLOBAL opcode imports os.system (CPython
               would write posix.system), checked by pickletools.

A tensor is {"name", "dtype", "shape", "fill"}. "dtype" is a numpy dtype name (float32,
float16, int8, ...); in a GGUF file also f32, f16 or a quantized GGML type (q8_0, q4_k, ...),
whose data is raw zero blocks of the right size. "fill" sets the values (default 0):
  a number               every element is that number;
  "arange"               0, 1, 2, ... in row-major order;
  {"normal": SEED}       numpy's default_rng(SEED).standard_normal, cast to the dtype;
  {"normal": SEED, "plus": X}   the same plus X (added in the dtype).
Nothing here is ever unpickled.
"""
import collections
import io
import json
import os
import pickle
import pickletools
import sys
import types
import zipfile

import numpy as np

# GGUF tensor types that are written from numpy arrays; every other GGML type is quantized.
GGUF_FLOATS = {"f32": "float32", "f16": "float16"}


def values(tensor, dtype):
    shape = tensor["shape"]
    fill = tensor.get("fill", 0)
    if fill == "arange":
        n = 1
        for d in shape:
            n *= d
        return np.arange(n, dtype=dtype).reshape(shape)
    if isinstance(fill, dict):
        array = np.random.default_rng(fill["normal"]).standard_normal(shape).astype(dtype)
        if "plus" in fill:
            array = array + np.dtype(dtype).type(fill["plus"])
        return array
    if isinstance(fill, (int, float)) and not isinstance(fill, bool):
        return np.full(shape, fill, dtype=dtype)
    raise SystemExit(f"tensor {tensor['name']}: unsupported fill {fill!r}")


def gguf_file(path, spec):
    import gguf

    w = gguf.GGUFWriter(path, spec.get("arch", "llama"), **spec.get("writer", {}))
    if spec.get("no_arch"):
        # A later part of a split model carries no model metadata, not even the architecture.
        w.kv_data[0].pop(gguf.Keys.General.ARCHITECTURE)
    for key, value in spec.get("metadata", {}).items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str) and value.startswith("__u64:"):
            w.add_uint64(key, int(value[6:]))
        elif isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, list):
            w.add_array(key, value)
        else:
            raise SystemExit(f"unsupported metadata value {value!r}")
    for tensor in spec.get("tensors", []):
        name, dtype, shape = tensor["name"], tensor["dtype"], tensor["shape"]
        qt = gguf.GGMLQuantizationType.__members__.get(dtype.upper())
        if dtype in GGUF_FLOATS:
            w.add_tensor(name, values(tensor, GGUF_FLOATS[dtype]))
        elif qt is not None:
            # Quantized: raw blocks of the right size (the values do not matter here).
            if "fill" in tensor:
                raise SystemExit(f"tensor {name}: a {dtype} tensor is written as zero blocks")
            block, size = gguf.GGML_QUANT_SIZES[qt]
            per_row = shape[-1] // block * size
            w.add_tensor(name, np.zeros((*shape[:-1], per_row), dtype=np.uint8), raw_dtype=qt)
        else:
            w.add_tensor(name, values(tensor, dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def safetensors_file(path, spec):
    from safetensors.numpy import save_file

    tensors = {t["name"]: values(t, t["dtype"]) for t in spec.get("tensors", [])}
    save_file(tensors, path, metadata=spec.get("metadata") or None)


def fake_torch():
    """Importable stand-ins so that pickle records torch's global names, as torch.save does."""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):
        pass

    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2

    class FloatStorage:
        pass

    FloatStorage.__module__ = "torch"
    FloatStorage.__qualname__ = "FloatStorage"
    torch.FloatStorage = FloatStorage
    torch._utils = utils
    sys.modules["torch"] = torch
    sys.modules["torch._utils"] = utils
    return torch, utils


TORCH, UTILS = fake_torch()


class StorageRef:
    def __init__(self, key):
        self.key = key


class Rebuild:
    def __init__(self, key):
        self.key = key

    def __reduce__(self):
        return (
            UTILS._rebuild_tensor_v2,
            (StorageRef(self.key), 0, (2, 2), (2, 1), False, collections.OrderedDict()),
        )


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, StorageRef):
            return ("storage", TORCH.FloatStorage, obj.key, "cpu", 4)
        return None


def state_dict(evil):
    sd = collections.OrderedDict(weight=Rebuild("0"))
    if evil:
        sd["payload"] = Evil()
    return sd


def torch_zip(path, spec):
    buf = io.BytesIO()
    TorchPickler(buf, protocol=2).dump(state_dict(spec.get("evil", False)))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", bytes(16))
        z.writestr("archive/version", "3\n")


def raw_pickle(path, spec):
    with open(path, "wb") as f:
        if spec.get("legacy"):
            for obj in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
                pickle.dump(obj, f, protocol=2)
        TorchPickler(f, protocol=spec.get("protocol", 2)).dump(state_dict(spec.get("evil", False)))


def os_system(path, spec):
    data = b"\x80\x02cos\nsystem\nq\x00X\x0a\x00\x00\x00echo pwnedq\x01\x85q\x02Rq\x03."
    pickletools.dis(data, out=io.StringIO())  # raises if the opcodes are not valid
    with open(path, "wb") as f:
        f.write(data)


def sharded_safetensors(path, spec):
    """A directory as transformers' save_pretrained writes it: shards planned by huggingface_hub's
    splitter, written by the safetensors package, and model.safetensors.index.json."""
    from huggingface_hub import split_state_dict_into_shards_factory
    from safetensors.numpy import save_file

    os.makedirs(path, exist_ok=True)
    tensors = {t["name"]: values(t, t["dtype"]) for t in spec.get("tensors", [])}
    split = split_state_dict_into_shards_factory(
        tensors,
        get_storage_size=lambda a: a.nbytes,
        filename_pattern="model{suffix}.safetensors",
        max_shard_size=spec["max_shard_size"],
    )
    metadata = spec.get("metadata", {"format": "pt"})
    for filename, names in split.filename_to_tensors.items():
        save_file({n: tensors[n] for n in names}, os.path.join(path, filename), metadata=metadata)
    if split.is_sharded:
        index = {"metadata": split.metadata, "weight_map": split.tensor_to_filename}
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")


KINDS = dict(
    sharded_safetensors=sharded_safetensors,
    gguf=gguf_file,
    safetensors=safetensors_file,
    torch_zip=torch_zip,
    raw_pickle=raw_pickle,
    os_system=os_system,
)

for path, spec in json.load(sys.stdin).items():
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    KINDS[spec["kind"]](path, spec)
