#!/usr/bin/env python3
"""PyTorch checkpoint fixtures, written by real torch.save (and transformers, Lightning).

Usage (in a venv with the versions pinned in scripts/requirements-fixtures.txt; never the
test venv, which has no torch):

    fixture-venv/bin/python scripts/make_pytorch_fixtures.py tests/fixtures/pytorch

Writes every file below into OUTDIR (emptied first), checks each one, and writes
OUTDIR/manifest.json, the reference the Rust reader is tested against. Tensor values come from
fixed seeds; zip checkpoints come out byte for byte the same on each run with the same torch.

  basic.pt                 zip layout saved to a path (torch names the archive folder after the
                           file stem: "basic/"); f32, f16, bf16, i64, bool, non-ASCII names
  basic-legacy.pt          the same dict in the legacy (pre-1.6, non-zip) layout
  all-dtypes.pt            zip, saved through a file object (folder "archive/"): one tensor of
                           every dtype this torch saves; the newer dtypes (uint16/32/64, float8
                           variants, float8_e8m0fnu, float4_e2m1fn_x2, complex32, bits8/16) are
                           pickled as _rebuild_tensor_v3 + UntypedStorage + a torch dtype global
  all-dtypes-legacy.pt     legacy layout, every dtype the legacy writer accepts
  protocol4.pt, protocol5.pt  basic's dict with pickle_protocol 4 and 5 (FRAME, MEMOIZE,
                           SHORT_BINUNICODE, STACK_GLOBAL; torch's default is protocol 2;
                           torch.load(weights_only=True) refuses them: FRAME is opcode 149)
  tied.pt                  embed.weight and lm_head.weight one tensor; big, big[2:5] (storage
                           offset into the shared storage) and the column big[:, 1]
  views.pt                 w and w.t() (transposed view of the same storage), a transposed
                           tensor whose base is not saved, an expand() (stride 0), a permuted
                           3-d tensor and a narrow() of a larger hidden storage
  views-legacy.pt          views.pt's dict in the legacy layout
  lightning.ckpt           written by pytorch_lightning.Trainer.save_checkpoint after one real
                           epoch of fit() (epoch, global_step, pytorch-lightning_version,
                           state_dict, loops, callbacks, optimizer_states with Adam state,
                           lr_schedulers, hparams_name, hyper_parameters)
  lightning-shape.pt       the same shape built by hand and written with torch.save
  model-wrapped.pt         {"model": state_dict, "epoch": 7}
  data-pkl-last.zip.pt     a REWRITE of a real torch zip by Python's zipfile: the same members,
                           all stored (uncompressed), with data.pkl moved to the end
  empty.pt                 torch.save({})
  scalars.pt               0-dim tensors (f32, i64, bool), zero-element tensors ([0], [0, 4])
  tensor-only.pt           torch.save(tensor), no dict around it
  parameter.pt             nn.Parameter objects (torch._utils._rebuild_parameter), one with
                           requires_grad=False
  state-dict-metadata.pt   Module.state_dict() as is: an OrderedDict whose _metadata attribute
                           (module versions) the pickle sets with BUILD; BatchNorm buffers incl.
                           the i64 scalar num_batches_tracked
  quantized.pt             a per-tensor-affine qint8 tensor (torch._utils._rebuild_qtensor)
  hf-bin-sharded/          transformers save_pretrained(safe_serialization=False,
                           max_shard_size="20KB"): pytorch_model-0000K-of-0000N.bin + index
  hf-bin/                  the same model as one pytorch_model.bin
  hf-safetensors/          the same model as model.safetensors (checked equal to the .bin)
  malicious-os-system.pt   raw pickle, protocol 2: REDUCE of os.system("touch
                           weight-inspect-canary"), pickled as GLOBAL "posix system" on Linux
  malicious-os-system-zip.pt  torch.save (zip, "archive/") of {"weight": tensor, "config":
                           <the same payload>}: a real checkpoint with the payload inside
  malicious-eval.pt        raw pickle, protocol 2: builtins.eval of a string that creates the
                           canary (protocol 2 pickles it as GLOBAL "__builtin__ eval")
  malicious-eval-p4.pt     the same, protocol 4 (STACK_GLOBAL "builtins" "eval")
  malicious-popen.pt       raw pickle, protocol 4: subprocess.Popen(["touch",
                           "weight-inspect-canary"])
Each malicious file creates the file `weight-inspect-canary` in the current directory when
unpickled by Python (checked here in a throw-away directory); a safe reader must not.

manifest.json, per file: layout ("zip" | "legacy" | "raw-pickle"), archive folder, pickle
protocol, whether torch.load(weights_only=True) accepts it, and for every tensor reached from
the root (through dicts, lists and tuples) its key path (a list of keys; ints are list/tuple
indices or int dict keys, `containers` says which container each step goes through), dtype
(torch name), shape, stride, storage_offset, storage key, the storage type and numel as
pickled (for UntypedStorage the numel is in bytes), storage_nbytes, the rebuild function, and
sha256 of the tensor's logical row-major bytes (t.contiguous() viewed as uint8). Non-tensor
leaves are listed with their Python type and value. Attributes that the pickle sets on a
container with BUILD (state_dict()'s _metadata) are under `object_state`.
"""
import collections
import hashlib
import io
import json
import os
import pickle
import pickletools
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import torch

