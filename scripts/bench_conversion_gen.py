#!/usr/bin/env python3
"""Builds the conversion benchmark's pair: a random Llama written by transformers (hidden 1024,
8 layers, 16 heads, 4 KV heads, intermediate 2816, vocab 32000: 162M parameters, f32
model.safetensors, 650 MB) and the GGUF llama.cpp's convert_hf_to_gguf.py makes of it.

Usage (in the fixture venv, scripts/requirements-fixtures.txt: torch, transformers, and the
llama.cpp tree vendored in the llama-cpp-python sdist):

    python scripts/bench_conversion_gen.py LLAMA_CPP_DIR OUTDIR OUTTYPE...

writes OUTDIR/hf/ (config.json, model.safetensors) and OUTDIR/model-OUTTYPE.gguf per OUTTYPE
(f16, q8_0, ...). Fixed seeds; skips what exists.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    llama_cpp, out, outtypes = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    hf = out / "hf"
    if not (hf / "model.safetensors").exists():
        hf.mkdir(parents=True, exist_ok=True)
        cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                          num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                          max_position_embeddings=2048, rms_norm_eps=1e-5,
                          tie_word_embeddings=False)
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg)
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, p in model.named_parameters():
                scale = 0.1 if "norm" in name else 0.02
                base = 1.0 if "norm" in name else 0.0
                p.copy_(base + scale * torch.randn(p.shape, generator=g))
        model.save_pretrained(hf, safe_serialization=True)
    # The converter needs a tokenizer: the conversion fixtures' sentencepiece model (96
    # pieces; the converter pads the vocabulary to vocab_size).
    fixture = Path(__file__).resolve().parent.parent / "tests/fixtures/conversions/llama"
    for name in ("tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"):
        if not (hf / name).exists():
            shutil.copy(fixture / name, hf / name)
    for outtype in outtypes:
        gguf = out / f"model-{outtype}.gguf"
        if gguf.exists():
            continue
        subprocess.run([sys.executable, str(llama_cpp / "convert_hf_to_gguf.py"), str(hf),
                        "--outfile", str(gguf), "--outtype", outtype], check=True)


if __name__ == "__main__":
    main()
