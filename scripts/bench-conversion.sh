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
# venv (FIXTURE_PYTHON, default /work/fixture-venv/bin/python: torch, transformers) and the
# llama.cpp tree vendored in the llama-cpp-python sdist (LLAMA_CPP_DIR). Target: <= 3x cat.
# Writes bench-work/conversion.result.json ({work, ours, peer, ratio, target} per GGUF).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${RUNS:-10}"
WORK=bench-work/conversion
FIXTURE_PYTHON="${FIXTURE_PYTHON:-/work/fixture-venv/bin/python}"
LLAMA_CPP_DIR="${LLAMA_CPP_DIR:-/work/dl/llama_cpp_python-0.3.36/vendor/llama.cpp}"
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

python3 - "$WORK" "${results[@]}" <<'PY'
import json, sys
work, files = sys.argv[1], sys.argv[2:]
out = []
for f in files:
    runs = json.load(open(f))["results"]
    cat, ours = (min(r["times"]) for r in runs)
    outtype = f.rsplit("-", 1)[1].split(".")[0]
    out.append({"work": f"diff --values f32 safetensors vs {outtype} GGUF (162M params)",
                "ours": round(ours, 4), "peer": round(cat, 4), "peer_name": "cat both files",
                "ratio": round(ours / cat, 2), "target": "<= 3.0"})
    print(f"{outtype}: ours {ours:.3f} s, cat {cat:.3f} s, ratio {ours / cat:.2f}")
json.dump(out, open("bench-work/conversion.result.json", "w"), indent=1)
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
