#!/usr/bin/env bash
# Peak RSS of `weight-inspect delta inspect` on .wdelta files at and above the header caps
# (WEIGHT_INSPECT_MAX_HEADER_BYTES, default 100 MB; tensors at most one per 1000 bytes of it).
#
#   scripts/wdelta_header_rss.sh [BINARY]     # default: a debug build in the target dir
#
# The files (up to ~500 MB) go to $WORK (default bench-work/rss). The peak RSS includes the
# pages of the file itself, which the checksum reads through a memory map: what the parse
# holds is the peak less the file size.
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
gen cap-sparse 100000
gen cap-int4 100000 --int4 --name-len 700
gen over-count 100001
gen over-bytes 1000000
printf '| file | file MB | header MB | exit | wall s | peak RSS MB |\n| --- | --- | --- | --- | --- | --- |\n'
for f in cap-sparse cap-int4 over-count over-bytes; do
    path="$WORK/$f.wdelta"
    header=$("$PY" -c "import struct,sys; f=open(sys.argv[1],'rb'); f.read(11); print(struct.unpack('<I', f.read(4))[0])" "$path")
    set +e
    /usr/bin/time -f "%e %M" -o "$WORK/time.tmp" "$WI" delta inspect "$path" > /dev/null 2> "$WORK/err.tmp"
    status=$?
    set -e
    read -r wall rss < <(tail -1 "$WORK/time.tmp")
    echo "| $f | $(( $(stat -c %s "$path") / 1000000 )) | $(( header / 1000000 )) | $status | $wall | $(( rss / 1024 )) |"
done
