#!/usr/bin/env bash
# Peak RSS of `weight-inspect delta inspect` (which reads the file into memory) and `inspect`
# (which maps it) on .wdelta files at and above the header caps (WEIGHT_INSPECT_MAX_HEADER_BYTES,
# default 100 MB; tensors at most one per 1000 bytes of it), next to the bound each must meet:
#
#   peak RSS <= 3 x header + 64 MiB
#
# where "header" is everything in the file but the raw array bytes: preamble, JSON header, the
# array records' framing (tensor and field names, dtype, dimensions, byte count) and checksum.
# The peak includes the file's own pages (read into memory, or mapped and read by the checksum),
# so a file of long names, whose records repeat each name, counts in full. The JSON header alone
# and the bound it would give are shown too (only files whose records are small next to their
# JSON can meet that one: the file itself is in memory).
#
#   scripts/wdelta_header_rss.sh [BINARY]     # default: a debug build in the target dir
#
# The files (up to ~500 MB) go to $WORK (default bench-work/rss).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${WEIGHT_INSPECT_PYTHON:-.venv/bin/python}"
WORK="${WORK:-bench-work/rss}"
mkdir -p "$WORK"
if [ $# -ge 1 ]; then WI="$1"; else
    cargo build --quiet
    WI="${CARGO_TARGET_DIR:-target}/debug/weight-inspect"
fi
gen() { [ -f "$WORK/$1.wdelta" ] || "$PY" scripts/wdelta_header_rss.py "$WORK/$1.wdelta" "${@:2}" >&2; }
gen cap-sparse 100000                      # the tensor cap, minimal entries
gen cap-int4 100000 --int4 --name-len 700  # both caps: long names, five records a tensor
gen cap-dims 100000 --ndim 64              # the tensor cap, 64 dimensions of 2 JSON bytes each
gen small 1000                             # a small header: the 64 MiB dominate
gen over-count 100001                      # refused: one tensor over the cap
gen over-bytes 1000000                     # refused: header over the byte cap
MIB=1048576
mb() { echo "$(( ($1 + 500000) / 1000000 ))"; }
printf '| file | command | file MB | JSON header MB | record framing MB | header MB | exit | wall s | peak RSS MiB | bound MiB | within | bound on JSON alone MiB |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for f in cap-sparse cap-int4 cap-dims small over-count over-bytes; do
    path="$WORK/$f.wdelta"
    # JSON header, records' framing, raw array bytes, file: all in bytes.
    read -r json framing payload total < <("$PY" scripts/wdelta_header_rss.py --sizes "$path")
    header=$(( total - payload ))
    bound=$(( 3 * header + 64 * MIB ))
    json_bound=$(( 3 * json + 64 * MIB ))
    for cmd in "delta inspect" "inspect"; do
        set +e
        # shellcheck disable=SC2086
        /usr/bin/time -f "%e %M" -o "$WORK/time.tmp" "$WI" $cmd "$path" > /dev/null 2> "$WORK/err.tmp"
        status=$?
        set -e
        read -r wall rss_kib < <(tail -1 "$WORK/time.tmp")
        rss=$(( rss_kib * 1024 ))
        within=yes
        [ "$rss" -le "$bound" ] || within=NO
        echo "| $f | $cmd | $(mb "$total") | $(mb "$json") | $(mb "$framing") | $(mb "$header") | $status | $wall |" \
            "$(( rss / MIB )) | $(( bound / MIB )) | $within | $(( json_bound / MIB )) |"
    done
done
