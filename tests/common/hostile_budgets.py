#!/usr/bin/env python3
"""Writes the inputs of tests/hostile_budgets.rs into OUT_DIR, one file per case: pickles that
amplify their size in memory, shared structures reached by many paths, names that forge
workflow commands, broadcast views, zip archives whose members are ambiguous, split-GGUF
parts declaring huge part counts. Standard library, gguf-py and numpy only (no torch): the
torch pickles come from tests/common/hostile_pytorch.py's stand-ins.

    hostile_budgets.py OUT_DIR

Prints the names of the files written, one per line.
"""

import io
import os
import struct
import sys
import warnings
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_pytorch as hp  # noqa: E402  (registers torch's stand-in modules)

import gguf  # noqa: E402
import numpy as np  # noqa: E402

MB = 1_000_000


def short_unicode(text: bytes) -> bytes:
    return b"\x8c" + bytes([len(text)]) + text


def forged_global() -> bytes:
    """STACK_GLOBAL of a name holding CR/LF and a workflow command."""
    return b"\x80\x04" + short_unicode(b"os") + short_unicode(b"system\r\n::error::FORGED") + b"\x93."


def members_zip(members) -> bytes:
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": the point of the case
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            for name, data in members:
                z.writestr(name, data)
    return out.getvalue()


def unlisted_local_entry(real: bytes, benign_pickle: bytes) -> bytes:
    """A local entry for archive/data.pkl that the central directory does not list, in front
    of a real archive whose directory offsets are moved past it."""
    name = b"archive/data.pkl"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, 0,
                        len(benign_pickle), len(benign_pickle), len(name), 0) + name + benign_pickle
    shift = len(local)
    out = bytearray(real)
    for pos, _ in hp.central_entries(real):
        (offset,) = struct.unpack_from("<I", out, pos + 42)
        struct.pack_into("<I", out, pos + 42, offset + shift)
    end = real.rindex(b"PK\x05\x06")
    (start,) = struct.unpack_from("<I", out, end + 16)
    struct.pack_into("<I", out, end + 16, start + shift)
    return local + bytes(out)


def local_sizes(real: bytes) -> bytes:
    """The first member's local header says 8 bytes fewer than the directory: a reader of local
    headers would look for the next member inside this one's data."""
    out = bytearray(real)
    stored, content = struct.unpack_from("<II", out, 18)
    struct.pack_into("<II", out, 18, stored - 8, content - 8)
    return bytes(out)


def huge_heads(gguf_bytes: bytes) -> bytes:
    """llama-f32.gguf with head_count and head_count_kv of 2^63 + 1 (as u64); three u32 keys
    made narrower keep the header's length, so the data stays where it was."""
    data = bytearray(gguf_bytes)

    def retype(data, key, new_type, value):
        k = key.encode()
        pat = struct.pack("<Q", len(k)) + k + struct.pack("<I", 4)
        i = data.index(pat)
        return data[:i] + pat[:-4] + struct.pack("<I", new_type) + value + data[i + len(pat) + 4:]

    def u32(data, key):
        k = key.encode()
        return struct.unpack_from("<I", data, data.index(struct.pack("<Q", len(k)) + k) + 12 + len(k))[0]

    for key in ["llama.attention.head_count", "llama.attention.head_count_kv"]:
        data = retype(data, key, 10, struct.pack("<Q", 2**63 + 1))
    data = retype(data, "general.file_type", 0, bytes([u32(data, "general.file_type")]))
    data = retype(data, "general.quantization_version", 0,
                  bytes([u32(data, "general.quantization_version")]))
    data = retype(data, "tokenizer.ggml.bos_token_id", 2,
                  struct.pack("<H", u32(data, "tokenizer.ggml.bos_token_id")))
    assert len(data) == len(gguf_bytes)
    return bytes(data)