CANARY = "weight-inspect-canary"
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


# --------------------------------------------------------------------------- content
def gen(seed):
    g = torch.Generator().manual_seed(seed)
    return g


def basic_dict():
    g = gen(1)
    return collections.OrderedDict([
        ("layer.weight", torch.randn(3, 4, generator=g)),
        ("layer.bias", torch.randn(3, generator=g).half()),
        ("norm.weight", torch.randn(5, generator=g).bfloat16()),
        ("position_ids", torch.arange(4, dtype=torch.int64)),
        ("mask", torch.tensor([[True, False], [False, True]])),
        ("ünïcödé.wéight", torch.randn(2, generator=g)),
        ("層.重み", torch.tensor([1.0, -2.5], dtype=torch.float32)),
    ])


def float_values(n, seed):
    g = gen(seed)
    v = torch.randn(n, generator=g) * 3
    v[0] = 0.5
    return v


def all_dtype_tensors(legacy):
    """(name, tensor) for every dtype this torch can save in the layout, and the refused ones."""
    cands = []
    f = float_values(6, 2)
    cands += [
        ("f64", lambda: f.double().reshape(2, 3)),
        ("f32", lambda: torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -0.0, 1e-40])),
        ("f16", lambda: f.half()),
        ("bf16", lambda: f.bfloat16()),
        ("i64", lambda: torch.tensor([-(2**63), 2**63 - 1, 0, -1], dtype=torch.int64)),
        ("i32", lambda: torch.tensor([-(2**31), 2**31 - 1, 7], dtype=torch.int32)),
        ("i16", lambda: torch.tensor([-(2**15), 2**15 - 1, 7], dtype=torch.int16)),
        ("i8", lambda: torch.tensor([-128, 127, 7], dtype=torch.int8)),
        ("u8", lambda: torch.tensor([0, 255, 7], dtype=torch.uint8)),
        ("bool", lambda: torch.tensor([True, False, True])),
        ("c64", lambda: torch.complex(f[:3], f[3:])),
        ("c128", lambda: torch.complex(f[:3].double(), f[3:].double())),
        ("c32", lambda: torch.complex(f[:3], f[3:]).to(torch.complex32)),
    ]
    for name, dt in [("u16", "uint16"), ("u32", "uint32"), ("u64", "uint64")]:
        if hasattr(torch, dt):
            big = {"uint16": 2**16 - 1, "uint32": 2**32 - 1, "uint64": 2**64 - 1}[dt]
            cands.append((name, lambda dt=dt, big=big: torch.tensor([0, 1, 7, big if dt != "uint64" else 2**63], dtype=getattr(torch, dt))))
    for dt in ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]:
        if hasattr(torch, dt):
            cands.append((dt, lambda dt=dt: f.abs().to(getattr(torch, dt)) if dt == "float8_e8m0fnu" else f.to(getattr(torch, dt))))
    for dt in ["float4_e2m1fn_x2", "bits8"]:
        if hasattr(torch, dt):
            cands.append((dt, lambda dt=dt: torch.tensor([0x12, 0x34, 0xAB, 0xFF], dtype=torch.uint8).view(getattr(torch, dt))))
    if hasattr(torch, "bits16"):
        cands.append(("bits16", lambda: torch.tensor([0x1234, 0x7F00], dtype=torch.int16).view(torch.bits16)))
    out, refused = collections.OrderedDict(), {}
    for name, make in cands:
        t = make()
        try:
            b = io.BytesIO()
            torch.save({name: t}, b, _use_new_zipfile_serialization=not legacy)
            b.seek(0)
            back = torch.load(b, weights_only=False)[name]
            assert back.dtype == t.dtype and raw_bytes(back) == raw_bytes(t)
        except Exception as e:  # the writer refuses the dtype in this layout
            refused[str(t.dtype).removeprefix("torch.")] = f"{type(e).__name__}: {e}"[:200]
            continue
        out[name] = t
    return out, refused


