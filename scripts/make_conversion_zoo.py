#!/usr/bin/env python3
"""The conversion zoo: one tiny random model per architecture family llama.cpp converts, written
by transformers from its config class, and the GGUF files the pinned convert_hf_to_gguf.py makes
of it (f32, f16, q8_0), plus deliberately corrupted copies of some f32 conversions.

Usage (in the fixture venv, scripts/requirements-fixtures.txt; never the test venv):

    fixture-venv/bin/python scripts/make_conversion_zoo.py LLAMA_CPP_DIR tests/fixtures/conversions/zoo

LLAMA_CPP_DIR is the llama.cpp tree vendored in the llama-cpp-python sdist (as for
scripts/make_conversion_fixtures.py). OUTDIR is emptied first; OUTDIR/manifest.json records the
versions, each command, the converter's tensor log and what each corrupted file holds.

Every model: 2 layers, hidden 32, 4 attention heads (2 kv heads where the config has them), every parameter
drawn at random from a fixed seed (norm weights near 1, or near 0 where the model adds 1
itself, as Gemma does), float32 safetensors.

Tokenizers: the tensors are what is checked. Architectures whose converter reads a
sentencepiece model get one trained here on a few lines of text (vocab 96); the others get a
BPE tokenizer.json trained here with the tokenizers package (vocab 96). The converter
recognizes a BPE tokenizer by the hash of its output on a test text; ours is unknown to it,
so the conversion runs with `TextModel.get_vocab_base_pre` answering "gpt-2" (the vocabulary
step only; every tensor goes through the converter untouched). The command in the manifest
says so.

Corruptions (gguf-py's GGUFWriter copies the good f32 conversion, every KV and tensor, with one
tensor replaced): see CORRUPTIONS below.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_conversion_fixtures import TEXT, llama_cpp_python_version, train_spm, vendored_gguf_version  # noqa: E402

CONVERT = """\
import sys
sys.path.insert(0, sys.argv.pop(1))
import convert_hf_to_gguf as c
if sys.argv.pop(1) == "tiny-bpe":
    import conversion.base
    conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.argv[0] = "convert_hf_to_gguf.py"
