#!/usr/bin/env python3
"""Writes src/conversion/converter_table.rs: per GGUF architecture, the class of llama.cpp's
convert_hf_to_gguf.py that converts it, its bases, and what its modify_tensors (its own and
those it reaches through super() or a named base) does to the tensors, read from the
converter's source with `ast` (nothing of llama.cpp or torch is imported).

Usage: gen_conversion_transforms.py [OUTPUT]   (default: print to stdout)

The converter's sources are scripts/vendor/llama-cpp-conversion.tar.xz (conversion/*.py and
gguf-py/gguf/constants.py of the llama.cpp tree vendored in llama-cpp-python 0.3.36, with its
MIT licence), pinned by SHA256 below. The test suite runs this script and compares its output
with the committed file.

What a modify_tensors does is classified from its calls and expressions:
  permute_qk     calls a `permute` method (LlamaModel.permute and its copies), or reaches
                 LlamaModel.modify_tensors with `undo_permute` true
  transpose      `.T`, `.transpose(...)`, `.t()`
  split          torch.split / .split / .chunk / .unbind / tensor slices into several yields
  stack          torch.stack (experts stacked into one tensor)
  concat         torch.cat (fused tensors)
  reshape        .view / .reshape / .flatten / .unflatten / .squeeze / .unsqueeze
  norm_offset    `+ 1` / `- 1` / `+ self.norm_shift` on a tensor
  arithmetic     any other arithmetic on the tensor (scales, exp, log ...): not classified
  rename         names rewritten (str.replace, format_tensor_name, f-strings)
An architecture whose chain holds `arithmetic` is listed with it: the coverage table says its
transform is not classified, never identity.
"""
import ast
import hashlib
import io
import re
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDORED = ROOT / "scripts" / "vendor" / "llama-cpp-conversion.tar.xz"
SHA256 = "96432df5b2eb36ee1ba3f38063049b0b768a0397900061f58cd2794443a9d125"
# Base classes whose modify_tensors only maps names (and drops buffers): the end of a chain.
GENERIC = {"ModelBase", "TextModel", "MmprojModel"}


def sources():
    data = VENDORED.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{VENDORED}: sha256 {digest}, expected {SHA256}")
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.endswith(".py"):
                files[m.name] = tar.extractfile(m).read().decode("utf-8")
    return files


class Cls:
    def __init__(self, node, file):
        self.name = node.name
        self.file = file
        self.bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
        self.arch = None
        self.undo_permute = None
        self.registered = []
        self.modify = None
        for stmt in node.body:
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if getattr(t, "id", "") == "model_arch" and isinstance(stmt.value, ast.Attribute):
                        self.arch = stmt.value.attr
                    if getattr(t, "id", "") == "undo_permute" and isinstance(stmt.value, ast.Constant):
                        self.undo_permute = bool(stmt.value.value)
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "modify_tensors":
                self.modify = stmt
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "register":
                self.registered += [a.value for a in d.args if isinstance(a, ast.Constant)]


def mro(name, table, seen=()):
    """Depth-first, left to right, each class once (close to Python's C3 for this tree)."""
    out = []
    if name in seen or name not in table:
        return out
    out.append(name)
    for b in table[name].bases:
        for c in mro(b, table, seen + (name,)):
            if c not in out:
                out.append(c)
    return out


def nearest(order, table, attr):
    for c in order:
        v = getattr(table[c], attr)
        if v is not None:
            return c, v
    return None, None


