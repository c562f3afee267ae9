#!/usr/bin/env python3
"""Writes the small example models in examples/ with the reference writers (gguf-py, safetensors).

Run: .venv/bin/python scripts/make_examples.py examples
The weights are zeros: only the structure matters to weight-inspect.
"""
import sys
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import save_file

TEMPLATE_V1 = (
    "{% for message in messages %}\n"
    "<|{{ message['role'] }}|>\n"
    "{{ message['content'] }}\n"
    "{% endfor %}\n"
)
TEMPLATE_V2 = TEMPLATE_V1.replace("{{ message['content'] }}", "{{ message['content'] | trim }}")


def write_gguf(path: Path, quantized: bool, template: str, vocab_extra: int) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama-example")
    w.add_context_length(2048 if not quantized else 4096)
    w.add_embedding_length(256)
    w.add_block_count(2)
    w.add_head_count(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(7 if quantized else 1)
    tokens = ["<unk>", "<s>", "</s>"] + [f"tok{i}" for i in range(509 + vocab_extra)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([float(-i) for i in range(len(tokens))])
    w.add_token_types([1] * len(tokens))
    w.add_chat_template(template)
    n_vocab = len(tokens)
    w.add_tensor("token_embd.weight", np.zeros((n_vocab, 256), dtype=np.float16))
    for layer in range(2):
        w.add_tensor(f"blk.{layer}.attn_norm.weight", np.zeros(256, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            if quantized:
                # q8_0: 34 bytes per block of 32 values, given as raw bytes.
                raw = np.zeros((256, 256 // 32 * 34), dtype=np.uint8)
                w.add_tensor(f"blk.{layer}.{name}.weight", raw,
                             raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            else:
                w.add_tensor(f"blk.{layer}.{name}.weight", np.zeros((256, 256), dtype=np.float16))
    w.add_tensor("output_norm.weight", np.zeros(256, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "examples")
    out.mkdir(parents=True, exist_ok=True)
    write_gguf(out / "tiny-llama-f16.gguf", quantized=False, template=TEMPLATE_V1, vocab_extra=0)
    write_gguf(out / "tiny-llama-q8_0.gguf", quantized=True, template=TEMPLATE_V2, vocab_extra=1)
    base = {
        "embed.weight": np.zeros((64, 32), dtype=np.float32),
        "layer.0.weight": np.zeros((32, 32), dtype=np.float32),
        "layer.0.bias": np.zeros(32, dtype=np.float32),
    }
    save_file(base, str(out / "tiny-base.safetensors"), metadata={"format": "pt"})
    tuned = dict(base)
    tuned["layer.0.weight"] = np.zeros((32, 32), dtype=np.float16)
    del tuned["layer.0.bias"]
    tuned["lora.0.weight"] = np.zeros((8, 32), dtype=np.float32)
    save_file(tuned, str(out / "tiny-tuned.safetensors"), metadata={"format": "pt", "base": "tiny-base"})


if __name__ == "__main__":
    main()
