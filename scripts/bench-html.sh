#!/usr/bin/env bash
# What the HTML report adds to `diff --values`: the same pair compared with and without
# `--html FILE`, page cache warm, side by side in one hyperfine run, and the report's size.
#
#   scripts/bench-html.sh                 (RUNS=10 by default)
#
# The pair (written with gguf-py's GGUFWriter into bench-work/html/): 700 f32 tensors of
# 64 x 512 — 70 llama-like layers of ten tensors — of which the new file changes two thirds,
# each by its own amount, so that every row of the report's table and every heatmap cell is
# filled. Needs hyperfine and a Python with gguf and numpy (WEIGHT_INSPECT_PYTHON, else
# .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${RUNS:-10}"
WORK=bench-work/html
PYTHON="${WEIGHT_INSPECT_PYTHON:-.venv/bin/python}"
mkdir -p "$WORK"
command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)" >&2; exit 2; }

"$PYTHON" - "$WORK" <<'PY'
import os, sys
import numpy as np
import gguf

work = sys.argv[1]
kinds = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
         "ffn_up", "ffn_down", "ffn_gate_inp"]
for version in ("old", "new"):
    w = gguf.GGUFWriter(os.path.join(work, f"{version}.gguf"), "llama")
    for layer in range(70):
        for k, kind in enumerate(kinds):
            rng = np.random.default_rng(layer * 16 + k)
            data = rng.standard_normal((64, 512)).astype(np.float32)
            if version == "new" and (layer + k) % 3:
                data += np.float32(1e-4 * 10 ** ((layer * 10 + k) / 700 * 4))
            w.add_tensor(f"blk.{layer}.{kind}.weight", data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
PY

cargo build --release --locked -q
BIN="${CARGO_TARGET_DIR:-target}/release/weight-inspect"
A="$WORK/old.gguf"
B="$WORK/new.gguf"
cat "$A" "$B" > /dev/null
hyperfine -N -i -w 2 -r "$RUNS" --export-json "$WORK/hyperfine.json" \
    "$BIN diff --values $A $B" \
    "$BIN diff --values --html $WORK/report.html $A $B"
echo "report: $(wc -c < "$WORK/report.html") bytes; load average: $(cat /proc/loadavg)"