def tied_dict():
    g = gen(3)
    w = torch.randn(8, 4, generator=g)
    big = torch.randn(10, 3, generator=g)
    return collections.OrderedDict([
        ("embed.weight", w),
        ("lm_head.weight", w),
        ("big", big),
        ("big_rows_2_5", big[2:5]),
        ("big_col_1", big[:, 1]),
    ])


def views_dict():
    g = gen(4)
    w = torch.randn(3, 5, generator=g)
    hidden = torch.randn(4, 6, generator=g)
    v = torch.randn(3, generator=g)
    cube = torch.randn(2, 3, 4, generator=g)
    wide = torch.randn(20, generator=g)
    return collections.OrderedDict([
        ("w", w),
        ("w_t", w.t()),
        ("hidden_t", hidden.t()),
        ("expanded", v.expand(4, 3)),
        ("permuted", cube.permute(2, 0, 1)),
        ("narrow", wide.narrow(0, 5, 7)),
    ])


def lightning_shape():
    g = gen(5)
    w, b = torch.randn(3, 4, generator=g), torch.randn(3, generator=g)
    return {
        "epoch": 3,
        "global_step": 120,
        "pytorch-lightning_version": "2.6.6",
        "state_dict": collections.OrderedDict([("layer.weight", w), ("layer.bias", b)]),
        "optimizer_states": [{
            "state": {0: {"step": torch.tensor(120.0), "exp_avg": torch.zeros(3, 4), "exp_avg_sq": torch.zeros(3, 4)},
                      1: {"step": torch.tensor(120.0), "exp_avg": torch.zeros(3), "exp_avg_sq": torch.zeros(3)}},
            "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-08, "weight_decay": 0,
                              "amsgrad": False, "params": [0, 1]}],
        }],
        "lr_schedulers": [],
        "hyper_parameters": {"lr": 0.001, "name": "tiny"},
    }


def lightning_real(path):
    import pytorch_lightning as pl

    pl.seed_everything(6, verbose=False)

    class Tiny(pl.LightningModule):
        def __init__(self, lr=0.001, name="tiny"):
            super().__init__()
            self.save_hyperparameters()
            self.layer = torch.nn.Linear(4, 3)

        def training_step(self, batch, idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)

    g = gen(7)
    ds = torch.utils.data.TensorDataset(torch.randn(8, 4, generator=g), torch.randn(8, 3, generator=g))
    trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu", devices=1)
    trainer.fit(Tiny(), torch.utils.data.DataLoader(ds, batch_size=4))
    trainer.save_checkpoint(path)
    return pl.__version__


def scalars_dict():
    return collections.OrderedDict([
        ("scalar_f32", torch.tensor(3.5)),
        ("scalar_i64", torch.tensor(7)),
        ("scalar_bool", torch.tensor(True)),
        ("empty_1d", torch.zeros(0)),
        ("empty_2d", torch.zeros(0, 4, dtype=torch.float16)),
    ])


def parameter_dict():
    g = gen(8)
    return collections.OrderedDict([
        ("p", torch.nn.Parameter(torch.randn(2, 3, generator=g))),
        ("frozen", torch.nn.Parameter(torch.randn(4, generator=g), requires_grad=False)),
        ("plain", torch.randn(2, generator=g)),
    ])


