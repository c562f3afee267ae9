#!/usr/bin/env bash
# Runs the same commands with two builds of weight-inspect and compares every output byte for
# byte (stdout, stderr, exit status, and the files the commands write: HTML pages, JSON,
# SARIF, Markdown summaries). For a change meant to leave every output as it was.
#
#   scripts/compare-outputs.sh BEFORE_BIN AFTER_BIN
#
# The inputs are the fixtures under tests/fixtures, safetensors models written with
# the safetensors package (for `delta`, and 30,000 tensors past the HTML page's caps), and a temporary git repository (for `git diff`,
# `check` and `ci`). Needs git and a Python with numpy and safetensors (WEIGHT_INSPECT_PYTHON,
# else .venv/bin/python). Bounded: well under two minutes. VERBOSE=1 lists each command's
# exit status and output sizes.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BIN AFTER_BIN" >&2; exit 2; }
BEFORE="$(realpath "$1")"
AFTER="$(realpath "$2")"
cd "$(dirname "$0")/.."
ROOT="$PWD"
PYTHON="${WEIGHT_INSPECT_PYTHON:-.venv/bin/python}"
F="$ROOT/tests/fixtures"
C="$F/conversions"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export NO_COLOR=1 GIT_CONFIG_NOSYSTEM=1 HOME="$WORK/home" WEIGHT_INSPECT_CACHE_DIR="$WORK/cache"
mkdir -p "$HOME" "$WORK/bin-before" "$WORK/bin-after"
# One name for both builds: help and completions print it.
cp "$BEFORE" "$WORK/bin-before/weight-inspect"
cp "$AFTER" "$WORK/bin-after/weight-inspect"
BEFORE="$WORK/bin-before/weight-inspect"
AFTER="$WORK/bin-after/weight-inspect"
git config --global user.name compare
git config --global user.email compare@example.invalid
git config --global init.defaultBranch main

# Two fine-tunes of one base, for the delta commands.
"$PYTHON" - "$WORK" <<'PY'
import sys
import numpy as np
from safetensors.numpy import save_file
work = sys.argv[1]
rng = np.random.default_rng(7)
base = {f"layers.{i}.{k}.weight": rng.standard_normal((16, 32)).astype(np.float32)
        for i in range(3) for k in ("q", "k", "v")}
save_file(base, f"{work}/base.safetensors")
tuned = {k: v + np.float32(1e-3) * (i % 2) for i, (k, v) in enumerate(base.items())}
save_file(tuned, f"{work}/tuned.safetensors")
# Past the HTML page's caps (a 5,000-row table, a heatmap up to 20,000 tensors), with ties.
many = {f"blk.{i // 8}.t{i % 8}.weight": np.full((2,), i, dtype=np.float32) for i in range(30_000)}
save_file(many, f"{work}/many-old.safetensors")
save_file({k: v + np.float32(1 + i % 97) for i, (k, v) in enumerate(many.items())},
          f"{work}/many-new.safetensors")
PY
"$BEFORE" delta create --base "$WORK/base.safetensors" -o "$WORK/tuned.wdelta" \
    "$WORK/tuned.safetensors" >/dev/null

# A repository of two commits: a GGUF changed, a safetensors added, a policy committed.
REPO="$WORK/repo"
mkdir -p "$REPO/models"
git -C "$REPO" init -q
cp "$C/llama-f32.gguf" "$REPO/models/llama.gguf"
cp "$F/golden.safetensors" "$REPO/models/golden.safetensors"
cat > "$REPO/.weight-inspect.toml" <<'TOML'
[[rules]]
paths = ["models/*.gguf"]
allowed_dtypes = ["f32", "f16"]
max_parameters = 1000

[[rules]]
paths = ["models/*.safetensors"]
require_lfs = true
TOML
git -C "$REPO" add -A && git -C "$REPO" commit -qm base
cp "$C/llama-q8_0.gguf" "$REPO/models/llama.gguf"
cp "$F/with-metadata.safetensors" "$REPO/models/meta.safetensors"
git -C "$REPO" add -A && git -C "$REPO" commit -qm head

