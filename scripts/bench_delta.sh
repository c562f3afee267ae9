#!/usr/bin/env bash
# Benchmarks `weight-inspect delta` against deltatensors 0.2.0 on a generated model pair.
#
#   scripts/bench_delta.sh            # ~494M parameters (Qwen2.5-0.5B shapes), float32
#   SCALE=0.1 scripts/bench_delta.sh  # a tenth of it, for a quick run
#
# Writes into bench-work/ (git-ignored): the pair (2 x 2 GB at scale 1), the deltas, the
# reconstructions, and results.md with wall time and peak RSS of whole processes
# (/usr/bin/time), plus the reconstruction error of each strategy. deltatensors runs through
# its numpy API (save_delta / load_delta + safetensors.numpy): its streaming *_from_paths
# functions need torch, which the test environment does not install. Each command runs once
# after a warm-up read of its inputs, so both sides read from the page cache. Ours runs twice:
# with the base's hash remembered from an earlier run (the cache in $WORK/cache, primed by one
# unmeasured `create`), and with --verify-base, which hashes the base every time.
set -euo pipefail
cd "$(dirname "$0")/.."

SCALE="${SCALE:-1.0}"
WORK="${WORK:-bench-work}"
export WEIGHT_INSPECT_CACHE_DIR="$PWD/$WORK/cache"
PY="${WEIGHT_INSPECT_PYTHON:-.venv/bin/python}"
RUNS="${RUNS:-1}"
mkdir -p "$WORK"
cargo build --release --quiet
WI="${CARGO_TARGET_DIR:-$PWD/target}/release/weight-inspect"
RESULTS="$WORK/results.md"

if [ ! -f "$WORK/base.safetensors" ] || [ "$(cat "$WORK/scale" 2>/dev/null)" != "$SCALE" ]; then
    "$PY" scripts/delta_bench.py gen "$WORK" --scale "$SCALE"
    echo "$SCALE" > "$WORK/scale"
fi
B="$WORK/base.safetensors"
F="$WORK/ft.safetensors"

# numpy with OpenBLAS's own kernel choice (see the environment notes), for the reference only.
REF=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" scripts/delta_bench.py)

# measure LABEL CMD...: appends "LABEL wall_s peak_rss_mb" to $WORK/times, best of $RUNS.
measure() {
    local label="$1"; shift
    local best=""
    for _ in $(seq "$RUNS"); do
        cat "$B" "$F" > /dev/null
        rm -f "$WORK/ours.safetensors" "$WORK/ref.safetensors"
        /usr/bin/time -f "%e %M %U %S" -o "$WORK/time.tmp" "$@" > /dev/null
        read -r wall rss user sys < "$WORK/time.tmp"
        echo "  $label: wall $wall s, user $user s, sys $sys s, peak RSS $(( rss / 1024 )) MB" >&2
        if [ -z "$best" ] || awk "BEGIN{exit !($wall < ${best%% *})}"; then best="$wall $rss"; fi
    done
    echo "$label ${best%% *} $(( ${best##* } / 1024 ))" | tee -a "$WORK/times"
}

: > "$WORK/times"
rm -rf "$WORK"/ours.* "$WORK"/ref.* "$WEIGHT_INSPECT_CACHE_DIR"
# The cache keeps a hash only of files left alone for a second before hashing.
sleep 1.5
"$WI" delta create --base "$B" "$F" -o "$WORK/ours.wdelta" --strategy int4 > /dev/null
measure "ours-create-int4" "$WI" delta create --base "$B" "$F" -o "$WORK/ours.wdelta" --strategy int4
measure "ours-create-int4-verify" "$WI" delta create --verify-base --base "$B" "$F" -o "$WORK/ours.wdelta" --strategy int4
measure "ref-create-int4" "${REF[@]}" ref-create "$B" "$F" "$WORK/ref.wdelta" int4
rm -f "$WORK/ours.safetensors"
measure "ours-apply-int4" "$WI" delta apply --base "$B" "$WORK/ours.wdelta" -o "$WORK/ours.safetensors"
measure "ours-apply-int4-verify" "$WI" delta apply --verify-base --base "$B" "$WORK/ours.wdelta" -o "$WORK/ours.safetensors"
measure "ref-apply-int4" "${REF[@]}" ref-apply "$WORK/ref.wdelta" "$B" "$WORK/ref.safetensors"