def split_part(path: str, count: int) -> None:
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint16("split.no", 0)
    w.add_uint32("split.count", count)
    w.add_int32("split.tensors.count", 1)
    w.add_tensor("t", np.zeros(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    out_dir = sys.argv[1]
    one = struct.pack("<f", 1.0)
    two = struct.pack("<f", 2.0)
    tensor = lambda key, n, size, stride: hp.Tensor(hp.Storage(key, n), 0, size, stride)  # noqa: E731
    shared_list = list(range(60_000))
    shared_text = "x" * MB
    big_storage = hp.Storage("0", 4)
    state = hp.torch_pickle({"w": tensor("0", 1, (4,), (1,))})
    cases = {
        # 20 MB of one opcode each: EMPTY_DICT, MEMOIZE (of one dict), EMPTY_LIST, NONE.
        "amplify-dict.pt": hp.checkpoint(b"\x80\x02" + b"}" * (20 * MB) + b".", {}),
        "amplify-memo.pt": hp.checkpoint(b"\x80\x04}" + b"\x94" * (20 * MB) + b".", {}),
        "amplify-list.pt": hp.checkpoint(b"\x80\x02" + b"]" * (20 * MB) + b".", {}),
        "amplify-none.pt": hp.checkpoint(b"\x80\x02" + b"N" * (20 * MB) + b".", {}),
        # 20 MB of memo entries: a distinct 6-byte SHORT_BINUNICODE, MEMOIZE'd, popped, over
        # and over; then BINUNICODE8 counts claiming 2^62 and 2^32 - 1 bytes in a small file;
        # then 20 MB of nesting (each EMPTY_LIST a level deeper, closed by APPENDs).
        "hostile-memo-strings.pt": hp.checkpoint(
            b"\x80\x04" + b"".join(b"\x8c\x06" + b"%06x" % i + b"\x940"
                                   for i in range(20 * MB // 10)) + b"}.", {}),
        "hostile-unicode-count.pt": hp.checkpoint(
            b"\x80\x04\x8d" + (1 << 62).to_bytes(8, "little") + b"abc.", {}),
        "hostile-unicode-count32.pt": hp.checkpoint(
            b"\x80\x02X" + (2**32 - 1).to_bytes(4, "little") + b"abc.", {}),
        "hostile-deep.pt": hp.checkpoint(
            b"\x80\x02" + b"]" * (10 * MB) + b"a" * (10 * MB - 1) + b".", {}),
        # One list of 60k integers under 10k keys; one 1 MB string under 3000 keys.
        "shared-list.pt": hp.checkpoint(
            hp.torch_pickle({f"k{i}": shared_list for i in range(10_000)}), {}),
        "shared-text.pt": hp.checkpoint(
            hp.torch_pickle({f"k{i}": shared_text for i in range(3_000)}), {}),
        "forged-global.pt": hp.checkpoint(forged_global(), {}),
        # 100k tensors (of one shared 4-element storage) named as a transformer's: a pickle of
        # about 10 MB, which its budget must leave alone.
        "large-state-dict.pt": hp.checkpoint(
            hp.torch_pickle({f"model.layers.{i // 10}.self_attn.proj_{i % 10}.weight":
                             hp.Tensor(big_storage, 0, (2, 2), (2, 1)) for i in range(100_000)}),
            {"0": one * 4}),
        "command-name.pt": hp.checkpoint(
            hp.torch_pickle({"##[error]X": {"y": tensor("0", 4, (4,), (1,))},
                             "##[error]X.y": tensor("0", 4, (4,), (1,))}),
            {"0": one * 4}),
        # A 1-element storage viewed as [2^20, 2^20] and [2^30, 2^30] with strides 0.
        "broadcast-a.pt": hp.checkpoint(
            hp.torch_pickle({"w": tensor("0", 1, (1 << 20, 1 << 20), (0, 0))}), {"0": one}),
        "broadcast-b.pt": hp.checkpoint(
            hp.torch_pickle({"w": tensor("0", 1, (1 << 20, 1 << 20), (0, 0))}), {"0": two}),
        "broadcast-huge-a.pt": hp.checkpoint(
            hp.torch_pickle({"w": tensor("0", 1, (1 << 30, 1 << 30), (0, 0))}), {"0": one}),
        "broadcast-huge-b.pt": hp.checkpoint(
            hp.torch_pickle({"w": tensor("0", 1, (1 << 30, 1 << 30), (0, 0))}), {"0": two}),
        "duplicate-member.pt": members_zip([
            ("archive/data.pkl", state), ("archive/byteorder", b"little"),
            ("archive/data/0", one * 4), ("archive/data/0", two * 4)]),
        "local-sizes.pt": local_sizes(
            hp.checkpoint(hp.torch_pickle({"w": tensor("0", 4, (4,), (1,))}), {"0": one * 4})),
        "unlisted-entry.pt": unlisted_local_entry(
            hp.checkpoint(hp.torch_pickle({"w": tensor("0", 4, (4,), (1,))}), {"0": one * 4}),
            hp.torch_pickle({"w": tensor("0", 4, (4,), (1,))})),
    }
    # Names that would start a workflow command (a GGUF tensor, a safetensors key), twice.
    name = b"##[error]X\r\n::error::Y"
    record = struct.pack("<Q", len(name)) + name + struct.pack("<IQIQ", 1, 8, 0, 0)
    cases["command-name.gguf"] = b"GGUF" + struct.pack("<IQQ", 3, 2, 0) + record * 2
    entry = '"##[error]X": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}'
    header = ("{" + entry + ", " + entry + "}").encode()
    cases["command-name.safetensors"] = struct.pack("<Q", len(header)) + header + one
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    with open(os.path.join(fixtures, "conversions", "llama-f32.gguf"), "rb") as f:
        cases["huge-heads.gguf"] = huge_heads(f.read())
    for name, data in cases.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        print(name)
    for name, count in [("m-00001-of-99999.gguf", 99_999), ("big-00001-of-999999999.gguf", 999_999_999)]:
        split_part(os.path.join(out_dir, name), count)
        print(name)
    junk_dir = os.path.join(out_dir, "junk")
    os.mkdir(junk_dir)
    with open(os.path.join(junk_dir, "x-00001-of-999999999.gguf"), "wb") as f:
        f.write(b"junk!")
    print("junk/x-00001-of-999999999.gguf")


if __name__ == "__main__":
    main()
