#!/usr/bin/env python3
"""Writes hostile and damaged PyTorch checkpoints into OUT_DIR, one file per case, for
tests/pytorch.rs. Standard library only (no torch): pickles name torch's globals through
stand-in modules registered under torch's names, so `pickle` writes exactly the GLOBAL and
persistent-id opcodes `torch.save` writes; zip damage is done by rewriting fields of a real
`torch.save` archive (tests/fixtures/pytorch/basic.pt).

    hostile_pytorch.py BASIC_PT OUT_DIR

Prints the names of the files written, one per line.
"""

import io
import pickle
import struct
import sys
import types
import zipfile
from collections import OrderedDict


def stand_in(module: str, **names) -> None:
    mod = types.ModuleType(module)
    for name, value in names.items():
        value.__module__ = module
        value.__qualname__ = name
        setattr(mod, name, value)
    sys.modules[module] = mod


def _rebuild_tensor_v2(*args):
    raise AssertionError("never called")


class FloatStorage:
    pass


stand_in("torch._utils", _rebuild_tensor_v2=_rebuild_tensor_v2)
stand_in("torch", FloatStorage=FloatStorage)


class Storage:
    def __init__(self, key: str, numel: int):
        self.key, self.numel = key, numel


class Tensor:
    """Pickles as torch.save pickles a dense float32 tensor."""

    def __init__(self, storage: Storage, offset: int, size: tuple, stride: tuple):
        self.args = (storage, offset, size, stride, False, OrderedDict())

    def __reduce__(self):
        return (_rebuild_tensor_v2, self.args)


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", FloatStorage, obj.key, "cpu", obj.numel)
        return None


def checkpoint(pickled: bytes, storages: dict[str, bytes]) -> bytes:
    """A zip archive laid out as torch.save lays it out (stored members, folder "archive")."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickled)
        z.writestr("archive/byteorder", "little")
        for key, data in storages.items():
            z.writestr(f"archive/data/{key}", data)
        z.writestr("archive/version", "3\n")
    return out.getvalue()


def torch_pickle(obj) -> bytes:
    out = io.BytesIO()
    TorchPickler(out, protocol=2).dump(obj)
    return out.getvalue()


def memo_bomb() -> bytes:
    """{"a": L64} where L(i+1) = [Li, Li]: 130 opcodes, 2**64 paths through the graph."""
    ops = bytearray(b"\x80\x02}X\x01\x00\x00\x00a]r\x00\x00\x00\x00")
    for i in range(1, 65):
        previous = struct.pack("<I", i - 1)
        # POP the previous list (the memo keeps it), MARK, it twice, LIST, LONG_BINPUT.
        ops += b"0(j" + previous + b"j" + previous + b"lr" + struct.pack("<I", i)
    ops += b"s."
    return bytes(ops)


def deep(levels: int) -> bytes:
    """{"a": [[[...]]]} nested `levels` deep."""
    return b"\x80\x02}X\x01\x00\x00\x00a" + b"]" * levels + b"a" * (levels - 1) + b"s."


def cycle() -> bytes:
    """{"a": L} where L contains itself."""
    return b"\x80\x02}X\x01\x00\x00\x00a]q\x00h\x00as."


def central_entries(data: bytes):
    """(offset of each central directory entry, its name)."""
    end = data.rindex(b"PK\x05\x06")
    count, _size, start = struct.unpack_from("<HII", data, end + 10)
    pos, entries = start, []
    for _ in range(count):
        assert data[pos:pos + 4] == b"PK\x01\x02"
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, pos + 28)
        entries.append((pos, data[pos + 46:pos + 46 + name_len].decode()))
        pos += 46 + name_len + extra_len + comment_len
    return entries


def with_sizes(data: bytes, member_suffix: str, grow_stored: int, grow_content: int) -> bytes:
    out = bytearray(data)
    for pos, name in central_entries(data):
        if name.endswith(member_suffix):
            stored, content = struct.unpack_from("<II", out, pos + 20)
            struct.pack_into("<II", out, pos + 20, stored + grow_stored, content + grow_content)
            return bytes(out)
    raise SystemExit(f"no member ending in {member_suffix}")


def million_members(data: bytes) -> bytes:
    """The first member of a real checkpoint, then a zip64 end record declaring 2**40 members."""
    first_end = data.index(b"PK\x03\x04", 4)
    head = data[:first_end]
    record = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, 1 << 40, 1 << 40, 0, 0)
    locator = struct.pack("<IIQI", 0x07064B50, 0, len(head), 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return head + record + locator + end


def directory_outside(data: bytes) -> bytes:
    out = bytearray(data)
    end = data.rindex(b"PK\x05\x06")
    struct.pack_into("<I", out, end + 16, len(data) * 4)
    return bytes(out)


def compressed() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", torch_pickle({"w": Tensor(Storage("0", 1 << 20), 0, (1 << 20,), (1,))}))
        z.writestr("archive/byteorder", "little")
        # A deflate bomb: 4 MiB of zeros in a few KiB; never inflated.
        z.writestr("archive/data/0", bytes(4 << 20))
    return out.getvalue()


def main() -> None:
    basic = open(sys.argv[1], "rb").read()
    out_dir = sys.argv[2]
    four = struct.pack("<4f", 1, 2, 3, 4)
    cases = {
        "declared-size.pt": with_sizes(basic, "/data/0", 0, 4),
        "overlap.pt": with_sizes(basic, "/data/0", 64, 64),
        "million-members.pt": million_members(basic),
        "directory-outside.pt": directory_outside(basic),
        "compressed.pt": compressed(),
        "memo-bomb.pt": checkpoint(memo_bomb(), {}),
        "deep.pt": checkpoint(deep(200_000), {}),
        "cycle.pt": checkpoint(cycle(), {}),
        "huge-storage.pt": checkpoint(
            torch_pickle({"w": Tensor(Storage("0", 1 << 62), 0, (4,), (1,))}), {"0": four}
        ),
        "view-past-storage.pt": checkpoint(
            torch_pickle({"w": Tensor(Storage("0", 4), 1, (2, 3), (3, 1))}), {"0": four}
        ),
        "missing-storage.pt": checkpoint(
            torch_pickle({"w": Tensor(Storage("7", 4), 0, (4,), (1,))}), {"0": four}
        ),
        "negative-stride.pt": checkpoint(
            torch_pickle({"w": Tensor(Storage("0", 4), 0, (4,), (-1,))}), {"0": four}
        ),
        "duplicate-name.pt": checkpoint(
            torch_pickle({"a": {"b": Tensor(Storage("0", 4), 0, (4,), (1,))},
                          "a.b": Tensor(Storage("0", 4), 0, (4,), (1,))}),
            {"0": four},
        ),
    }
    for name, data in cases.items():
        with open(f"{out_dir}/{name}", "wb") as f:
            f.write(data)
        print(name)


if __name__ == "__main__":
    main()
