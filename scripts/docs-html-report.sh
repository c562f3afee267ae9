#!/usr/bin/env bash
# Makes the HTML reports and screenshots shown in README.md and docs/values.md from the
# committed llama.cpp conversions (tests/fixtures/conversions):
#   docs/img/html-report-quantized.png    llama256-f16.gguf vs llama256-q4_k_m.gguf
#   docs/img/html-report-finetune.png     llama256/model.safetensors vs a copy with a few
#                                         tensors changed as a fine-tune would (written by the
#                                         safetensors package)
#   docs/img/html-report-conversion.png   llama256/model.safetensors → llama256-q4_k_m.gguf
# Needs chromium and a Python with numpy and safetensors (WEIGHT_INSPECT_PYTHON, else
# .venv/bin/python). Usage: scripts/docs-html-report.sh [BINARY] (default: a release build).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:-}
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin=${CARGO_TARGET_DIR:-target}/release/weight-inspect
fi
python=${WEIGHT_INSPECT_PYTHON:-.venv/bin/python}
fixtures=tests/fixtures/conversions
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A fine-tune of the source model: a rank-4 update of layer 1's attention Q and V (as a merged
# LoRA adapter), small noise on layer 1's MLP down projection and on the output head.
"$python" - "$fixtures/llama256/model.safetensors" "$work/finetuned.safetensors" <<'EOF'
import sys
import numpy as np
from safetensors.numpy import load_file, save_file

tensors = load_file(sys.argv[1])
rng = np.random.default_rng(7)
def lora(w, rank, scale):
    a = rng.standard_normal((w.shape[0], rank)).astype(np.float32)
    b = rng.standard_normal((rank, w.shape[1])).astype(np.float32)
    delta = a @ b
    return w + (scale * np.linalg.norm(w) / np.linalg.norm(delta) * delta).astype(w.dtype)
for name, scale in [("model.layers.1.self_attn.q_proj.weight", 0.05),
                    ("model.layers.1.self_attn.v_proj.weight", 0.08),
                    ("model.layers.0.self_attn.v_proj.weight", 0.004)]:
    tensors[name] = lora(tensors[name].astype(np.float32), 4, scale).astype(tensors[name].dtype)
for name, sigma in [("model.layers.1.mlp.down_proj.weight", 1e-3), ("lm_head.weight", 1e-4)]:
    w = tensors[name]
    noise = rng.standard_normal(w.shape).astype(np.float32) * sigma * np.abs(w).mean()
    tensors[name] = (w.astype(np.float32) + noise).astype(w.dtype)
save_file(tensors, sys.argv[2], metadata={"format": "pt"})
EOF

report() {
    local name=$1 height=$2
    shift 2
    local status=0
    (cd "$work" && "$bin" diff --values --html "$name.html" "$@" >/dev/null) || status=$?
    [ "$status" -le 1 ] || exit "$status"
    chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$work/profile" --hide-scrollbars \
        --screenshot="$work/$name.png" --window-size="1280,$height" \
        "file://$work/$name.html" 2>/dev/null
    cp "$work/$name.png" "docs/img/html-report-$name.png"
    echo "docs/img/html-report-$name.png: $(wc -c <"docs/img/html-report-$name.png") bytes"
}

mkdir -p docs/img
here=$(pwd)
cp "$fixtures/llama256-f16.gguf" "$fixtures/llama256-q4_k_m.gguf" "$work/"
mkdir -p "$work/llama256"
cp "$fixtures/llama256/"* "$work/llama256/"
report quantized 1400 llama256-f16.gguf llama256-q4_k_m.gguf
report finetune 1000 llama256/model.safetensors finetuned.safetensors
report conversion 1250 llama256/model.safetensors llama256-q4_k_m.gguf
cd "$here"
