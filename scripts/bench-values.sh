#!/usr/bin/env bash
# Benchmarks `weight-inspect diff --values` on generated model pairs, page cache warm:
#   - a pair of GGUF files (~390 MB each: q4_k, q5_0, q6_k, q8_0 and f32 tensors of random
#     valid blocks; every tensor changed),
#   - a Q4_K_M-like pair (~241 MiB each: q4_k and q6_k as llama.cpp's Q4_K_M lays out a Llama;
#     every block changed, as in a fine-tune quantized again),
#   - a pair of safetensors files (~1.1 GB each: float32 and bfloat16; every value changed),
# against reading the bytes once (`cat A B > /dev/null`) and against the numpy / gguf-py
# reference (scripts/values_reference.py), with wall time and peak resident memory
# (anonymous and file-backed, scripts/peak_rss.py). Also checks that both give the same
# figures, and times the identical case (a file against a copy of itself).
#
#   scripts/bench-values.sh              # writes bench-work/values/ (about 3 GB)
#   GGUF_MB=100 ST_MB=300 scripts/bench-values.sh   # smaller, for a quick run
set -euo pipefail
cd "$(dirname "$0")/.."

WORK="${WORK:-bench-work/values}"
PY="${WEIGHT_INSPECT_PYTHON:-.venv/bin/python}"
GGUF_MB="${GGUF_MB:-300}"
Q4KM_MB="${Q4KM_MB:-253}"
ST_MB="${ST_MB:-1100}"
RUNS="${RUNS:-3}"
mkdir -p "$WORK"
cargo build --release --quiet
WI="${CARGO_TARGET_DIR:-target}/release/weight-inspect"

if [ ! -f "$WORK/b.gguf" ] || [ "$(cat "$WORK/gguf-mb" 2>/dev/null)" != "$GGUF_MB" ]; then
    "$PY" scripts/bench_values_gen.py gguf "$WORK" --mb "$GGUF_MB"
    echo "$GGUF_MB" > "$WORK/gguf-mb"
fi
if [ ! -f "$WORK/b-q4km.gguf" ] || [ "$(cat "$WORK/q4km-mb" 2>/dev/null)" != "$Q4KM_MB" ]; then
    "$PY" scripts/bench_values_gen.py gguf-q4km "$WORK" --mb "$Q4KM_MB"
    echo "$Q4KM_MB" > "$WORK/q4km-mb"
fi
if [ ! -f "$WORK/b.safetensors" ] || [ "$(cat "$WORK/st-mb" 2>/dev/null)" != "$ST_MB" ]; then
    "$PY" scripts/bench_values_gen.py safetensors "$WORK" --mb "$ST_MB"
    echo "$ST_MB" > "$WORK/st-mb"
fi
cp --reflink=auto "$WORK/a.gguf" "$WORK/a-copy.gguf"

# Best of RUNS: "seconds anon_MB file_MB hwm_MB exit".
measure() {
    local best=""
    for _ in $(seq "$RUNS"); do
        local line
        line=$("$PY" scripts/peak_rss.py "$@")
        if [ -z "$best" ] || awk -v a="${line%% *}" -v b="${best%% *}" 'BEGIN{exit !(a<b)}'; then
            best="$line"
        fi
    done
    echo "$best"
}

row() { # label, cat line, ours line, reference line
    local cat_s ours ref
    cat_s=$(echo "$2" | cut -d' ' -f1)
    read -r o_s o_anon o_file o_hwm _ <<< "$3"
    read -r r_s r_anon _ _ _ <<< "$4"
    printf "| %s | %.2f s | %.2f s | %.1fx | %.2f s | %.0fx | %.0f MB | %.0f MB | %.0f MB |\n" \
        "$1" "$cat_s" "$o_s" "$(echo "$o_s / $cat_s" | bc -l)" "$r_s" \
        "$(echo "$r_s / $o_s" | bc -l)" "$o_anon" "$o_file" "$r_anon"
}

echo "| pair | cat A B | diff --values | ratio to cat | reference | reference / ours | peak anon (ours) | peak file-backed (ours) | peak anon (reference) |"
echo "|---|---|---|---|---|---|---|---|---|"
for kind in gguf q4km.gguf safetensors; do
    case "$kind" in
        q4km.gguf) A="$WORK/a-q4km.gguf" B="$WORK/b-q4km.gguf" ;;
        *) A="$WORK/a.$kind" B="$WORK/b.$kind" ;;
    esac
    cat "$A" "$B" > /dev/null
    c=$(measure sh -c "cat '$A' '$B' > /dev/null")
    o=$(measure "$WI" diff --values --json "$A" "$B")
    r=$(RUNS=1 measure "$PY" scripts/values_reference.py "$A" "$B")
    label="$kind $(du -m "$A" | cut -f1) MB x2"
    [ "$kind" = q4km.gguf ] && label="gguf Q4_K_M-like $(du -m "$A" | cut -f1) MiB x2, every block changed"
    row "$label" "$c" "$o" "$r"
    python3 scripts/bench_result.py add values --work "diff --values, $label, page cache warm" \
        --ours "${o%% *}" --peer "${c%% *}" --peer-name "cat A B" --max-ratio 2.0 >&2
    # Same figures as the reference (the test suite checks this on small pairs).
    "$WI" diff --values --json "$A" "$B" > "$WORK/ours.json" || true
    "$PY" scripts/values_reference.py "$A" "$B" > "$WORK/reference.json"
    "$PY" - "$WORK/ours.json" "$WORK/reference.json" <<'PYEOF'
import json, sys
ours = {t["name"]: t for t in json.load(open(sys.argv[1]))["values"]["tensors"]}
ref = json.load(open(sys.argv[2]))
assert set(ours) == set(ref), (set(ours) ^ set(ref))
for name, r in ref.items():
    o = ours[name]
    assert o["changed_elements"] == r["changed_elements"], name
    for key in ("rel_l2", "cosine", "max_abs_diff"):
        a, b = o[key], r[key]
        assert (a is None and b is None) or abs(a - b) <= 1e-9 * max(abs(b), 1e-300), (name, key, a, b)
PYEOF
done
c=$(measure sh -c "cat '$WORK/a.gguf' '$WORK/a-copy.gguf' > /dev/null")
o=$(measure "$WI" diff --values --json "$WORK/a.gguf" "$WORK/a-copy.gguf")
r=$(RUNS=1 measure "$PY" scripts/values_reference.py "$WORK/a.gguf" "$WORK/a-copy.gguf")
row "gguf identical copy" "$c" "$o" "$r"
echo
echo "$(nproc) cores; figures are the best of $RUNS runs (the reference: 1 run); both give the same figures (checked)."
