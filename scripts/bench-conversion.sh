#!/usr/bin/env bash
# Benchmarks the conversion report (`diff --values SOURCE GGUF`) against its limit, reading
# both files (`cat SOURCE GGUF > /dev/null`), page cache warm, side by side in one hyperfine
# run; then peak memory with /usr/bin/time.
#
#   scripts/bench-conversion.sh                 (RUNS=10 by default)
#
# The pair: a random 162M-parameter Llama written by transformers (f32 safetensors, 650 MB)
# and the q8_0 and f16 GGUFs llama.cpp's convert_hf_to_gguf.py makes of it
# (scripts/bench_conversion_gen.py), built once under bench-work/conversion/ with the fixture
# venv (FIXTURE_PYTHON: torch, transformers) and the
# llama.cpp tree vendored in the llama-cpp-python sdist (LLAMA_CPP_DIR). Target: <= 3x cat.
# Records the ratios in bench-work/results/conversion.json (scripts/bench_result.py).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${RUNS:-10}"
WORK=bench-work/conversion
FIXTURE_PYTHON="${FIXTURE_PYTHON:?set FIXTURE_PYTHON to a venv python with scripts/requirements-fixtures.txt}"
LLAMA_CPP_DIR="${LLAMA_CPP_DIR:?set LLAMA_CPP_DIR to the llama.cpp tree of the llama-cpp-python sdist}"
mkdir -p "$WORK"
command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)" >&2; exit 2; }

"$FIXTURE_PYTHON" scripts/bench_conversion_gen.py "$LLAMA_CPP_DIR" "$WORK" q8_0 f16
cargo build --release --locked -q
BIN=target/release/weight-inspect
SRC="$WORK/hf/model.safetensors"

results=()
for outtype in q8_0 f16; do
    GGUF="$WORK/model-$outtype.gguf"
    cat "$SRC" "$GGUF" > /dev/null
    hyperfine -N -i -w 2 -r "$RUNS" --export-json "$WORK/hyperfine-$outtype.json" \
        "cat $SRC $GGUF" \
        "$BIN diff --values $SRC $GGUF"
    /usr/bin/time -f "peak RSS %M KiB, %e s wall, %U s user, %S s sys" \
        "$BIN" diff --values "$SRC" "$GGUF" > "$WORK/report-$outtype.txt" || true
    head -3 "$WORK/report-$outtype.txt"
    results+=("$WORK/hyperfine-$outtype.json")
done

for f in "${results[@]}"; do
    outtype=$(basename "$f" .json); outtype=${outtype#hyperfine-}
    read -r CAT_MIN OURS_MIN < <(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["results"]
print(min(r[0]["times"]), min(r[1]["times"]))' "$f")
    echo "$outtype: ours $OURS_MIN s, cat $CAT_MIN s"
    python3 scripts/bench_result.py add conversion \
        --work "diff --values, f32 safetensors (650 MB) vs its $outtype GGUF made by convert_hf_to_gguf.py" \
        --ours "$OURS_MIN" --peer "$CAT_MIN" --peer-name "cat both files" --max-ratio 3.0
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
