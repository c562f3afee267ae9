#!/usr/bin/env python3
"""Base / fine-tune pairs made by real gradient steps, for the lossless `.wdelta` tests and
benchmark (scripts/bench-lossless.sh).

Usage (in the fixture venv, scripts/requirements-fixtures.txt; never the test venv):

    fixture-venv/bin/python scripts/make_finetune_pairs.py LLAMA_CPP_DIR OUTDIR [--size tiny|bench] [--scale S]

`--size tiny` (the default) writes the small pairs committed in tests/fixtures/finetune/;
`--size bench` writes larger ones for the benchmark (about 20-90 MB per model, `--scale`
multiplies the width). LLAMA_CPP_DIR is the llama.cpp tree vendored in the llama-cpp-python
sdist (as for scripts/make_conversion_zoo.py). OUTDIR is emptied first; OUTDIR/manifest.json
records what each pair is, the steps and the versions.

No model is downloaded. The base is a model built by transformers from its config class with a
fixed seed (BERT for the safetensors pairs, Llama for the GGUF pairs); the fine-tune is the
base after real AdamW steps (weight decay on, so every trained float changes) on synthetic
token data (a few repeated random "sentences", so the loss falls):

- f32-full:    BertForMaskedLM, every parameter trained, float32 safetensors;
- bf16-full:   the same two models saved in bfloat16 (the float32 weights rounded, as
               `model.to(torch.bfloat16).save_pretrained` does);
- f32-frozen:  only the last encoder layer trained (everything else frozen), float32;
- gguf-f16 and gguf-q8_0: LlamaForCausalLM, every parameter trained, each model converted by
               llama.cpp's convert_hf_to_gguf.py (--outtype f16, q8_0).

Each pair is OUTDIR/PAIR/base.EXT and OUTDIR/PAIR/ft.EXT.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_conversion_fixtures import llama_cpp_python_version, train_spm, vendored_gguf_version  # noqa: E402

CONVERT = """\
import sys
sys.path.insert(0, sys.argv.pop(1))
import convert_hf_to_gguf as c
sys.argv[0] = "convert_hf_to_gguf.py"
c.main()
"""

# Shapes per size. tiny: a few hundred KB for the repository; bench: tens of MB per model.
SIZES = {
    "tiny": dict(hidden=16, layers=2, inter=32, vocab=64, positions=16,
                 llama_hidden=32, llama_inter=64, llama_layers=2,
                 steps=12, batch=4, seq=16),
    "bench": dict(hidden=384, layers=6, inter=1536, vocab=4096, positions=128,
                  llama_hidden=512, llama_inter=1536, llama_layers=6,
                  steps=20, batch=4, seq=32),
}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-8000:])
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}")
    return r.stdout + r.stderr


def token_data(vocab, batch, seq, steps, seed):
    """Synthetic token batches: a few fixed random "sentences", repeated, so the model can learn
    them and the gradients are those of a real loss going down."""
    g = torch.Generator().manual_seed(seed)
    sentences = torch.randint(4, vocab, (8, seq), generator=g)
    for _ in range(steps):
        yield sentences[torch.randint(0, 8, (batch,), generator=g)]


def train(model, batches, lr, masked_lm, vocab, seed):
    """Real AdamW steps (weight decay 0.01 on every trained parameter); returns the losses."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed + 1)
    model.train()
    losses = []
    for ids in batches:
        if masked_lm:
            mask = torch.rand(ids.shape, generator=g) < 0.15
            mask[:, 0] = True
            inputs = ids.masked_fill(mask, 3)
            labels = ids.masked_fill(~mask, -100)
            out = model(input_ids=inputs, labels=labels)
        else:
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(round(out.loss.item(), 4))
    model.eval()
    return losses


def bert(s, seed):
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                     num_attention_heads=4, intermediate_size=s["inter"],
                     max_position_embeddings=s["positions"], hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    torch.manual_seed(seed)
    return BertForMaskedLM(cfg)


def changed_fraction(base, ft, dtype):
    """The share of stored elements whose bits differ between the two models."""
    b, f = base.state_dict(), ft.state_dict()
    changed = total = 0
    for k in b:
        x, y = b[k].to(dtype), f[k].to(dtype)
        if x.is_floating_point():
            x, y = x.view(torch.int16 if dtype == torch.bfloat16 else torch.int32), \
                y.view(torch.int16 if dtype == torch.bfloat16 else torch.int32)
        changed += int((x != y).sum())
        total += x.numel()
    return round(changed / total, 4)


def save_safetensors(model, path, dtype):
    from safetensors.torch import save_file

    # Tied weights (the MLM decoder shares the word embeddings) are saved once, as
    # save_pretrained does.
    seen, tensors = set(), {}
    for name, t in model.state_dict().items():
        key = t.data_ptr()
        if key in seen:
            continue
        seen.add(key)
        tensors[name] = t.detach().to(dtype).contiguous().clone()
    save_file(tensors, str(path), metadata={"format": "pt"})


