#!/usr/bin/env bash
# Sizes and speed of `delta create --strategy lossless` on generated pairs, side by side with
# `zstd -19 --long` of the XOR of the two files (BitX's baseline) and with `cat` of the inputs.
#
#   scripts/bench-lossless.sh              # pairs of about 32 MB each
#   MB=8 RUNS=2 scripts/bench-lossless.sh  # quicker
#
# The pairs come from scripts/lossless_pair.py: a deterministic small-noise update of random
# weights in numpy (an AdamW-like step: x * (1 - 1e-4) + N(0, 2e-5)), not a real fine-tune
# (torch is not installed here). Real fine-tunes compress differently; see docs/wdelta.md.
# Writes bench-work/lossless/results.md. Bounded: four pairs of MB megabytes, hyperfine RUNS.
set -euo pipefail
cd "$(dirname "$0")/.."

MB="${MB:-32}"
RUNS="${RUNS:-3}"
WORK="${WORK:-bench-work}/lossless"
PY="${WEIGHT_INSPECT_PYTHON:-.venv/bin/python}"
export WEIGHT_INSPECT_CACHE_DIR="$PWD/$WORK/cache"
mkdir -p "$WORK"
cargo build --release --quiet
WI="${CARGO_TARGET_DIR:-$PWD/target}/release/weight-inspect"
RESULTS="$WORK/results.md"

gen() { # DIR ARGS...
    local dir="$WORK/$1"; shift
    [ -f "$dir/.done-$MB" ] && return
    rm -rf "$dir"
    "$PY" scripts/lossless_pair.py "$@" "$dir" --mb "$MB" >/dev/null
    touch "$dir/.done-$MB"
}
gen f32-full bench --dtype float32
gen f32-frozen bench --dtype float32 --frozen 0.9
gen bf16-full bench --dtype bfloat16
gen gguf-q8_0 gguf-q8

xor() { # A B OUT: the XOR of two files, the shorter padded with zeros
    "$PY" - "$1" "$2" "$3" <<'PY'
import sys, numpy as np
a, b = (np.fromfile(p, dtype=np.uint8) for p in sys.argv[1:3])
n = max(len(a), len(b))
a = np.pad(a, (0, n - len(a))); b = np.pad(b, (0, n - len(b)))
(a ^ b).tofile(sys.argv[3])
PY
}

{
    echo "| pair | fine-tune MB | zstd -19 --long of the XOR MB | lossless MB | ratio to fine-tune | create s | cat BASE FT s | create / cat | apply s | cat BASE DELTA s | apply / cat | peak RSS create / apply MB |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} > "$RESULTS"
for pair in f32-full f32-frozen bf16-full gguf-q8_0; do
    dir="$WORK/$pair"
    ext=safetensors; [ "$pair" = gguf-q8_0 ] && ext=gguf
    B="$dir/base.$ext"; F="$dir/ft.$ext"; D="$dir/ft.wdelta"; O="$dir/rebuilt.$ext"
    xor "$B" "$F" "$dir/xor.bin"
    zstd -q -f -19 --long=27 "$dir/xor.bin" -o "$dir/xor.bin.zst"
    "$WI" delta create --strategy lossless --base "$B" "$F" -o "$D" >/dev/null  # remembers the base hash
    "$WI" delta apply --base "$B" "$D" -o "$O" >/dev/null
    cmp "$O" "$F"
    hyperfine --style none --runs "$RUNS" --warmup 1 --export-json "$dir/hf.json" \
        "$WI delta create --strategy lossless --base $B $F -o $D" \
        "cat $B $F > /dev/null" \
        "$WI delta apply --base $B $D -o $O" \
        "cat $B $D > $dir/cat.out" >/dev/null
    rss_create=$(/usr/bin/time -f %M "$WI" delta create --strategy lossless --base "$B" "$F" -o "$D" 2>&1 >/dev/null | tail -1)
    rss_apply=$(/usr/bin/time -f %M "$WI" delta apply --base "$B" "$D" -o "$O" 2>&1 >/dev/null | tail -1)
    "$PY" - "$dir" "$pair" "$F" "$D" "$rss_create" "$rss_apply" >> "$RESULTS" <<'PY'
import json, os, sys
d, pair, ft, delta, rss_c, rss_a = sys.argv[1:]
r = [x["median"] for x in json.load(open(os.path.join(d, "hf.json")))["results"]]
mb = lambda p: os.path.getsize(p) / 1e6
print(f"| {pair} | {mb(ft):.1f} | {mb(os.path.join(d, 'xor.bin.zst')):.2f} | {mb(delta):.2f} | "
      f"{mb(ft) / mb(delta):.2f}x | {r[0]:.3f} | {r[1]:.3f} | {r[0] / r[1]:.2f}x | {r[2]:.3f} | "
      f"{r[3]:.3f} | {r[2] / r[3]:.2f}x | {int(rss_c) // 1024} / {int(rss_a) // 1024} |")
PY
    rm -f "$dir/xor.bin" "$dir/cat.out"
done
cat "$RESULTS"
