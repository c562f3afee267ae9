#!/usr/bin/env python3
"""Conversion fixtures: tiny Hugging Face models written by transformers, and the GGUF files that
llama.cpp's own convert_hf_to_gguf.py and llama-quantize make of them.

Usage (in the fixture venv, scripts/requirements-fixtures.txt; never the test venv):

    fixture-venv/bin/python scripts/make_conversion_fixtures.py \\
        LLAMA_CPP_DIR [LLAMA_QUANTIZE] tests/fixtures/conversions

LLAMA_CPP_DIR is the llama.cpp tree vendored in the llama-cpp-python sdist
(llama_cpp_python-X/vendor/llama.cpp, with its gguf-py installed into the venv); its version is
read from the sdist's PKG-INFO and recorded. LLAMA_QUANTIZE is the llama-quantize binary built
from that same tree (cmake -DGGML_NATIVE=OFF, --target llama-quantize); without it the k-quant
and i-quant files are not written. Both may also come from the environment variables
LLAMA_CPP_DIR and LLAMA_QUANTIZE. OUTDIR is emptied first.

Sources (weights from fixed seeds; every parameter, norms included, drawn at random so no two
tensors are equal):
  llama/        LlamaForCausalLM, f32 model.safetensors: hidden 64, 4 heads, 2 kv heads (GQA),
                2 layers, intermediate 128, vocab 96, untied lm_head; tokenizer.model is a
                sentencepiece BPE model trained here on a few lines of text (LlamaTokenizer)
  llama-bin/    the same model as pytorch_model.bin (save_pretrained(safe_serialization=False));
                its safetensors twin is llama/model.safetensors (checked equal)
  llama256/     the same shape with hidden 256 and intermediate 256 (rows a multiple of 256, as
                the k-quants and iq4_xs need), f16 model.safetensors
  mixtral/      MixtralForCausalLM, f32: hidden 64, 4 heads, 2 kv heads, 2 layers, 4 experts
                (2 per token), expert intermediate 64, vocab 96
  xlm-roberta/  XLMRobertaModel (BERT encoder; GGUF architecture "bert"), f32: hidden 32,
                2 heads, 2 layers, intermediate 64, 40 positions; sentencepiece.bpe.model a
                unigram model trained here (XLMRobertaTokenizer)
Conversions (converter = LLAMA_CPP_DIR/convert_hf_to_gguf.py; manifest.json has each command):
  llama-f32.gguf, llama-f16.gguf, llama-q8_0.gguf     converter --outtype f32 / f16 / q8_0
  llama-bin-f32.gguf            converter on llama-bin/ (PyTorch source), --outtype f32
  llama-fused-qkv-f32.gguf      converter --fuse-qkv --outtype f32 (attn_qkv = rows of the
                                permuted q, the permuted k, and v)
  llama-q4_1.gguf, llama-q5_1.gguf, llama-iq4_nl.gguf   llama-quantize of llama-f32.gguf
  llama256-f16.gguf             converter --outtype f16 of the f16 llama256 (no element changes)
  llama256-q4_k_m.gguf, llama256-iq4_xs.gguf   llama-quantize of llama256-f16.gguf
  mixtral-f32.gguf, mixtral-q8_0.gguf   converter (experts stacked into ffn_*_exps)
  xlm-roberta-f32.gguf, xlm-roberta-q8_0.gguf   converter (pooler dropped; position
                                embeddings cut by pad_token_id + 1 rows)
  llama-f32-attn_q-not-permuted.gguf   DELIBERATELY WRONG: llama-f32.gguf copied by gguf-py's
                                GGUFWriter (every KV and tensor) except blk.0.attn_q.weight,
                                written as the HF q_proj as is, without the converter's Q/K
                                head permutation
One model per further architecture family (Gemma, Qwen, Phi-3, GPT-2, Falcon, Bloom, ...) is
made by the sibling scripts/make_conversion_zoo.py into OUTDIR/zoo (run it after this script:
this one empties OUTDIR).
Every conversion is checked with scripts/conversion_reference.py: the f32 conversions change
no element, q8_0/f16 only a little, the wrong file shows a large rel_l2 on blk.0.attn_q.
"""
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

SCRIPTS = Path(__file__).resolve().parent

TEXT = """\
The quick brown fox jumps over the lazy dog.
A small model is enough to test a converter.
Weights are stored as rows of numbers, one tensor after another.
Every layer has attention, a feed forward block and two norms.
The tokenizer splits words into pieces; common pieces get their own id.
Heads share keys and values in grouped query attention.
Experts are chosen by a router; only two of four run for each token.
Numbers near zero, numbers near one, and a few larger ones.
She sells sea shells by the sea shore.
Seven silver swans swam silently seaward.
How much wood would a woodchuck chuck if a woodchuck could chuck wood?
Peter Piper picked a peck of pickled peppers.
Rain in Spain stays mainly in the plain.
Red lorry, yellow lorry, red lorry, yellow lorry.
1 2 3 4 5 6 7 8 9 10, and then 11, 12, 13.
Zebras, quails, jackals and vixens were kept in the zoo.
"""


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}")
    return r.stdout + r.stderr