# Reconstruction error per strategy (and format version for int4).
: > "$WORK/errors"
for variant in "int4 1" "int4 2" "sparse 1" "quantized 1"; do
    set -- $variant
    wd="$WORK/err-$1-v$2.wdelta"
    "$WI" delta create --base "$B" "$F" -o "$wd" --strategy "$1" --format-version "$2" > /dev/null
    "$WI" delta apply --base "$B" "$wd" -o "$WORK/err.safetensors" --dtype f32 > /dev/null
    size=$(stat -c %s "$wd")
    echo "$1 v$2 $size $("${REF[@]}" error "$B" "$F" "$WORK/err.safetensors")" | tee -a "$WORK/errors"
    rm -f "$WORK/err.safetensors"
done

{
    echo "scale $SCALE, $(nproc) cores, $(date -u +%Y-%m-%d)"
    echo
    echo "| step | weight-inspect | deltatensors 0.2.0 | speed-up | memory ratio |"
    echo "| --- | --- | --- | --- | --- |"
    for step in create-int4 create-int4-verify apply-int4 apply-int4-verify; do
        read -r _ ow orss < <(grep "^ours-$step " "$WORK/times")
        read -r _ rw rrss < <(grep "^ref-${step%-verify} " "$WORK/times")
        awk -v s="$step" -v ow="$ow" -v orss="$orss" -v rw="$rw" -v rrss="$rrss" 'BEGIN {
            printf "| %s | %.2f s, %d MB | %.2f s, %d MB | %.1fx | %.2f |\n", s, ow, orss, rw, rrss, rw / ow, orss / rrss }'
    done
    echo
    echo "| strategy | file bytes | max err / max delta | RMS err / RMS delta |"
    echo "| --- | --- | --- | --- |"
    while read -r strat ver size json; do
        "$PY" - "$strat" "$ver" "$size" "$json" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[4])
m, r = d["max_err_over_max_delta"], d["rms_err_over_rms_delta"]
print(f"| {sys.argv[1]} {sys.argv[2]} | {sys.argv[3]} | {m:.4f} | {r:.4f} |")
PYEOF
    done < "$WORK/errors"
} > "$RESULTS"
cat "$RESULTS"

# The ratios for scripts/bench-all: best wall time against deltatensors, apply's peak RSS
# against its 256 MB bound.
params=$("$PY" -c 'import sys, json
from safetensors import safe_open
with safe_open(sys.argv[1], "np") as f:
    print(sum(int(__import__("numpy").prod(f.get_slice(k).get_shape())) for k in f.keys()))' "$B")
for step in create-int4 create-int4-verify apply-int4 apply-int4-verify; do
    read -r _ ow _ < <(grep "^ours-$step " "$WORK/times")
    read -r _ rw _ < <(grep "^ref-${step%-verify} " "$WORK/times")
    target=0.2
    case "$step" in apply*) target=0.1 ;; esac
    how="base hash remembered"
    case "$step" in *-verify) how="--verify-base: base hashed" ;; esac
    command=${step%-verify}
    python3 scripts/bench_result.py add delta --work "delta ${command%-int4} --strategy int4 ($how), $((params / 1000000))M float32 parameters" \
        --ours "$ow" --peer "$rw" --peer-name "deltatensors 0.2.0 (numpy API)" --max-ratio "$target"
done
read -r _ _ orss < <(grep "^ours-apply-int4 " "$WORK/times")
python3 scripts/bench_result.py add delta --work "delta apply peak RSS, $((params / 1000000))M parameters" \
    --ours "$orss" --peer 256 --peer-name "bound" --max-ratio 1.0 --unit MB
