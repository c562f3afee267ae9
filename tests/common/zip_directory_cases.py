#!/usr/bin/env python3
"""Writes zip checkpoints whose first bytes and central directory tell different stories, for
tests/remote_zip_directory.rs: each stores 1 MiB of tensor data, so that a header read from
the first bytes (the first window of a remote read) ends before the central directory.

    zip_directory_cases.py OUT_DIR [large]

- good-v1.pt, good-v2.pt: plain checkpoints (zipfile, as torch.save lays them out) whose
  metadata differs;
- hidden.pt: a benign archive/data.pkl local entry that the directory does not list, whose
  local header defers its sizes to a data descriptor (as torch writes members, so a walk of
  local headers stops there), in front of the real archive, whose data.pkl calls posix.system;
- big-directory.pt: 3000 more one-element storages after the big one, so that the central
  directory (about 200 KB) starts before the last 64 KiB of the file;
- with `large`, only hidden-large.pt: hidden.pt with 20 MiB of tensor data, a model too large
  to be read whole from a git blob (judged from a prefix and the blob's end).
"""

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_pytorch as hp  # noqa: E402

NUMEL = 256 * 1024


class System:
    """Pickles as a call of os.system (posix.system), which torch.load would run."""

    def __reduce__(self):
        return (os.system, ("true",))


def weights(numel: int = NUMEL) -> hp.Tensor:
    return hp.Tensor(hp.Storage("0", numel), 0, (numel,), (1,))


def hide_benign_entry(real: bytes, benign_pickle: bytes) -> bytes:
    """`real` behind a local archive/data.pkl entry (flag 0x08) that its directory does not
    list; the directory's offsets are moved past it."""
    name = b"archive/data.pkl"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x08, 0, 0, 0, 0,
                        len(benign_pickle), len(benign_pickle), len(name), 0) + name + benign_pickle
    local += struct.pack("<IIII", 0x08074B50, 0, len(benign_pickle), len(benign_pickle))
    shift = len(local)
    out = bytearray(real)
    for pos, _ in hp.central_entries(real):
        (offset,) = struct.unpack_from("<I", out, pos + 42)
        struct.pack_into("<I", out, pos + 42, offset + shift)
    end = real.rindex(b"PK\x05\x06")
    (start,) = struct.unpack_from("<I", out, end + 16)
    struct.pack_into("<I", out, end + 16, start + shift)
    return local + bytes(out)


def main() -> None:
    out_dir = sys.argv[1]
    if sys.argv[2:] == ["large"]:
        numel = 20 * NUMEL
        real = hp.checkpoint(hp.torch_pickle({"w": weights(numel), "x": System()}),
                             {"0": b"\0" * (4 * numel)})
        with open(os.path.join(out_dir, "hidden-large.pt"), "wb") as f:
            f.write(hide_benign_entry(real, hp.torch_pickle({"w": weights(numel)})))
        print("hidden-large.pt")
        return
    data = {"0": b"\0" * (4 * NUMEL)}
    cases = {
        "good-v1.pt": hp.checkpoint(hp.torch_pickle({"w": weights(), "step": 1}), data),
        "good-v2.pt": hp.checkpoint(hp.torch_pickle({"w": weights(), "step": 2}), data),
        "hidden.pt": hide_benign_entry(
            hp.checkpoint(hp.torch_pickle({"w": weights(), "x": System()}), data),
            hp.torch_pickle({"w": weights()})),
        "big-directory.pt": hp.checkpoint(
            hp.torch_pickle({"w": weights(), **{
                f"s{i}": hp.Tensor(hp.Storage(str(i), 1), 0, (1,), (1,)) for i in range(1, 3001)}}),
            {**data, **{str(i): b"\0" * 4 for i in range(1, 3001)}}),
    }
    for name, content in cases.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(content)
        print(name)


if __name__ == "__main__":
    main()
