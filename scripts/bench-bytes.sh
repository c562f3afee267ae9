#!/usr/bin/env bash
# Benchmark of `diff`'s byte comparison (docs/PERFORMANCE.md): a generated 1 GiB safetensors
# model and a copy with one byte changed in its last tensor (the worst case for a comparison
# that stops at the first difference: every byte before it is read), and an identical copy,
#   weight-inspect diff A B                  (structure from the headers, then the bytes as cmp)
#   weight-inspect diff --structure-only A B (headers only)
#   cmp A B                                  (the floor: GNU cmp reading both files)
# Whole processes, wall clock, files in the page cache (a warm-up run first). Not a test.
#
# Usage: scripts/bench-bytes.sh [WEIGHT_INSPECT_BINARY] [RUNS]
# Needs hyperfine and Python (WEIGHT_INSPECT_PYTHON or .venv/bin/python; only the standard
# library). Writes bench-work/bytes/ (git-ignored, about 3 GiB).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=$(realpath "${1:-target/release/weight-inspect}")
RUNS=${2:-5}
PY=${WEIGHT_INSPECT_PYTHON:-$PWD/.venv/bin/python}
WORK=$PWD/bench-work/bytes
mkdir -p "$WORK"

# 8 float32 tensors of 32 Mi elements (128 MiB each): a header by the format's rules, data from
# os.urandom (no run of equal bytes that a comparison could skip).
if [ ! -f "$WORK/a.safetensors" ]; then
    "$PY" - "$WORK/a.safetensors" <<'EOF'
import json, os, struct, sys
n = 32 << 20
tensors, offset = {}, 0
for i in range(8):
    tensors[f"layers.{i}.weight"] = {"dtype": "F32", "shape": [8192, 4096],
                                     "data_offsets": [offset, offset + 4 * n]}
    offset += 4 * n
header = json.dumps(tensors).encode()
header += b" " * (-len(header) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header)
    for _ in range(offset // (64 << 20)):
        f.write(os.urandom(64 << 20))
EOF
fi
cp "$WORK/a.safetensors" "$WORK/same.safetensors"
cp "$WORK/a.safetensors" "$WORK/b.safetensors"
# One byte of the last tensor, 4 KiB before the end.
SIZE=$(stat -c %s "$WORK/a.safetensors")
printf '\x7f' | dd of="$WORK/b.safetensors" bs=1 seek=$((SIZE - 4096)) conv=notrunc status=none

A=$WORK/a.safetensors B=$WORK/b.safetensors S=$WORK/same.safetensors
echo "== check the outcomes"
"$BIN" diff "$A" "$B" | tail -1 || true
"$BIN" diff --structure-only "$A" "$B" | tail -1 || true
cmp "$A" "$B" || true

# Exit status 1 (the files differ) is what every command should give here.
hyperfine --warmup 1 --runs "$RUNS" -i --export-json "$WORK/differ.json" \
    -n "diff (bytes)" "$BIN diff $A $B" \
    -n "diff --structure-only" "$BIN diff --structure-only $A $B" \
    -n "cmp" "cmp $A $B"
hyperfine --warmup 1 --runs "$RUNS" -i --export-json "$WORK/identical.json" \
    -n "diff (bytes), identical" "$BIN diff $A $S" \
    -n "diff --structure-only, identical" "$BIN diff --structure-only $A $S" \
    -n "cmp, identical" "cmp $A $S"