def metadata_state_dict():
    torch.manual_seed(9)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    m.train()
    m(torch.randn(5, 3))  # one forward pass: BatchNorm running stats and num_batches_tracked move
    sd = m.state_dict()
    assert hasattr(sd, "_metadata")
    return sd


# --------------------------------------------------------------------------- malicious pickles
class SystemPayload:
    def __reduce__(self):
        return (os.system, (f"touch {CANARY}",))


class EvalPayload:
    def __reduce__(self):
        import builtins
        return (builtins.eval, (f"open({CANARY!r}, 'w').close() or 0",))


class PopenPayload:
    def __reduce__(self):
        return (subprocess.Popen, (["touch", CANARY],))


def check_payload_fires(path):
    """Unpickle the file with Python in a throw-away directory: the canary must appear."""
    with tempfile.TemporaryDirectory() as d:
        code = ("import sys, torch, time\n"
                "p = sys.argv[1]\n"
                "try:\n    torch.load(p, weights_only=False)\n"
                "except Exception as e:\n    print(type(e).__name__, e)\n"
                "time.sleep(0.5)\n")
        subprocess.run([sys.executable, "-c", code, str(path.resolve())], cwd=d, check=True,
                       capture_output=True)
        assert os.path.exists(os.path.join(d, CANARY)), f"{path}: payload did not fire"


# --------------------------------------------------------------------------- recording unpickler
class StorageRef:
    def __init__(self, pid):
        self.type_name = pid[1].name
        self.key = pid[2]
        self.location = pid[3]
        self.numel = pid[4]


class Global:
    def __init__(self, module, name):
        self.module, self.name = module, name


class TensorRef:
    def __init__(self, rebuild, storage, offset, size, stride, requires_grad, dtype=None):
        self.rebuild, self.storage, self.offset = rebuild, storage, offset
        self.size, self.stride, self.requires_grad = tuple(size), tuple(stride), requires_grad
        self.dtype = dtype
        self.parameter = False


def _v2(storage, offset, size, stride, requires_grad, hooks, metadata=None):
    return TensorRef("_rebuild_tensor_v2", storage, offset, size, stride, requires_grad)


