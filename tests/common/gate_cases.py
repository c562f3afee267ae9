#!/usr/bin/env python3
"""Writes the hostile files of the gate tests (tests/gate_*.rs) into OUT_DIR. Standard library
only: pickles are written opcode by opcode (each checked by pickletools, which raises on a
malformed stream) or by `pickle` itself, zips by `zipfile`. Nothing here is ever unpickled.

    gate_cases.py OUT_DIR CASE...

A CASE is a name below, or `global:MODULE:NAME` (a torch.save-shaped archive whose data.pkl
calls MODULE.NAME, reached by STACK_GLOBAL as pickle's protocol 4 reaches a dotted name).
Prints the names of the files written, one per line.
"""

import io
import os
import pickle
import pickletools
import struct
import sys
import zipfile


def text(s: str) -> bytes:
    """SHORT_BINUNICODE."""
    data = s.encode()
    assert len(data) < 256
    return b"\x8c" + bytes([len(data)]) + data


def checked(data: bytes) -> bytes:
    pickletools.dis(data, out=io.StringIO())  # raises if the opcodes are not valid
    return data


def call_global(module: str, name: str, arg: str = "echo pwned") -> bytes:
    """A protocol-4 pickle of {"payload": MODULE.NAME(ARG)}."""
    return checked(
        b"\x80\x04}"
        + text("payload")
        + text(module)
        + text(name)
        + b"\x93"  # STACK_GLOBAL
        + text(arg)
        + b"\x85R"  # TUPLE1, REDUCE
        + b"s."  # SETITEM, STOP
    )


def tensor_dict_pickle(extra: bytes = b"") -> bytes:
    """torch.save's pickle of {"w": a float32 tensor of 4 elements in storage "0"}, protocol 2,
    with EXTRA (opcodes leaving one key and one value on the stack) set in the dict too."""
    rebuild = b"ctorch._utils\n_rebuild_tensor_v2\n"
    storage = (
        b"(" + text("storage") + b"ctorch\nFloatStorage\n" + text("0") + text("cpu") + b"K\x04tQ"
    )
    tensor = (
        rebuild
        + b"("
        + storage
        + b"K\x00"  # offset
        + b"K\x04\x85"  # size (4,)
        + b"K\x01\x85"  # stride (1,)
        + b"\x89"  # requires_grad False
        + b"ccollections\nOrderedDict\n)R"  # backward hooks
        + b"tR"
    )
    return checked(
        b"\x80\x02ccollections\nOrderedDict\n)R" + text("w") + tensor + b"s" + extra + b"."
    )


def archive(members: list) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in members:
            z.writestr(name, data)
    return out.getvalue()


def torch_archive(pickled: bytes, folder: str = "archive", extra: list = ()) -> bytes:
    return archive(
        [
            (f"{folder}/data.pkl", pickled),
            (f"{folder}/byteorder", b"little"),
            (f"{folder}/data/0", struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)),
            (f"{folder}/version", b"3\n"),
            *extra,
        ]
    )


def benign_pt() -> bytes:
    return torch_archive(tensor_dict_pickle())


def evil_pt() -> bytes:
    """The benign checkpoint with "payload": posix.system("echo pwned") beside its tensor."""
    payload = text("payload") + b"cposix\nsystem\n" + text("echo pwned") + b"\x85R" + b"s"
    return torch_archive(tensor_dict_pickle(payload))


def plain_dict_pkl() -> bytes:
    """pickle.dump of a dict of plain values: no torch framing at all."""
    return pickle.dumps({"lr": 0.001, "epoch": 3, "name": "run-1"}, protocol=4)


def two_streams_pkl() -> bytes:
    """A benign pickle, then one that calls posix.system: pickle.load reads both in turn."""
    return plain_dict_pkl() + call_global("posix", "system")


def broken_evil_pkl() -> bytes:
    """A protocol-0 pickle that reaches builtins.exec and then breaks off: no model, but
    unpickling it runs the exec before the error."""
    return b"cbuiltins\nexec\n(Vprint('pwned')\ntR" + b"\xff\xfe garbage"