def kinds_of(fn):
    """The transform kinds a modify_tensors body shows, and whether it passes the tensor on to
    a base's modify_tensors (super() or a named class): (kinds, [named bases], calls super)."""
    kinds, named, calls_super = set(), [], False
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            owner = node.func.value
            if attr == "modify_tensors":
                if isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "super":
                    calls_super = True
                elif isinstance(owner, ast.Name):
                    named.append(owner.id)
            elif attr == "permute" and (isinstance(owner, ast.Name) and owner.id != "torch"
                                        or getattr(owner, "id", "") == "self"):
                # Model.permute(w, n_head, n_kv) — torch's own .permute(dims) is a transpose
                kinds.add("permute_qk" if len(node.args) >= 2 else "transpose")
            elif attr in ("transpose", "t", "swapaxes", "mT"):
                kinds.add("transpose")
            elif attr in ("split", "chunk", "unbind", "tensor_split"):
                kinds.add("split")
            elif attr == "stack":
                kinds.add("stack")
            elif attr in ("cat", "concat", "concatenate"):
                kinds.add("concat")
            elif attr in ("view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "repeat_interleave"):
                kinds.add("reshape")
            elif attr in ("replace", "format_tensor_name", "removeprefix", "removesuffix"):
                kinds.add("rename")
            elif attr in ("exp", "log", "sqrt", "pow", "mul", "div", "neg", "float", "to", "dequant",
                          "dequantize", "sigmoid", "softmax"):
                if attr not in ("float", "to"):
                    kinds.add("arithmetic")
        elif isinstance(node, ast.Attribute) and node.attr == "T":
            kinds.add("transpose")
        elif isinstance(node, ast.JoinedStr):
            kinds.add("rename")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
            names = {getattr(n, "id", "") for n in ast.walk(node.left)}
            if not any("data" in n or "tensor" in n or n in ("w", "weight") for n in names):
                continue
            right = node.right
            one = isinstance(right, ast.Constant) and right.value in (1, 1.0)
            # `+ self.norm_shift`, or `+ f_shift` holding self.norm_shift(name) (Gemma 3)
            shift = "shift" in (getattr(right, "attr", "") or getattr(right, "id", ""))
            if isinstance(node.op, (ast.Add, ast.Sub)) and (one or shift):
                kinds.add("norm_offset")
            else:
                kinds.add("arithmetic")
    return kinds, named, calls_super


def chain(cls, table):
    """(kinds, classes whose modify_tensors were read) for `cls`: its nearest modify_tensors,
    then each base it passes the tensor on to, down to the generic map."""
    order = mro(cls, table)
    kinds, read = set(), []
    todo = [cls]
    while todo:
        start = todo.pop(0)
        sub = mro(start, table)
        owner = next((c for c in sub if table[c].modify is not None and c not in GENERIC), None)
        if owner is None or owner in read:
            continue
        read.append(owner)
        k, named, calls_super = kinds_of(table[owner].modify)
        kinds |= k
        if owner == "LlamaModel":
            _, undo = nearest(order, table, "undo_permute")
            if not undo:
                kinds.discard("permute_qk")
        if calls_super:
            rest = mro(owner, table)[1:]
            for b in table[owner].bases:
                if b in table and b not in GENERIC:
                    todo.append(b)
            del rest
        for n in named:
            if n in table and n not in GENERIC:
                todo.append(n)
    return sorted(kinds), read


def cite(name, file, bases, kinds, read):
    head = f"conversion/{file} {name}" + (f"({bases[0]})" if bases else "")
    return f"{head}.modify_tensors ({' -> '.join(read) or 'the name map'}): {', '.join(kinds) or 'renames only'}"


def rust_str(s):
    assert "\\" not in s and '"' not in s, s
    return '"' + s + '"'


def main():
    files = sources()
    table = {}
    for path in sorted(files):
        if not path.startswith("conversion/"):
            continue
        tree = ast.parse(files[path])
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                table[node.name] = Cls(node, Path(path).name)
    consts = files["gguf-py/gguf/constants.py"]
    block = consts[consts.index("MODEL_ARCH_NAMES"):]
    block = block[:block.index("}")]
    arch_names = dict(re.findall(r"MODEL_ARCH\.(\w+):\s*\"([^\"]+)\"", block))

    rows = {}
    for name, cls in table.items():
        if not cls.registered:
            continue
        order = mro(name, table)
        if "MmprojModel" in order:
            continue
        _, arch = nearest(order, table, "arch")
        gguf = arch_names.get(arch or "")
        if gguf is None:
            continue
        kinds, read = chain(name, table)
        bases = [c for c in order[1:] if c not in GENERIC]
        rows.setdefault(gguf, []).append((name, cls.file, bases, kinds, read, sorted(cls.registered)))

    out = [
        "// @generated by scripts/gen_conversion_transforms.py from the converter of llama-cpp-python\n"
        "// 0.3.36 (scripts/vendor/llama-cpp-conversion.tar.xz): do not edit.\n"
        "//! Per GGUF architecture, the converter classes that write it and what their\n"
        "//! `modify_tensors` chains do to tensors, read from the converter's source.\n\n",
        "/// One converter class.\n"
        "// The check reads arch, transforms and cite; the rest is for the coverage table\n"
        "// (scripts/gen_conversion_coverage.py) and the reader.\n"
        "#[allow(dead_code)]\n"
        "pub(super) struct Converter {\n"
        "    /// The GGUF architecture (`general.architecture`).\n"
        "    pub arch: &'static str,\n"
        "    /// The class and its file in `conversion/`.\n"
        "    pub class: &'static str,\n"
        "    pub file: &'static str,\n"
        "    /// Its bases, nearest first (the generic ModelBase / TextModel left out).\n"
        "    pub bases: &'static [&'static str],\n"
        "    /// What its modify_tensors chain does: permute_qk, transpose, split, stack, concat,\n"
        "    /// reshape, norm_offset, rename, and arithmetic (not classified).\n"
        "    pub transforms: &'static [&'static str],\n"
        "    /// The classes whose modify_tensors the chain runs, in order.\n"
        "    pub chain: &'static [&'static str],\n"
        "    /// Where the transforms were read, for a report.\n"
        "    pub cite: &'static str,\n"
        "    /// The Hugging Face architectures it is registered for.\n"
        "    pub hf: &'static [&'static str],\n"
        "}\n\n",
    ]
    flat = [(a, *r) for a in sorted(rows) for r in sorted(rows[a])]
    out.append("/// Sorted by architecture, then class.\n")
    out.append(f"pub(super) static CONVERTERS: [Converter; {len(flat)}] = [\n")
    lst = lambda xs: "&[" + ", ".join(rust_str(x) for x in xs) + "]"
    for arch, name, file, bases, kinds, read, hf in flat:
        out.append(
            f"    Converter {{ arch: {rust_str(arch)}, class: {rust_str(name)}, file: {rust_str(file)}, "
            f"bases: {lst(bases)}, transforms: {lst(kinds)}, chain: {lst(read)}, cite: {rust_str(cite(name, file, bases, kinds, read))}, "
            f"hf: {lst(hf)} }},\n"
        )
    out.append("];\n")
    text = "".join(out)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
