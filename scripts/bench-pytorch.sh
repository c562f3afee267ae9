#!/usr/bin/env bash
# Benchmarks weight-inspect on a ~500 MB PyTorch checkpoint (torch.save's zip layout, written by
# scripts/bench_pytorch_gen.py):
#   - `id`, page cache cold: the bytes the kernel read for it (pages resident afterwards, counted
#     by `fincore`, readahead included) and its time, beside `unzip -l` (which reads the zip
#     directory only) under the same conditions, and both again warm (hyperfine);
#   - `diff --values` of two checkpoints (every value changed), warm, against `cat A B`.
#
#   scripts/bench-pytorch.sh            # writes bench-work/pytorch/ (about 1 GB)
#   LAYERS=4 scripts/bench-pytorch.sh   # a smaller pair, for a quick run
set -euo pipefail
cd "$(dirname "$0")/.."

WORK="${WORK:-bench-work/pytorch}"
PY="${WEIGHT_INSPECT_PYTHON:-$PWD/.venv/bin/python}"
LAYERS="${LAYERS:-14}"
RUNS="${RUNS:-5}"
[ -x "$PY" ] || { echo "no Python venv at $PY: run scripts/test once, or set WEIGHT_INSPECT_PYTHON" >&2; exit 2; }
for tool in fincore unzip hyperfine; do
    command -v "$tool" >/dev/null || { echo "bench-pytorch needs $tool (apt-get install util-linux unzip hyperfine)" >&2; exit 2; }
done

mkdir -p "$WORK"
if [ ! -f "$WORK/b/pytorch_model.bin" ] || [ "$(cat "$WORK/layers" 2>/dev/null)" != "$LAYERS" ]; then
    "$PY" scripts/bench_pytorch_gen.py "$WORK" --layers "$LAYERS" >/dev/null
    echo "$LAYERS" > "$WORK/layers"
fi
cargo build --release --quiet
WI="${CARGO_TARGET_DIR:-target}/release/weight-inspect"
A="$WORK/a/pytorch_model.bin" B="$WORK/b/pytorch_model.bin"

evict() { "$PY" -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; }
resident() { fincore --bytes --noheadings --output RES "$1" | tr -d ' '; }

# What a reader of the directory and data.pkl has to read at the least.
read -r SIZE PKL CD <<< "$("$PY" - "$A" <<'PYEOF'
import os, sys, zipfile
path = sys.argv[1]
with zipfile.ZipFile(path) as z:
    pkl = next(i for i in z.infolist() if i.filename.endswith("/data.pkl"))
    cd = os.path.getsize(path) - z.start_dir
print(os.path.getsize(path), pkl.file_size, cd)
PYEOF
)"

# Cold: best of RUNS, each after evicting the file from the page cache.
cold() { # label, command...
    local label=$1; shift
    local best="" bytes=""
    for _ in $(seq "$RUNS"); do
        evict "$A"
        local start end
        start=$(date +%s.%N); "$@" >/dev/null; end=$(date +%s.%N)
        local t; t=$(echo "$end - $start" | bc -l)
        if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
        bytes=$(resident "$A")
    done
    printf "| %s | %.1f ms | %s bytes (%.2f%% of the file) |\n" "$label" "$(echo "$best * 1000" | bc -l)" "$bytes" "$(echo "100 * $bytes / $SIZE" | bc -l)"
}

echo "checkpoint: $SIZE bytes; data.pkl $PKL bytes; central directory $CD bytes"
echo
echo "| command, cache cold | time (best of $RUNS) | read from disk (fincore) |"
echo "|---|---|---|"
cold "weight-inspect id" "$WI" id "$A"
cold "unzip -l" unzip -l "$A"
echo
hyperfine --warmup 3 --runs 30 -N --export-json "$WORK/id.json" "$WI id $A" "unzip -l $A" 2>&1 | grep -E "Time|±|faster" || true
echo

measure() { # best of RUNS: "seconds anon_MB file_MB hwm_MB exit"
    local best=""
    for _ in $(seq "$RUNS"); do
        local line; line=$("$PY" scripts/peak_rss.py "$@")
        if [ -z "$best" ] || awk -v a="${line%% *}" -v b="${best%% *}" 'BEGIN{exit !(a<b)}'; then best="$line"; fi
    done
    echo "$best"
}
cat "$A" "$B" > /dev/null
c=$(measure sh -c "cat '$A' '$B' > /dev/null")
o=$(measure "$WI" diff --values --json "$A" "$B")
read -r c_s _ <<< "$c"
read -r o_s o_anon o_file _ <<< "$o"
changed=$("$WI" diff --values --json "$A" "$B" | "$PY" -c 'import json, sys
v = json.load(sys.stdin)["values"]["tensors"]
print(sum(1 for t in v if t["changed_elements"]), "of", len(v))' || true)
echo "| pair, cache warm | cat A B | diff --values | ratio | peak anon | peak file-backed | tensors changed |"
echo "|---|---|---|---|---|---|---|"
printf "| 2 x %s MB | %.2f s | %.2f s | %.2fx | %.0f MB | %.0f MB | %s |\n" "$((SIZE >> 20))" "$c_s" "$o_s" \
    "$(echo "$o_s / $c_s" | bc -l)" "$o_anon" "$o_file" "$changed"
echo
echo "$(nproc) cores; best of $RUNS runs."