def prefix_without_directory() -> bytes:
    """The first 1 MiB of a checkpoint: the benign model's members complete, then a big member
    cut short, and no zip directory (it lies at the end of the whole file)."""
    whole = torch_archive(
        tensor_dict_pickle(), extra=[("archive/zzpadding", bytes(3 * 1024 * 1024))]
    )
    return whole[: 1024 * 1024]


def two_folders_pt() -> bytes:
    """Two models in one archive: a/ clean, b/ whose pickle calls posix.system. The first
    entry is b/'s, so torch reads b/; a/data.pkl comes before b/data.pkl, so a reader taking the
    first data.pkl it meets reads the clean a/."""
    evil = call_global("posix", "system")
    return archive(
        [
            ("b/version", b"3\n"),
            ("a/data.pkl", tensor_dict_pickle()),
            ("a/byteorder", b"little"),
            ("a/data/0", struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)),
            ("a/version", b"3\n"),
            ("b/data.pkl", evil),
            ("b/byteorder", b"little"),
        ]
    )


def pickles_zip() -> bytes:
    """A zip that is no torch.save layout but holds a pickle calling posix.system, beside an
    entry whose name climbs out of the extraction directory."""
    return archive(
        [
            ("model/malicious.pkl", call_global("posix", "system")),
            ("../../evil.txt", b"written outside\n"),
        ]
    )


def omegaconf_ckpt() -> bytes:
    """A Lightning-style checkpoint whose hyper_parameters is an omegaconf DictConfig: each
    node points back at its parent, which pickle's memo makes a cycle. The classes are
    stand-ins registered under omegaconf's names (pickle names them; nothing imports them)."""
    import types

    def stand_in(module: str, name: str):
        sys.modules.setdefault(module.split(".")[0], types.ModuleType(module.split(".")[0]))
        mod = sys.modules.setdefault(module, types.ModuleType(module))
        cls = type(name, (), {})
        cls.__module__ = module
        setattr(mod, name, cls)
        return cls

    dict_config = stand_in("omegaconf.dictconfig", "DictConfig")
    float_node = stand_in("omegaconf.nodes", "FloatNode")
    cfg = dict_config()
    lr = float_node()
    lr.__dict__.update(_val=0.001, _parent=cfg)
    cfg.__dict__.update(_content={"lr": lr}, _parent=None)
    return torch_archive(pickle.dumps({"epoch": 3, "hyper_parameters": cfg}, protocol=2))


def with_flags(flag: int) -> bytes:
    """The archive of a posix.system pickle with general-purpose FLAG set on every member, in
    the local headers and the zip directory (the data stays stored as it was)."""
    data = bytearray(torch_archive(call_global("posix", "system")))
    for signature, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = data.find(signature)
        while i >= 0:
            (flags,) = struct.unpack_from("<H", data, i + at)
            struct.pack_into("<H", data, i + at, flags | flag)
            i = data.find(signature, i + 4)
    return bytes(data)


def renamed_in_directory() -> bytes:
    """The zip directory names data.pkl `archive/data.pkx`; its local header, and so readers
    of local headers, still say `archive/data.pkl` (a posix.system pickle)."""
    data = bytearray(torch_archive(call_global("posix", "system")))
    at = data.find(b"archive/data.pkl", data.find(b"PK\x01\x02"))
    data[at : at + 16] = b"archive/data.pkx"
    return bytes(data)


CASES = {
    "flag-1.pt": lambda: with_flags(0x1),
    "flag-20.pt": lambda: with_flags(0x20),
    "flag-40.pt": lambda: with_flags(0x40),
    "renamed.pt": renamed_in_directory,
    "omegaconf.ckpt": omegaconf_ckpt,
    "pickles.zip": pickles_zip,
    "benign.pt": benign_pt,
    "evil.pt": evil_pt,
    "plain-dict.pkl": plain_dict_pkl,
    "two-streams.pkl": two_streams_pkl,
    "broken-evil.pkl": broken_evil_pkl,
    "prefix-1mib.pt": prefix_without_directory,
    "two-folders.pt": two_folders_pt,
}


def main() -> None:
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for case in sys.argv[2:]:
        if case.startswith("global:"):
            _, module, name = case.split(":")
            file = f"{module}.{name}.pt"
            data = torch_archive(call_global(module, name))
        else:
            file, data = case, CASES[case]()
        with open(os.path.join(out_dir, file), "wb") as f:
            f.write(data)
        print(file)


main()
