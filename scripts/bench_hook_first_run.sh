#!/usr/bin/env bash
# What the first run of each pre-commit hook costs on a developer's machine (docs/policy.md):
#
# - `language: python` (docs/pre-commit-python.yaml): pre-commit makes a virtual environment
#   and pip installs the wheel. The wheel is built here first with `maturin build --release`
#   and installed from a file, standing in for PyPI; measured with pip's cache cold and warm.
# - `language: rust` (.pre-commit-hooks.yaml): pre-commit runs `cargo install --path .` on a
#   copy of this repository, from scratch (its own target directory, as on a fresh machine;
#   the crates are already downloaded).
#
# Each is followed by a second run (the hook environment cached). Usage:
#   scripts/bench_hook_first_run.sh [--python-only]
# Needs the test venv (scripts/test creates it: pre-commit, maturin). Prints seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py="$root/.venv/bin/python"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seconds() { # COMMAND... -> prints elapsed seconds, the command's output to $work/log
    local start end ms
    start=$(date +%s%N)
    "$@" >"$work/log" 2>&1 || true
    end=$(date +%s%N)
    ms=$(((end - start) / 1000000))
    printf '%d.%01d' $((ms / 1000)) $((ms % 1000 / 100))
}

mkdir -p "$work/repo"
cd "$work/repo"
git init -q
git config user.email b@b
git config user.name b
cp "$root/examples/tiny-llama-f16.gguf" model.gguf
printf '[[rules]]\npaths = ["*.gguf"]\nallowed_dtypes = ["f16", "f32"]\n' >.weight-inspect.toml
git add .

echo "building the release wheel (not timed)..."
"$py" -m maturin build --release --out "$work/wheels" -m "$root/Cargo.toml" \
    >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel=$(ls "$work"/wheels/*.whl)
sed "s#weight-inspect==[0-9.]*#$wheel#" "$root/docs/pre-commit-python.yaml" >.pre-commit-config.yaml

export PIP_CACHE_DIR="$work/pip-cache"
export PRE_COMMIT_HOME="$work/home-python"
cold=$(seconds "$py" -m pre_commit run --all-files)
grep -q Passed "$work/log" || { cat "$work/log"; exit 1; }
again=$(seconds "$py" -m pre_commit run --all-files)
rm -rf "$PRE_COMMIT_HOME"
warm=$(seconds "$py" -m pre_commit run --all-files)
echo "language: python  first run ${cold} s (pip cache cold), ${warm} s (warm); second run ${again} s"

if [ "${1:-}" = "--python-only" ]; then
    exit 0
fi
export PRE_COMMIT_HOME="$work/home-rust"
unset CARGO_TARGET_DIR
first=$(seconds "$py" -m pre_commit try-repo "$root" weight-inspect --all-files)
grep -q Passed "$work/log" || { cat "$work/log"; exit 1; }
echo "language: rust    first run ${first} s (try-repo: cargo install --path . from scratch)"