c.main()
"""


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-8000:])
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}")
    return r.stdout + r.stderr


def randomize(model, seed, norm_center=1.0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() or "ln" in name.split(".")[-2]:
                center = norm_center if name.endswith("weight") else 0.0
                p.copy_(center + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
    return model


def spm_tokenizer(d, spm_model, cls):
    (d / "tokenizer.model").write_bytes(spm_model)
    tok = cls(vocab_file=str(d / "tokenizer.model"))
    tok.save_pretrained(d)
    return tok


def bpe_tokenizer(d):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.decoder = decoders.BPEDecoder()
    trainer = trainers.BpeTrainer(vocab_size=96, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    tk.train_from_iterator(TEXT.splitlines(), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    tok.save_pretrained(d)
    return tok


def common(tok, **kw):
    kw.update(vocab_size=len(tok), num_hidden_layers=2, bos_token_id=tok.bos_token_id,
              eos_token_id=tok.eos_token_id)
    return kw


# name: (transformers config, model class, tokenizer "spm" / "bpe", config kwargs, norm center)
def zoo():
    import transformers as t

    llama_tok = t.LlamaTokenizer
    gemma_tok = t.GemmaTokenizer
    return {
        "mistral": (t.MistralConfig, t.MistralForCausalLM, ("spm", llama_tok), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=128, tie_word_embeddings=False, rope_theta=1e6), 1.0),
        "qwen2": (t.Qwen2Config, t.Qwen2ForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=128, tie_word_embeddings=False), 1.0),
        "qwen3": (t.Qwen3Config, t.Qwen3ForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, max_position_embeddings=128, tie_word_embeddings=False), 1.0),
        "qwen2_moe": (t.Qwen2MoeConfig, t.Qwen2MoeForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
            shared_expert_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
            tie_word_embeddings=False), 1.0),
        "gemma": (t.GemmaConfig, t.GemmaForCausalLM, ("spm", gemma_tok), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, max_position_embeddings=128), 0.0),
        "gemma2": (t.Gemma2Config, t.Gemma2ForCausalLM, ("spm", gemma_tok), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, max_position_embeddings=128, sliding_window=64), 0.0),
        "gemma3": (t.Gemma3TextConfig, t.Gemma3ForCausalLM, ("spm", gemma_tok), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, max_position_embeddings=128, sliding_window=64), 0.0),
        "phi3": (t.Phi3Config, t.Phi3ForCausalLM, ("spm", llama_tok), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=4,
            max_position_embeddings=128, original_max_position_embeddings=128,
            tie_word_embeddings=False, pad_token_id=0), 1.0),
        "gpt2": (t.GPT2Config, t.GPT2LMHeadModel, ("bpe", None), dict(
            n_embd=32, n_head=4, n_positions=64, n_ctx=64, n_inner=64), 1.0),
        "starcoder2": (t.Starcoder2Config, t.Starcoder2ForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=128), 1.0),
        "stablelm": (t.StableLmConfig, t.StableLmForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=4,
            max_position_embeddings=128, tie_word_embeddings=False), 1.0),
        "olmo2": (t.Olmo2Config, t.Olmo2ForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=4,
            max_position_embeddings=128, tie_word_embeddings=False), 1.0),
        "falcon": (t.FalconConfig, t.FalconForCausalLM, ("bpe", None), dict(
            hidden_size=32, num_attention_heads=4, num_kv_heads=2, new_decoder_architecture=True,
            parallel_attn=True, bias=False, max_position_embeddings=128), 1.0),
        "bloom": (t.BloomConfig, t.BloomForCausalLM, ("bpe", None), dict(
            hidden_size=32, n_head=4), 1.0),
        "gpt_neox": (t.GPTNeoXConfig, t.GPTNeoXForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4,
            max_position_embeddings=128, tie_word_embeddings=False), 1.0),
        # Added after the first fifteen: a family's seed is its place in this dict.
        "granite": (t.GraniteConfig, t.GraniteForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=128, tie_word_embeddings=False), 1.0),
        "granitemoe": (t.GraniteMoeConfig, t.GraniteMoeForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
            num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=128,
            tie_word_embeddings=False), 1.0),
        "smollm3": (t.SmolLM3Config, t.SmolLM3ForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=128, tie_word_embeddings=False, pad_token_id=0), 1.0),
        # layer 0 dense, layer 1 MoE (experts and the router's e_score_correction_bias)
        "deepseek_v3": (t.DeepseekV3Config, t.DeepseekV3ForCausalLM, ("bpe", None), dict(
            hidden_size=32, intermediate_size=64, moe_intermediate_size=32, num_attention_heads=4,
            num_key_value_heads=4, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
            n_group=1, topk_group=1, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=16,
            qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=8, max_position_embeddings=128,
            tie_word_embeddings=False, rope_scaling=None), 1.0),
    }


def write_source(out, name, spec, spm_model, seed):
    cfg_cls, model_cls, (tok_kind, tok_cls), kw, norm_center = spec
    d = out / name
    d.mkdir()
    tok = spm_tokenizer(d, spm_model, tok_cls) if tok_kind == "spm" else bpe_tokenizer(d)
    kw = common(tok, **kw)
    if name == "gpt2":
        kw.pop("num_hidden_layers")
        kw["n_layer"] = 2
    if name == "bloom":
        kw.pop("num_hidden_layers")
        kw["n_layer"] = 2
    cfg = cfg_cls(**kw)
    torch.manual_seed(seed)
    model = randomize(model_cls(cfg), seed, norm_center).eval()
    model.save_pretrained(d, safe_serialization=True)
    return d, tok_kind


def convert(llama_cpp, out, src, tok_kind, gguf_name, outtype):
    vocab = "tiny-bpe" if tok_kind == "bpe" else "as-is"
    cmd = [sys.executable, "-c", CONVERT, str(llama_cpp), vocab, src.name,
           "--outfile", gguf_name, "--outtype", outtype]
    log = run(cmd, cwd=out)
    lines = [l.split("hf-to-gguf:", 1)[1] for l in log.splitlines() if "hf-to-gguf:" in l and "-->" in l]
    shown = ["python", "$LLAMA_CPP_DIR/convert_hf_to_gguf.py", src.name, "--outfile", gguf_name,
             "--outtype", outtype]
    return {
        "gguf": gguf_name,
        "source": src.name,
        "tool": "convert_hf_to_gguf.py",
        "command": shown,
        "vocab_step": ("TextModel.get_vocab_base_pre answered 'gpt-2' (tiny BPE tokenizer unknown "
                       "to the converter's hash table)") if vocab == "tiny-bpe" else "as is",
        "outtype": outtype,
        "converter_tensor_log": lines,
    }


def rewrite(out, src_gguf, dst_gguf, tensor, make):
    """Copy src_gguf with gguf-py's GGUFWriter, every KV and tensor, `tensor` replaced by
    make(data, tensors) (data in numpy's (reversed ggml) shape, f32)."""
    import gguf

    reader = gguf.GGUFReader(out / src_gguf)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(out / dst_gguf, arch=arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    tensors = {t.name: np.asarray(t.data) for t in reader.tensors}
    replaced = False
    for t in reader.tensors:
        data = tensors[t.name]
        if t.name == tensor:
            assert t.tensor_type == gguf.GGMLQuantizationType.F32
            new = np.ascontiguousarray(make(data, tensors), dtype=np.float32)
            assert new.shape == data.shape and not np.array_equal(new, data), tensor
            data, replaced = new, True
        writer.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=t.tensor_type)
    assert replaced, tensor
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    b = gguf.GGUFReader(out / dst_gguf)
    for x in b.tensors:
        assert np.array_equal(np.asarray(x.data), tensors[x.name]) == (x.name != tensor), x.name


def swap_rows(a, i, j, n):
    a = a.copy()
    a[i * n:(i + 1) * n], a[j * n:(j + 1) * n] = a[j * n:(j + 1) * n].copy(), a[i * n:(i + 1) * n].copy()
    return a


def permute(w, n_head):
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# (source, gguf written, tensor, what it holds, make(data, all tensors))
CORRUPTIONS = [
    ("mistral", "mistral-f32-attn_k-not-permuted.gguf", "blk.1.attn_k.weight",
     "the HF k_proj without the converter's Q/K permutation (GQA: 2 kv heads)",
     lambda d, ts: unpermute(d, 2)),
    ("qwen2", "qwen2-f32-norm-plus-one.gguf", "blk.0.attn_norm.weight",
     "input_layernorm + 1 (qwen2's converter adds nothing)", lambda d, ts: d + 1),
    ("gemma", "gemma-f32-norm-missing-plus-one.gguf", "blk.1.ffn_norm.weight",
     "post_attention_layernorm without the converter's + 1", lambda d, ts: d - 1),
    ("gemma2", "gemma2-f32-norm-plus-two.gguf", "blk.0.attn_norm.weight",
     "input_layernorm + 2 (the converter's + 1 applied twice)", lambda d, ts: d + 1),
    ("phi3", "phi3-f32-attn_output-transposed.gguf", "blk.0.attn_output.weight",
     "o_proj transposed", lambda d, ts: d.T),
    ("qwen3", "qwen3-f32-attn_q-heads-swapped.gguf", "blk.1.attn_q.weight",
     "q_proj with the rows of heads 0 and 2 swapped (head_dim 8)", lambda d, ts: swap_rows(d, 0, 2, 8)),
    ("qwen2_moe", "qwen2_moe-f32-experts-swapped.gguf", "blk.0.ffn_down_exps.weight",
     "experts 1 and 3 of down_proj swapped", lambda d, ts: swap_rows(d, 1, 3, 1)),
    ("qwen2", "qwen2-f32-attn_q-permuted.gguf", "blk.1.attn_q.weight",
     "q_proj with LlamaModel.permute applied (4 heads), which qwen2's converter does not apply",
     lambda d, ts: permute(d, 4)),
    ("granite", "granite-f32-attn_q-not-permuted.gguf", "blk.0.attn_q.weight",
     "the HF q_proj without the converter's Q/K permutation (4 heads)", lambda d, ts: unpermute(d, 4)),
    ("smollm3", "smollm3-f32-attn_k-not-permuted.gguf", "blk.1.attn_k.weight",
     "the HF k_proj without the converter's Q/K permutation (GQA: 2 kv heads)",
     lambda d, ts: unpermute(d, 2)),
    ("granitemoe", "granitemoe-f32-up-experts-swapped.gguf", "blk.1.ffn_up_exps.weight",
     "experts 1 and 3 of the up half of input_linear swapped", lambda d, ts: swap_rows(d, 1, 3, 1)),
    ("deepseek_v3", "deepseek_v3-f32-attn_v_b-from-layer-0.gguf", "blk.1.attn_v_b.weight",
     "layer 0's v_b (blk.0.attn_v_b, cut from its kv_b_proj) in layer 1's place",
     lambda d, ts: ts["blk.0.attn_v_b.weight"]),
    ("starcoder2", "starcoder2-f32-ffn_up-from-layer-0.gguf", "blk.1.ffn_up.weight",
     "layer 0's c_fc (blk.0.ffn_up) in layer 1's place", lambda d, ts: ts["blk.0.ffn_up.weight"]),
]


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    llama_cpp, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    only = set(os.environ.get("ZOO_ONLY", "").split(",")) - {""}
    import gguf  # noqa: F401
    import tokenizers
    import transformers

    assert (llama_cpp / "convert_hf_to_gguf.py").is_file(), llama_cpp
    if out.exists() and not only:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    # ZOO_ONLY=a,b remakes those families and keeps the rest of the manifest.
    previous = json.loads((out / "manifest.json").read_text()) if only and (out / "manifest.json").is_file() else None
    spm_model = train_spm("bpe", 96, unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    sources, conversions, failed = {}, [], {}
    for seed, (name, spec) in enumerate(zoo().items(), start=100):
        if only and name not in only:
            continue
        shutil.rmtree(out / name, ignore_errors=True)
        for f in out.glob(f"{name}-*.gguf"):
            f.unlink()
        try:
            d, tok_kind = write_source(out, name, spec, spm_model, seed)
            for t in ["f32", "f16", "q8_0"]:
                conversions.append(convert(llama_cpp, out, d, tok_kind, f"{name}-{t}.gguf", t))
        except (Exception, SystemExit) as e:  # recorded: the coverage table says why
            failed[name] = str(e)[-400:]
            shutil.rmtree(out / name, ignore_errors=True)
            for f in out.glob(f"{name}-*.gguf"):
                f.unlink()
            conversions = [c for c in conversions if c["source"] != name]
            continue
        sources[name] = {"files": sorted(p.name for p in d.iterdir()), "dtype": "float32",
                         "config_class": spec[0].__name__, "model_class": spec[1].__name__}
    for src, dst, tensor, what, make in CORRUPTIONS:
        if src not in sources:
            continue
        rewrite(out, f"{src}-f32.gguf", dst, tensor, make)
        conversions.append({"gguf": dst, "source": src, "tool": "gguf-py GGUFWriter rewrite (deliberately wrong)",
                            "input_conversion": f"{src}-f32.gguf", "outtype": "f32",
                            "wrong": f"{tensor} holds {what}", "wrong_tensor": tensor})
    lcp = llama_cpp_python_version(llama_cpp)
    for c in conversions:
        c["llama_cpp_python"] = lcp
        import gguf as g
        r = g.GGUFReader(out / c["gguf"])
        c["architecture"] = r.fields["general.architecture"].contents()
        c["tensor_types"] = {t.name: t.tensor_type.name for t in r.tensors}
    if previous:
        for name, src in previous["sources"].items():
            if name not in only:
                sources.setdefault(name, src)
        for name, why in previous.get("not_converted", {}).items():
            if name not in only:
                failed.setdefault(name, why)
        conversions = [c for c in previous["conversions"] if c["source"] not in only] + conversions
    manifest = {
        "writer": {
            "llama_cpp_python": lcp,
            "gguf_py_vendored": vendored_gguf_version(llama_cpp),
            "transformers": transformers.__version__,
            "torch": torch.__version__.split("+")[0],
            "tokenizers": tokenizers.__version__,
            "sentencepiece": __import__("sentencepiece").__version__,
            "commands_run_in": "this directory (sources by their directory name; $LLAMA_CPP_DIR is the vendored llama.cpp)",
        },
        "sources": sources,
        "not_converted": failed,
        "conversions": conversions,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(json.dumps(failed, indent=1))
    print(f"{total} bytes in {out}, {len(sources)} sources, {len(conversions)} GGUF files")


if __name__ == "__main__":
    main()
