#!/usr/bin/env python3
"""The model group's value figures between two zip checkpoints (docs/pytorch.md, "diff group by
group"), read without torch and without weight-inspect: Python's zipfile and a restricted
Unpickler that rebuilds each tensor as numpy's strided view of its storage (anything else is
a stub). Sums in float64 as docs/values.md defines them.

    checkpoint_values.py OLD NEW

Prints JSON: the tensors' dotted names, and for the model (`state_dict.`) and optimizer
(`optimizer_states.`) groups their tensor count, rel_l2 over the group (||b - a|| / ||a|| of
its tensors as one vector) and the largest rel_l2 of one changed tensor.
"""
import io
import json
import math
import pickle
import sys
import zipfile

import numpy as np

DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
          "LongStorage": np.int64, "IntStorage": np.int32, "BFloat16Storage": np.uint16}

def arrays(path):
    z = zipfile.ZipFile(path)
    pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
    folder = pkl[: -len("data.pkl")]
    class Storage:
        def __init__(self, name): self.name = name
    def rebuild(storage, offset, size, stride, *rest):
        data = np.frombuffer(z.read(f"{folder}data/{storage[1]}"), dtype=storage[0])
        item = data.itemsize
        return np.lib.stride_tricks.as_strided(data[offset:], shape=size,
                                               strides=[s * item for s in stride]).copy()
    class ODict(dict):
        pass
    class Stub:
        def __init__(self, *a, **k): pass
        def __setstate__(self, s): pass
    class Reader(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "torch._utils" and name == "_rebuild_tensor_v2":
                return rebuild
            if module == "collections" and name == "OrderedDict":
                return ODict
            if module == "torch":
                return name  # a storage type's name
            return Stub
        def persistent_load(self, pid):
            return (DTYPES[pid[1]], pid[2])
    root = Reader(io.BytesIO(z.read(pkl))).load()
    out = {}
    def walk(prefix, v):
        if isinstance(v, np.ndarray):
            out[prefix] = v
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(f"{prefix}.{i}" if prefix else str(i), x)
    walk("", root)
    return out

a, b = arrays(sys.argv[1]), arrays(sys.argv[2])
def sq(x):
    return float(np.sum(np.square(x.astype(np.float64))))


def group_figures(prefix):
    names = [n for n in a if n.startswith(prefix)]
    diff = {n: sq(b[n].astype(np.float64) - a[n].astype(np.float64)) for n in names}
    norm = {n: sq(a[n]) for n in names}
    return {
        "tensors": len(names),
        "rel_l2": math.sqrt(sum(diff.values())) / math.sqrt(sum(norm.values())),
        "largest": max(math.sqrt(diff[n] / norm[n]) for n in names if diff[n] > 0),
    }


print(json.dumps({
    "tensors": sorted(a),
    "model": group_figures("state_dict."),
    "optimizer": group_figures("optimizer_states."),
}))
