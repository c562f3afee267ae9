"""Writes the model files the policy tests need, with the reference libraries.

Usage: gen_fixtures.py '{"path": {"kind": ..., ...}, ...}'

Kinds:
  gguf         gguf-py GGUFWriter; "tensors": [[name, dtype, shape]], "kv": {key: value}
  safetensors  safetensors.numpy.save_file; "tensors": [[name, numpy dtype, shape]],
               "metadata": {key: str}
  torch_zip    the zip layout of torch.save (archive/data.pkl, stored), made without torch;
               "evil": true adds an object whose __reduce__ calls os.system
  raw_pickle   a bare pickle ("protocol": 2..5); "legacy": true prepends the magic/protocol/
               sys_info pickles of the pre-1.6 torch.save format
  os_system    a hand-written protocol-2 pickle whose GLOBAL opcode imports os.system (CPython
               would write posix.system), checked by pickletools
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


def gguf_file(path, spec):
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(path, spec.get("arch", "llama"))
    for k, v in spec.get("kv", {}).items():
        if isinstance(v, bool):
            w.add_bool(k, v)
        elif isinstance(v, int):
            w.add_uint32(k, v)
        elif isinstance(v, float):
            w.add_float32(k, v)
        else:
            w.add_string(k, v)
    for name, dtype, shape in spec["tensors"]:
        n = 1
        for d in shape:
            n *= d
        if dtype == "f32":
            w.add_tensor(name, np.arange(n, dtype=np.float32).reshape(shape))
        elif dtype == "f16":
            w.add_tensor(name, np.arange(n, dtype=np.float16).reshape(shape))
        else:
            # Quantized: raw blocks of the right size (the values do not matter here).
            qt = gguf.GGMLQuantizationType[dtype.upper()]
            block, size = gguf.GGML_QUANT_SIZES[qt]
            per_row = shape[-1] // block * size
            w.add_tensor(name, np.zeros((*shape[:-1], per_row), dtype=np.uint8), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def safetensors_file(path, spec):
    import numpy as np
    from safetensors.numpy import save_file

    tensors = {name: np.zeros(shape, dtype=dtype) for name, dtype, shape in spec["tensors"]}
    save_file(tensors, path, metadata=spec.get("metadata"))


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


KINDS = dict(
    gguf=gguf_file,
    safetensors=safetensors_file,
    torch_zip=torch_zip,
    raw_pickle=raw_pickle,
    os_system=os_system,
)

for path, spec in json.loads(sys.argv[1]).items():
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    KINDS[spec["kind"]](path, spec)