# Each line: a command, run in the repository; OUT/ stands for a directory of written files.
COMMANDS=(
    "inspect $F/golden-types.gguf"
    "inspect --all $F/all-types.gguf"
    "inspect --json $F/all-types.gguf"
    "inspect --json --full-arrays --sort name $F/golden-types.gguf"
    "inspect --shards $F/golden-sharded"
    "inspect $F/pytorch/basic.pt"
    "inspect $F/truncated.gguf"
    "id $F/golden.safetensors"
    "id --json $F/golden-minimal.gguf"
    "id --canonical $F/golden-minimal.gguf"
    "diff $F/v1.gguf $F/v2.gguf"
    "diff --json $F/v1.gguf $F/v2.gguf"
    "diff $F/golden.safetensors $F/with-metadata.safetensors"
    "diff $F/golden.safetensors $F/golden.safetensors"
    "diff --values $C/llama-f32.gguf $C/llama-q8_0.gguf"
    "diff --values --json $C/llama-f32.gguf $C/llama-q8_0.gguf"
    "diff --values --html OUT/values.html $C/llama-f32.gguf $C/llama-q8_0.gguf"
    "diff --values --map none $C/llama/model.safetensors $C/llama-f32.gguf"
    "diff --values $C/llama $C/llama-q4_1.gguf"
    "diff --values $C/llama-q4_1.gguf $C/llama"
    "diff --values --json $C/llama $C/llama-f32-attn_q-not-permuted.gguf"
    "diff --values --html OUT/conversion.html $C/llama $C/llama-q8_0.gguf"
    "diff --values --html OUT/swapped.html $C/llama-q8_0.gguf $C/llama"
    "diff --values --html OUT/mixtral.html $C/mixtral $C/mixtral-q8_0.gguf"
    "diff --values $WORK/base.safetensors $WORK/tuned.safetensors"
    "diff --values --html OUT/many.html $WORK/many-old.safetensors $WORK/many-new.safetensors"
    "inspect $WORK/tuned.wdelta"
    "inspect --json $WORK/tuned.wdelta"
    "id $WORK/tuned.wdelta"
    "delta inspect $WORK/tuned.wdelta"
    "delta inspect --json $WORK/tuned.wdelta"
    "git diff HEAD~1 HEAD"
    "git diff --json HEAD~1 HEAD"
    "git diff --values HEAD~1 HEAD"
    "git diff --json --values HEAD~1 HEAD"
    "check"
    "check --format json"
    "check --format github"
    "check --format sarif"
    "ci --base HEAD~1 --summary -"
    "ci --base HEAD~1 --annotations --json OUT/ci.json --sarif OUT/ci.sarif --html OUT/ci.html --summary OUT/summary.md --outputs OUT/outputs"
    "ci --base HEAD~1 --values --html OUT/new-dir/ci-values.html --summary OUT/summary-values.md"
    "textconv models/llama.gguf"
    "check --help"
    "diff --help"
    "completions zsh"
    "completions fish"
    "completions bash"
)

run() { # BIN DIR COMMAND
    local bin="$1" dir="$2" cmd="$3"
    mkdir -p "$dir/OUT"
    local args="${cmd//OUT\//$dir/OUT/}"
    set +e
    # shellcheck disable=SC2086
    (cd "$REPO" && "$bin" $args >"$dir/stdout" 2>"$dir/stderr")
    echo $? >"$dir/status"
    set -e
}

differ=0
n=0
for cmd in "${COMMANDS[@]}"; do
    n=$((n + 1))
    run "$BEFORE" "$WORK/before/$n" "$cmd"
    run "$AFTER" "$WORK/after/$n" "$cmd"
    # Files written under OUT/ name their own directory nowhere but in the outputs file.
    sed -i "s|$WORK/before/$n|DIR|g" "$WORK/before/$n"/OUT/outputs 2>/dev/null || true
    sed -i "s|$WORK/after/$n|DIR|g" "$WORK/after/$n"/OUT/outputs 2>/dev/null || true
    [ -n "${VERBOSE:-}" ] && echo "exit $(cat "$WORK/before/$n/status"), $(wc -c <"$WORK/before/$n/stdout") bytes out, $(wc -c <"$WORK/before/$n/stderr") err: $cmd"
    for f in status stdout stderr $(cd "$WORK/before/$n" && find OUT -type f | sort); do
        if ! cmp -s "$WORK/before/$n/$f" "$WORK/after/$n/$f"; then
            echo "DIFFERS: $cmd ($f)"
            diff <(head -c 200000 "$WORK/before/$n/$f") <(head -c 200000 "$WORK/after/$n/$f") | head -20 || true
            differ=$((differ + 1))
        fi
    done
    [ "$(cd "$WORK/before/$n" && find OUT -type f | sort)" = "$(cd "$WORK/after/$n" && find OUT -type f | sort)" ] \
        || { echo "DIFFERS: $cmd (files written)"; differ=$((differ + 1)); }
done
echo "$n commands compared: $differ outputs differ"
[ "$differ" -eq 0 ]