def _v3(storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
    return TensorRef("_rebuild_tensor_v3", storage, offset, size, stride, requires_grad, dtype.name)


def _param(data, requires_grad, hooks, *state):
    data.parameter = True
    data.requires_grad = requires_grad
    return data


def _qtensor(storage, offset, size, stride, qparams, requires_grad, hooks):
    return TensorRef("_rebuild_qtensor", storage, offset, size, stride, requires_grad)


class Recorder(pickle.Unpickler):
    """Walks a checkpoint pickle without building any torch object: tensors become TensorRefs
    holding what the pickle says (storage key, offset, size, stride)."""

    REBUILD = {"_rebuild_tensor_v2": _v2, "_rebuild_tensor_v3": _v3,
               "_rebuild_parameter": _param, "_rebuild_parameter_with_state": _param,
               "_rebuild_qtensor": _qtensor}

    def find_class(self, module, name):
        if module == "torch._utils" and name in self.REBUILD:
            return self.REBUILD[name]
        if module in ("torch", "torch.storage"):
            return Global(module, name)
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return StorageRef(pid)


def globals_named(data):
    """'module name' of each GLOBAL, and of each STACK_GLOBAL (from the two strings before it)."""
    out, strings = [], []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            out.append(arg)
        elif op.name == "STACK_GLOBAL":
            out.append(f"{strings[-2]} {strings[-1]}")
        elif isinstance(arg, str) and "UNICODE" in op.name:
            strings.append(arg)
    return out


def pickle_protocol(data):
    for op, arg, _ in pickletools.genops(data):
        return arg if op.name == "PROTO" else 0
    return 0


def read_layout(path):
    """(layout, folder, main pickle bytes, storage byte sizes by key)."""
    raw = path.read_bytes()
    if zipfile.is_zipfile(path):
        z = zipfile.ZipFile(path)
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl")]
        assert len(pkl) == 1, pkl
        folder = pkl[0][: -len("/data.pkl")]
        sizes = {n[len(folder) + len("/data/"):]: z.getinfo(n).file_size
                 for n in z.namelist() if n.startswith(folder + "/data/")}
        return "zip", folder, z.read(pkl[0]), sizes
    # the legacy layout starts with a pickle of one magic number; look at it without
    # unpickling (a raw pickle may be a payload)
    first = [(op.name, arg) for op, arg, _ in pickletools.genops(io.BytesIO(raw))]
    if ("LONG1", LEGACY_MAGIC) not in first[:3]:
        return "raw-pickle", None, raw, {}
    f = io.BytesIO(raw)
    pickle.load(f)  # magic number
    pickle.load(f)  # protocol version
    pickle.load(f)  # sys info
    start = f.tell()
    Recorder(f).load()
    return "legacy", None, raw[start:f.tell()], None


def tensor_bytes_sha(t):
    return hashlib.sha256(raw_bytes(t)).hexdigest()


def raw_bytes(t):
    if t.is_quantized:
        t = t.int_repr()
    t = t.detach().contiguous().reshape(-1)
    if t.numel() == 0:
        return b""
    return t.view(torch.uint8).numpy().tobytes()


def jsonable(v):
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return repr(v)


def container_kind(o):
    """dict, OrderedDict, list, tuple, or module.QualName of a subclass of one; None otherwise."""
    if not isinstance(o, (dict, list, tuple)):
        return None
    t = type(o)
    if t in (dict, list, tuple):
        return t.__name__
    if t is collections.OrderedDict:
        return "OrderedDict"
    return f"{t.__module__}.{t.__qualname__}"


def walk(rec, real, path, containers, out):
    if isinstance(rec, TensorRef):
        assert isinstance(real, torch.Tensor), (path, type(real))
        out["tensors"].append(tensor_entry(rec, real, path, containers))
        return
    kind = container_kind(rec)
    if kind is None:
        out["values"].append({"path": path, "containers": containers,
                              "type": type(real).__name__, "value": jsonable(real)})
        assert type(real) is type(rec) and (rec == real or rec != rec), (path, rec, real)
        return
    assert container_kind(real) == kind, (path, kind, type(real))
    if isinstance(rec, dict):
        assert list(rec.keys()) == list(real.keys())
        state = {k: v for k, v in vars(rec).items()} if hasattr(rec, "__dict__") else {}
        if state:
            out["object_state"].append({"path": path, "state": to_json_tree(state)})
        if not rec:
            out["values"].append({"path": path, "containers": containers, "type": type(real).__name__, "value": {}})
        for k in rec:
            walk(rec[k], real[k], path + [k], containers + [kind], out)
    else:
        assert len(rec) == len(real)
        if not rec:
            out["values"].append({"path": path, "containers": containers, "type": type(real).__name__, "value": []})
        for i, (a, b) in enumerate(zip(rec, real)):
            walk(a, b, path + [i], containers + [kind], out)


def to_json_tree(o):
    if isinstance(o, dict):
        return {str(k): to_json_tree(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [to_json_tree(v) for v in o]
    return jsonable(o)


def tensor_entry(rec, real, path, containers):
    dtype = str(real.dtype).removeprefix("torch.")
    if rec.dtype is not None:
        assert rec.dtype == dtype, (rec.dtype, dtype)
    assert tuple(real.shape) == rec.size, (path, real.shape, rec.size)
    assert tuple(real.stride()) == rec.stride, (path, real.stride(), rec.stride)
    assert real.storage_offset() == rec.offset, (path, real.storage_offset(), rec.offset)
    assert isinstance(real, torch.nn.Parameter) == rec.parameter, path
    e = {
        "path": path,
        "containers": containers,
        "dtype": dtype,
        "shape": list(rec.size),
        "stride": list(rec.stride),
        "storage_offset": rec.offset,
        "storage_key": rec.storage.key,
        "storage_type": rec.storage.type_name,
        "storage_numel": rec.storage.numel,
        "storage_nbytes": real.untyped_storage().nbytes(),
        "rebuild": rec.rebuild,
        "parameter": rec.parameter,
        "requires_grad": bool(rec.requires_grad),
        "elements": real.numel(),
        "sha256": tensor_bytes_sha(real),
    }
    if real.is_quantized:
        e["q_scale"], e["q_zero_point"] = real.q_scale(), real.q_zero_point()
    return e


def describe(path, root):
    layout, folder, pkl, sizes = read_layout(path)
    entry = {"layout": layout, "archive_folder": folder, "pickle_protocol": pickle_protocol(pkl)}
    if layout == "zip":
        z = zipfile.ZipFile(path)
        entry["members"] = z.namelist()
    rec = Recorder(io.BytesIO(pkl)).load()
    real = torch.load(path, weights_only=False)
    try:
        torch.load(path, weights_only=True)
        entry["torch_weights_only_loads"] = True
    except pickle.UnpicklingError as e:
        entry["torch_weights_only_loads"] = False
        entry["torch_weights_only_error"] = str(e).split("WeightsUnpickler error: ")[-1].strip().split("\n")[0]
    out = {"tensors": [], "values": [], "object_state": []}
    walk(rec, real, [], [], out)
    # storages that several tensors share are one storage after torch.load too
    by_key = collections.defaultdict(set)
    flat = {json.dumps(t["path"]): t for t in out["tensors"]}
    for t in out["tensors"]:
        by_key[t["storage_key"]].add(get(real, t["path"]).untyped_storage().data_ptr())
    assert all(len(p) == 1 for p in by_key.values()), by_key
    if sizes is not None:
        for t in flat.values():
            assert sizes[t["storage_key"]] == t["storage_nbytes"], (path, t)
    entry.update(out)
    if not entry["object_state"]:
        del entry["object_state"]
    return entry


def get(o, path):
    for k in path:
        o = o[k]
    return o


# --------------------------------------------------------------------------- writers
def save(obj, path, **kw):
    torch.save(obj, path, **kw)


def save_via_buffer(obj, path, **kw):
    """torch.save through a file object: the zip's folder is "archive"."""
    b = io.BytesIO()
    torch.save(obj, b, **kw)
    path.write_bytes(b.getvalue())


def rewrite_data_pkl_last(src, dst):
    zin = zipfile.ZipFile(src)
    names = zin.namelist()
    pkl = [n for n in names if n.endswith("/data.pkl")][0]
    order = [n for n in names if n != pkl] + [pkl]
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_STORED) as zout:
        for n in order:
            info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            zout.writestr(info, zin.read(n))
    assert zipfile.ZipFile(dst).namelist()[-1] == pkl


def same_tensors(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape \
            and a.stride() == b.stride() and raw_bytes(a) == raw_bytes(b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b))
    return a == b


def hf_models(out):
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    from safetensors.torch import load_file

    torch.manual_seed(10)
    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    model.save_pretrained(out / "hf-bin-sharded", safe_serialization=False, max_shard_size="20KB")
    model.save_pretrained(out / "hf-bin", safe_serialization=False, max_shard_size="10GB")
    model.save_pretrained(out / "hf-safetensors", safe_serialization=True)
    shards = sorted((out / "hf-bin-sharded").glob("pytorch_model-*.bin"))
    assert len(shards) >= 2, shards
    assert (out / "hf-bin-sharded" / "pytorch_model.bin.index.json").is_file()
    merged = {}
    for s in shards:
        merged.update(torch.load(s, weights_only=True))
    single = torch.load(out / "hf-bin" / "pytorch_model.bin", weights_only=True)
    st = load_file(out / "hf-safetensors" / "model.safetensors")
    assert list(merged) == list(single) or sorted(merged) == sorted(single)
    assert sorted(st) == sorted(single), (sorted(st), sorted(single))
    for k in single:
        assert same_tensors(merged[k], single[k]) and torch.equal(st[k], single[k]), k
    idx = json.loads((out / "hf-bin-sharded" / "pytorch_model.bin.index.json").read_text())
    assert sorted(idx["weight_map"]) == sorted(single)
    return transformers.__version__, [s.name for s in shards]


def main():
    out = Path(sys.argv[1])
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    files = collections.OrderedDict()

    def add(name, obj, writer=save, **kw):
        p = out / name
        writer(obj, p, **kw)
        back = torch.load(p, weights_only=False)
        assert same_tensors(obj, back), name
        files[name] = None

    add("basic.pt", basic_dict())
    add("basic-legacy.pt", basic_dict(), _use_new_zipfile_serialization=False)
    zip_dtypes, zip_refused = all_dtype_tensors(legacy=False)
    legacy_dtypes, legacy_refused = all_dtype_tensors(legacy=True)
    add("all-dtypes.pt", zip_dtypes, writer=save_via_buffer)
    add("all-dtypes-legacy.pt", legacy_dtypes, _use_new_zipfile_serialization=False)
    add("protocol4.pt", basic_dict(), pickle_protocol=4)
    add("protocol5.pt", basic_dict(), pickle_protocol=5)
    add("tied.pt", tied_dict())
    add("views.pt", views_dict())
    add("views-legacy.pt", views_dict(), _use_new_zipfile_serialization=False)
    lightning_version = lightning_real(out / "lightning.ckpt")
    files["lightning.ckpt"] = None
    add("lightning-shape.pt", lightning_shape())
    add("model-wrapped.pt", {"model": tied_dict(), "epoch": 7})
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "data-pkl-last.pt"  # torch names the archive folder "data-pkl-last"
        save(basic_dict(), src)
        rewrite_data_pkl_last(src, out / "data-pkl-last.zip.pt")
    assert same_tensors(basic_dict(), torch.load(out / "data-pkl-last.zip.pt", weights_only=True))
    files["data-pkl-last.zip.pt"] = None
    add("empty.pt", {})
    add("scalars.pt", scalars_dict())
    g = gen(11)
    add("tensor-only.pt", torch.randn(2, 3, generator=g))
    add("parameter.pt", parameter_dict())
    add("state-dict-metadata.pt", metadata_state_dict())
    add("quantized.pt", {"q": torch.quantize_per_tensor(torch.linspace(-1, 1, 6), 0.05, 3, torch.qint8)})

    transformers_version, shards = hf_models(out)
    for d in ["hf-bin-sharded", "hf-bin"]:
        for p in sorted((out / d).glob("*.bin")):
            files[f"{d}/{p.name}"] = None

    # malicious
    (out / "malicious-os-system.pt").write_bytes(pickle.dumps(SystemPayload(), protocol=2))
    save_via_buffer({"weight": torch.ones(2), "config": SystemPayload()}, out / "malicious-os-system-zip.pt")
    (out / "malicious-eval.pt").write_bytes(pickle.dumps(EvalPayload(), protocol=2))
    (out / "malicious-eval-p4.pt").write_bytes(pickle.dumps(EvalPayload(), protocol=4))
    (out / "malicious-popen.pt").write_bytes(pickle.dumps(PopenPayload(), protocol=4))
    malicious = {}
    for name in ["malicious-os-system.pt", "malicious-os-system-zip.pt", "malicious-eval.pt",
                 "malicious-eval-p4.pt", "malicious-popen.pt"]:
        p = out / name
        check_payload_fires(p)
        try:
            torch.load(p, weights_only=True)
            raise AssertionError(f"{name}: weights_only=True accepted it")
        except pickle.UnpicklingError:
            pass
        layout, folder, pkl, _ = read_layout(p)
        globals_ = globals_named(pkl)
        malicious[name] = {"layout": layout, "archive_folder": folder, "pickle_protocol": pickle_protocol(pkl),
                           "globals": globals_, "creates": CANARY}

    manifest = {
        "writer": {"torch": torch.__version__.split("+")[0], "transformers": transformers_version,
                   "pytorch_lightning": lightning_version, "python": sys.version.split()[0]},
        "dtypes_refused": {"zip": zip_refused, "legacy": legacy_refused},
        "files": {},
        "malicious": malicious,
        "hf_layouts": {
            "hf-bin-sharded": {"files": shards + ["pytorch_model.bin.index.json"]},
            "hf-bin": {"files": ["pytorch_model.bin"]},
            "hf-safetensors": {"files": ["model.safetensors"]},
            "same_weights": True,
        },
    }
    for name in files:
        manifest["files"][name] = describe(out / name, out)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {len(list(out.rglob('*')))} paths, {total} bytes, to {out}")


if __name__ == "__main__":
    main()