def safetensors_pairs(out, s, seed, manifest):
    base = bert(s, seed)
    base_state = {k: v.clone() for k, v in base.state_dict().items()}

    full = bert(s, seed)
    full.load_state_dict(base_state)
    losses = train(full, token_data(s["vocab"], s["batch"], s["seq"], s["steps"], seed), 1e-4,
                   True, s["vocab"], seed)

    frozen = bert(s, seed)
    frozen.load_state_dict(base_state)
    last = f"bert.encoder.layer.{s['layers'] - 1}."
    for name, p in frozen.named_parameters():
        p.requires_grad = name.startswith(last)
    losses_frozen = train(frozen, token_data(s["vocab"], s["batch"], s["seq"], s["steps"], seed),
                          1e-4, True, s["vocab"], seed)

    for pair, ft, dtype, trained, lossv in [
        ("f32-full", full, torch.float32, "every parameter", losses),
        ("bf16-full", full, torch.bfloat16, "every parameter", losses),
        ("f32-frozen", frozen, torch.float32, f"{last}* only (the last encoder layer)", losses_frozen),
    ]:
        d = out / pair
        d.mkdir()
        save_safetensors(base, d / "base.safetensors", dtype)
        save_safetensors(ft, d / "ft.safetensors", dtype)
        manifest[pair] = {
            "changed_elements": changed_fraction(base, ft, dtype),
            "model": "BertForMaskedLM", "format": "safetensors", "dtype": str(dtype).split(".")[1],
            "trained": trained, "optimizer": "AdamW lr 1e-4 weight_decay 0.01",
            "steps": s["steps"], "losses": lossv,
        }


def llama_dir(d, s, spm_model, seed, state=None):
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaTokenizer

    d.mkdir()
    (d / "tokenizer.model").write_bytes(spm_model)
    tok = LlamaTokenizer(vocab_file=str(d / "tokenizer.model"), legacy=False)
    tok.save_pretrained(d)
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=s["llama_hidden"],
                      intermediate_size=s["llama_inter"], num_hidden_layers=s["llama_layers"],
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      rms_norm_eps=1e-5, tie_word_embeddings=False,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    if state is not None:
        model.load_state_dict(state)
    return model, tok.vocab_size


def gguf_pairs(llama_cpp, out, s, seed, manifest):
    spm_model = train_spm("unigram", 96)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base, vocab = llama_dir(tmp / "base", s, spm_model, seed)
        base.save_pretrained(tmp / "base", safe_serialization=True)
        ft, _ = llama_dir(tmp / "ft", s, spm_model, seed, base.state_dict())
        losses = train(ft, token_data(vocab, s["batch"], s["seq"], s["steps"], seed), 1e-4, False,
                       vocab, seed)
        ft.save_pretrained(tmp / "ft", safe_serialization=True)
        for outtype in ["f16", "q8_0"]:
            d = out / f"gguf-{outtype}"
            d.mkdir()
            for which in ["base", "ft"]:
                run([sys.executable, "-c", CONVERT, str(llama_cpp), which, "--outfile",
                     str(d / f"{which}.gguf"), "--outtype", outtype], cwd=tmp)
            manifest[f"gguf-{outtype}"] = {
                "model": "LlamaForCausalLM", "format": "gguf", "dtype": outtype,
                "trained": "every parameter", "optimizer": "AdamW lr 1e-4 weight_decay 0.01",
                "steps": s["steps"], "losses": losses,
                "command": ["python", "$LLAMA_CPP_DIR/convert_hf_to_gguf.py", "{base,ft}",
                            "--outfile", "{base,ft}.gguf", "--outtype", outtype],
            }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("llama_cpp", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiplies the hidden and intermediate widths (rounded to 16, 32 for Llama)")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--only", default="", help="comma-separated: safetensors,gguf")
    a = ap.parse_args()
    llama_cpp, out = a.llama_cpp.resolve(), a.out.resolve()
    assert (llama_cpp / "convert_hf_to_gguf.py").is_file(), llama_cpp
    s = dict(SIZES[a.size])
    # Llama widths stay multiples of 32 (q8_0 blocks); BERT's of 16 (4 heads).
    for k, unit in [("hidden", 16), ("inter", 16), ("llama_hidden", 32), ("llama_inter", 32)]:
        s[k] = max(unit, int(round(s[k] * a.scale / unit)) * unit)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    torch.use_deterministic_algorithms(True)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    manifest = {}
    only = set(filter(None, a.only.split(","))) or {"safetensors", "gguf"}
    if "safetensors" in only:
        safetensors_pairs(out, s, a.seed, manifest)
    if "gguf" in only:
        gguf_pairs(llama_cpp, out, s, a.seed, manifest)
    import safetensors
    import transformers

    (out / "manifest.json").write_text(json.dumps({
        "generator": "scripts/make_finetune_pairs.py",
        "args": {"size": a.size, "scale": a.scale, "seed": a.seed},
        "shapes": s,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "safetensors": safetensors.__version__,
                     "llama_cpp_python": llama_cpp_python_version(llama_cpp),
                     "gguf_py_vendored": vendored_gguf_version(llama_cpp)},
        "pairs": manifest,
    }, indent=1) + "\n")
    for p in sorted(out.rglob("*.*")):
        if p.is_file():
            print(f"{p.relative_to(out)}\t{p.stat().st_size}")


if __name__ == "__main__":
    main()