# --------------------------------------------------------------------------- sources
def train_spm(model_type, vocab_size, **extra):
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXT.splitlines()), model_writer=buf, vocab_size=vocab_size,
        model_type=model_type, character_coverage=1.0, num_threads=1, minloglevel=2,
        normalization_rule_name="identity", **extra)
    return buf.getvalue()


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
    return model


def llama_source(out, name, hidden, inter, dtype, spm_model, seed, bin_twin=None):
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaTokenizer

    d = out / name
    d.mkdir()
    (d / "tokenizer.model").write_bytes(spm_model)
    tok = LlamaTokenizer(vocab_file=str(d / "tokenizer.model"), legacy=False)
    tok.save_pretrained(d)
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=hidden, intermediate_size=inter,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    model = randomize(LlamaForCausalLM(cfg), seed).to(dtype).eval()
    model.save_pretrained(d, safe_serialization=True)
    if bin_twin:
        b = out / bin_twin
        b.mkdir()
        tok.save_pretrained(b)
        model.save_pretrained(b, safe_serialization=False)
        check_twin(d / "model.safetensors", b / "pytorch_model.bin")
    return d


def mixtral_source(out, spm_model, seed):
    from transformers import LlamaTokenizer, MixtralConfig, MixtralForCausalLM

    d = out / "mixtral"
    d.mkdir()
    (d / "tokenizer.model").write_bytes(spm_model)
    tok = LlamaTokenizer(vocab_file=str(d / "tokenizer.model"), legacy=False)
    tok.save_pretrained(d)
    cfg = MixtralConfig(vocab_size=tok.vocab_size, hidden_size=64, intermediate_size=64,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=128,
                        tie_word_embeddings=False, bos_token_id=tok.bos_token_id,
                        eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    model = randomize(MixtralForCausalLM(cfg), seed).eval()
    model.save_pretrained(d, safe_serialization=True)
    return d


def xlmr_source(out, seed):
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    d = out / "xlm-roberta"
    d.mkdir()
    spm_model = train_spm("unigram", 64)
    with tempfile.TemporaryDirectory() as t:
        (Path(t) / "sentencepiece.bpe.model").write_bytes(spm_model)
        tok = XLMRobertaTokenizer(vocab_file=str(Path(t) / "sentencepiece.bpe.model"))
        tok.save_pretrained(d)
    cfg = XLMRobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64, max_position_embeddings=40,
                           type_vocab_size=1, pad_token_id=tok.pad_token_id,
                           bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    model = randomize(XLMRobertaModel(cfg), seed).eval()
    model.save_pretrained(d, safe_serialization=True)
    return d


def check_twin(st_path, bin_path):
    from safetensors.torch import load_file

    a = load_file(st_path)
    b = torch.load(bin_path, weights_only=True)
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k


# --------------------------------------------------------------------------- tools
TENSOR_LINE = re.compile(r"^INFO:hf-to-gguf:(\S+?),\s+torch\.(\w+) --> (\w+), shape = \{(.*)\}$")


def convert(llama_cpp, out, src, gguf_name, outtype, extra=()):
    cmd = [sys.executable, str(llama_cpp / "convert_hf_to_gguf.py"), src.name,
           "--outfile", gguf_name, "--outtype", outtype, *extra]
    log = run(cmd, cwd=out)
    lines = []
    for line in log.splitlines():
        m = TENSOR_LINE.match(line.strip())
        if m:
            lines.append(f"{m[1]}: {m[2]} -> {m[3]} {{{m[4]}}}")
    return {
        "gguf": gguf_name,
        "source": src.name,
        "tool": "convert_hf_to_gguf.py",
        "command": ["python", "$LLAMA_CPP_DIR/convert_hf_to_gguf.py", src.name,
                    "--outfile", gguf_name, "--outtype", outtype, *extra],
        "outtype": outtype,
        "converter_tensor_log": lines,
    }


def quantize(llama_quantize, out, src_gguf, gguf_name, qtype, source_dir, input_from):
    log = run([str(llama_quantize), src_gguf, gguf_name, qtype, "2"], cwd=out)
    assert "quant size" in log, log[-2000:]
    fallbacks = sorted(set(l.strip() for l in log.splitlines() if "fallback" in l))
    return {
        "gguf": gguf_name,
        "source": source_dir,
        "tool": "llama-quantize",
        "command": ["llama-quantize", input_from, gguf_name, qtype, "2"],
        "input_conversion": input_from,
        "outtype": qtype.lower(),
        "quantize_fallbacks": fallbacks,
    }


def rewrite_unpermuted(out, src_gguf, dst_gguf, src_dir, tensor="blk.0.attn_q.weight",
                       hf_name="model.layers.0.self_attn.q_proj.weight"):
    """Copy src_gguf with gguf-py's GGUFWriter, every KV and tensor, but `tensor` replaced by the
    HF weight as is (no Q/K permutation)."""
    import gguf
    from safetensors.numpy import load_file

    reader = gguf.GGUFReader(out / src_gguf)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(out / dst_gguf, arch=arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    hf = load_file(out / src_dir / "model.safetensors")[hf_name]
    replaced = False
    for t in reader.tensors:
        data = np.asarray(t.data)
        if t.name == tensor:
            assert t.tensor_type == gguf.GGMLQuantizationType.F32 and hf.dtype == np.float32
            assert data.shape == hf.shape, (data.shape, hf.shape)
            assert not np.array_equal(data, hf)
            data, replaced = hf, True
        writer.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=t.tensor_type)
    assert replaced
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    # same metadata and tensor list as the original, one tensor's bytes differ
    a, b = gguf.GGUFReader(out / src_gguf), gguf.GGUFReader(out / dst_gguf)
    assert [f for f in a.fields if not f.startswith("GGUF.")] == [f for f in b.fields if not f.startswith("GGUF.")]
    for x, y in zip(a.tensors, b.tensors):
        assert (x.name, x.tensor_type, list(x.shape)) == (y.name, y.tensor_type, list(y.shape))
        assert np.array_equal(np.asarray(x.data), np.asarray(y.data)) == (x.name != tensor)
    return {
        "gguf": dst_gguf,
        "source": src_dir,
        "tool": "gguf-py GGUFWriter rewrite (deliberately wrong)",
        "command": ["(scripts/make_conversion_fixtures.py rewrite_unpermuted)", src_gguf, dst_gguf],
        "input_conversion": src_gguf,
        "outtype": "f32",
        "wrong": f"{tensor} holds {hf_name} without the Q/K head permutation",
    }


def reference(out, src_dir, gguf_name):
    r = run([sys.executable, str(SCRIPTS / "conversion_reference.py"), str(out / src_dir), str(out / gguf_name)])
    return json.loads(r)


def gguf_summary(path):
    import gguf

    reader = gguf.GGUFReader(path)
    return {t.name: t.tensor_type.name for t in reader.tensors}


def llama_cpp_python_version(llama_cpp):
    pkg = llama_cpp.resolve().parent.parent / "PKG-INFO"
    if pkg.is_file():
        for line in pkg.read_text().splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    raise SystemExit(f"{pkg}: not found; LLAMA_CPP_DIR must be llama_cpp_python-X/vendor/llama.cpp")


def vendored_gguf_version(llama_cpp):
    text = (llama_cpp / "gguf-py" / "pyproject.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.M)[1]


# --------------------------------------------------------------------------- main
EXPECTED_DROPPED = {
    "xlm-roberta": ["pooler.dense.bias", "pooler.dense.weight"],
}


def main():
    args = sys.argv[1:]
    if len(args) == 3:
        llama_cpp, llama_quantize, out = Path(args[0]), Path(args[1]), Path(args[2])
    elif len(args) == 2:
        llama_cpp, out = Path(args[0]), Path(args[1])
        llama_quantize = Path(os.environ["LLAMA_QUANTIZE"]) if os.environ.get("LLAMA_QUANTIZE") else None
    elif len(args) == 1 and os.environ.get("LLAMA_CPP_DIR"):
        llama_cpp, out = Path(os.environ["LLAMA_CPP_DIR"]), Path(args[0])
        llama_quantize = Path(os.environ["LLAMA_QUANTIZE"]) if os.environ.get("LLAMA_QUANTIZE") else None
    else:
        raise SystemExit(__doc__)
    llama_cpp = llama_cpp.resolve()
    out = out.resolve()
    import gguf
    import transformers

    assert (llama_cpp / "convert_hf_to_gguf.py").is_file(), llama_cpp
    lcp_version = llama_cpp_python_version(llama_cpp)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    spm_llama = train_spm("bpe", 96, unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    assert spm_llama == train_spm("bpe", 96, unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    llama = llama_source(out, "llama", 64, 128, torch.float32, spm_llama, 20, bin_twin="llama-bin")
    llama256 = llama_source(out, "llama256", 256, 256, torch.float16, spm_llama, 21)
    mixtral = mixtral_source(out, spm_llama, 22)
    xlmr = xlmr_source(out, 23)

    conversions = []
    for t in ["f32", "f16", "q8_0"]:
        conversions.append(convert(llama_cpp, out, llama, f"llama-{t}.gguf", t))
    conversions.append(convert(llama_cpp, out, out / "llama-bin", "llama-bin-f32.gguf", "f32"))
    conversions.append(convert(llama_cpp, out, llama, "llama-fused-qkv-f32.gguf", "f32", ["--fuse-qkv"]))
    for t in ["f32", "q8_0"]:
        conversions.append(convert(llama_cpp, out, mixtral, f"mixtral-{t}.gguf", t))
        conversions.append(convert(llama_cpp, out, xlmr, f"xlm-roberta-{t}.gguf", t))
    conversions.append(rewrite_unpermuted(out, "llama-f32.gguf", "llama-f32-attn_q-not-permuted.gguf", "llama"))
    if llama_quantize:
        for q in ["Q4_1", "Q5_1", "IQ4_NL"]:
            conversions.append(quantize(llama_quantize, out, "llama-f32.gguf", f"llama-{q.lower()}.gguf",
                                        q, "llama", "llama-f32.gguf"))
        conversions.append(convert(llama_cpp, out, llama256, "llama256-f16.gguf", "f16"))
        for q in ["Q4_K_M", "IQ4_XS"]:
            conversions.append(quantize(llama_quantize, out, "llama256-f16.gguf", f"llama256-{q.lower()}.gguf",
                                        q, "llama256", "llama256-f16.gguf"))

    # the .bin source converts to the same tensors as its safetensors twin
    import gguf as g
    ra = {t.name: t for t in g.GGUFReader(out / "llama-f32.gguf").tensors}
    rb = {t.name: t for t in g.GGUFReader(out / "llama-bin-f32.gguf").tensors}
    assert sorted(ra) == sorted(rb)
    for name, x in ra.items():
        assert np.array_equal(np.asarray(x.data), np.asarray(rb[name].data)), name

    for c in conversions:
        c["llama_cpp_python"] = lcp_version
        c["tensor_types"] = gguf_summary(out / c["gguf"])
        # a PyTorch source is compared through its safetensors twin
        c["reference_source"] = "llama" if c["source"] == "llama-bin" else c["source"]
        ref = reference(out, c["reference_source"], c["gguf"])
        c["architecture"] = ref["architecture"]
        c["dropped_source_tensors"] = ref["unpaired_source"]
        c["transforms"] = sorted({p["transform"] for p in ref["pairs"]})
        assert not ref["unpaired_target"], (c["gguf"], ref["unpaired_target"])
        assert ref["unpaired_source"] == EXPECTED_DROPPED.get(c["source"], []), (c["gguf"], ref["unpaired_source"])
        pairs = {p["target"]: p for p in ref["pairs"]}
        exact = c["outtype"] == "f32" or (c["outtype"] == "f16" and c["source"] == "llama256")
        if "wrong" in c:
            bad = pairs["blk.0.attn_q.weight"]
            assert bad["rel_l2"] > 0.5, bad
            assert all(p["changed_elements"] == 0 for n, p in pairs.items() if n != "blk.0.attn_q.weight")
            c["reference_check"] = f"blk.0.attn_q.weight rel_l2 {bad['rel_l2']:.3f}, every other pair unchanged"
        elif exact:
            assert all(p["changed_elements"] == 0 for p in pairs.values()), c["gguf"]
            c["reference_check"] = "every pair has changed_elements 0"
        else:
            worst = max(p["rel_l2"] for p in pairs.values())
            assert worst < 0.2, (c["gguf"], worst)
            c["reference_check"] = f"largest rel_l2 {worst:.4f}"

    manifest = {
        "writer": {
            "llama_cpp_python": lcp_version,
            "gguf_py_vendored": vendored_gguf_version(llama_cpp),
            "transformers": transformers.__version__,
            "torch": torch.__version__.split("+")[0],
            "sentencepiece": __import__("sentencepiece").__version__,
            "llama_quantize": "built from the same vendored llama.cpp" if llama_quantize else None,
            "commands_run_in": "this directory ($LLAMA_CPP_DIR: the vendored llama.cpp)",
        },
        "sources": {
            "llama": {"files": sorted(p.name for p in llama.iterdir()), "dtype": "float32"},
            "llama-bin": {"files": sorted(p.name for p in (out / "llama-bin").iterdir()), "dtype": "float32",
                          "safetensors_twin": "llama/model.safetensors"},
            "llama256": {"files": sorted(p.name for p in llama256.iterdir()), "dtype": "float16"},
            "mixtral": {"files": sorted(p.name for p in mixtral.iterdir()), "dtype": "float32"},
            "xlm-roberta": {"files": sorted(p.name for p in xlmr.iterdir()), "dtype": "float32"},
        },
        "conversions": conversions,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    for p in sorted(out.rglob("*")):
        if p.is_file():
            print(f"{p.stat().st_size:>9}  {p.relative_to(out)}")
    print(f"{total} bytes in {out}")


if __name__ == "__main__":
    main()
