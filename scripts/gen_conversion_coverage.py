#!/usr/bin/env python3
"""The coverage table of docs/values.md: every GGUF architecture the pinned llama.cpp converter
registers, and how weight-inspect's conversion check covers it.

Usage (any Python 3.11; reads source only, imports nothing from llama.cpp):

    python3 scripts/gen_conversion_coverage.py LLAMA_CPP_DIR [--write]

LLAMA_CPP_DIR is the llama.cpp tree vendored in the llama-cpp-python sdist (as for
scripts/make_conversion_fixtures.py). Classes registered with `@ModelBase.register(...)` in
LLAMA_CPP_DIR/conversion/*.py are read with `ast`; a class's `model_arch` is its own or its
nearest base class's; MODEL_ARCH names come from gguf-py/gguf/constants.py. The status of each
architecture:
  checked by a test     a committed conversion of it is compared in tests/conversions.rs
                        (tests/fixtures/conversions/manifest.json and zoo/manifest.json)
  table-driven, untested  gguf-py's name table knows it (src/conversion/names_table.rs); what
                        the converter does to its tensors (src/conversion/converter_table.rs,
                        scripts/gen_conversion_transforms.py) is listed, "not classified" where
                        it does arithmetic the extractor does not name; no fixture yet
  not supported (why)   a multimodal projector (mmproj: not a text model's weights) or an
                        architecture the name table lacks
With --write the table replaces the text between the markers in docs/values.md; without it the
table is printed.
"""
import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- coverage:begin (scripts/gen_conversion_coverage.py) -->"
END = "<!-- coverage:end -->"


def classes(conversion_dir):
    """{class name: (bases, model_arch or None, [registered HF names], file)}"""
    out = {}
    for path in sorted(conversion_dir.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            arch = None
            for stmt in node.body:
                if (isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "model_arch" for t in stmt.targets)
                        and isinstance(stmt.value, ast.Attribute)):
                    arch = stmt.value.attr
            registered = []
            for d in node.decorator_list:
                if (isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "register"):
                    registered += [a.value for a in d.args if isinstance(a, ast.Constant)]
            out[node.name] = (bases, arch, registered, path.name)
    return out


def resolve(name, table, seen=()):
    bases, arch, _, _ = table.get(name, ([], None, [], ""))
    if arch or name in seen:
        return arch, name
    for b in bases:
        a, _ = resolve(b, table, seen + (name,))
        if a:
            return a, name
    return None, name


def is_mmproj(name, table, seen=()):
    if name == "MmprojModel":
        return True
    bases = table.get(name, ([],))[0]
    return any(is_mmproj(b, table, seen + (name,)) for b in bases if b not in seen)


def arch_names(llama_cpp):
    text = (llama_cpp / "gguf-py" / "gguf" / "constants.py").read_text(encoding="utf-8")
    block = text[text.index("MODEL_ARCH_NAMES"):]
    block = block[:block.index("}")]
    return dict(re.findall(r"MODEL_ARCH\.(\w+):\s*\"([^\"]+)\"", block))


def tested_archs():
    archs = set()
    for m in ["tests/fixtures/conversions/manifest.json", "tests/fixtures/conversions/zoo/manifest.json"]:
        p = ROOT / m
        if p.is_file():
            for c in json.loads(p.read_text())["conversions"]:
                archs.add(c["architecture"])
    return archs


def rust_list(path, pattern):
    return set(re.findall(pattern, (ROOT / path).read_text(encoding="utf-8")))


def main():
    args = sys.argv[1:]
    write = "--write" in args
    args = [a for a in args if a != "--write"]
    if len(args) != 1:
        raise SystemExit(__doc__)
    llama_cpp = Path(args[0]).resolve()
    table = classes(llama_cpp / "conversion")
    names = arch_names(llama_cpp)
    name_table = rust_list("src/conversion/names_table.rs", r'\("([a-z0-9_\-]+)", &\["')
    transforms = rust_list("src/conversion/transforms.rs", r'arch: "([a-z0-9_\-]+)"')
    tested = tested_archs()
    # what the converter's modify_tensors chains do (scripts/gen_conversion_transforms.py)
    shown = {}
    for arch, kinds in re.findall(r'Converter \{ arch: "([^"]+)",.*?transforms: &\[([^\]]*)\]',
                                  (ROOT / "src/conversion/converter_table.rs").read_text(encoding="utf-8")):
        shown.setdefault(arch, set()).update(re.findall(r'"([^"]+)"', kinds))

    rows = {}  # gguf arch -> (status, [HF architectures])
    for cls, (_, _, registered, _) in table.items():
        if not registered:
            continue
        arch, _ = resolve(cls, table)
        mmproj = is_mmproj(cls, table)
        gguf_arch = "(mmproj)" if mmproj else names.get(arch or "", f"? {arch}")
        rows.setdefault(gguf_arch, set()).update(registered)

    lines = ["| GGUF architecture | status | Hugging Face architectures |", "| --- | --- | --- |"]
    counts = {}
    for arch in sorted(rows):
        hf = ", ".join(sorted(rows[arch]))
        if arch == "(mmproj)":
            status = "not supported: vision/audio projectors (mmproj), not a text model's weights"
        elif arch in tested:
            status = "checked by a test"
        elif arch in name_table:
            kinds = sorted(shown.get(arch, set()) - {"rename"})
            seen = ", ".join(kinds) if kinds else "renames only"
            if "arithmetic" in kinds:
                status = f"table-driven, untested (not classified: the converter does arithmetic on tensors; it shows {seen})"
            elif arch in transforms:
                status = f"table-driven, untested (name table and transform table; the converter shows {seen}; no tiny model in the zoo yet)"
            else:
                status = f"table-driven, untested (name table; the converter shows {seen}; no tiny model in the zoo yet)"
        else:
            status = "not supported: the generated name table (scripts/gen_tensor_names.py, gguf-py of the test venv) has no entry"
        counts[status.split(" (")[0].split(":")[0]] = counts.get(status.split(" (")[0].split(":")[0], 0) + 1
        lines.append(f"| `{arch}` | {status} | {hf} |")
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    text = "\n".join([BEGIN, f"Architectures the converter registers: {len(rows)} ({summary}).", "",
                      *lines, END])
    if write:
        doc = ROOT / "docs" / "values.md"
        current = doc.read_text(encoding="utf-8")
        if BEGIN in current:
            head, rest = current.split(BEGIN, 1)
            current = head + text + rest.split(END, 1)[1]
        else:
            raise SystemExit(f"{doc}: no {BEGIN} marker")
        doc.write_text(current, encoding="utf-8")
    else:
        print(text)


if __name__ == "__main__":
    main()
