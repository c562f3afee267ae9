#!/usr/bin/env bash
# Benchmarks `weight-inspect id` on a GGUF with a 262,144-token vocabulary (header ~7 MB) against
# its limit (`openssl dgst -sha256` of the file's canonical JSON: hashing alone, nothing parsed or
# written), the floor (reading the header bytes with `head -c`) and gguf-py's GGUFReader, and
# measures the peak RSS of `weight-inspect id`.
#
#   scripts/bench_id.sh            (uses .venv/bin/python, or $WEIGHT_INSPECT_PYTHON)
#
# Targets: <= 1.5x `openssl dgst` of the canonical JSON, peak RSS <= 4x header size + 10 MB
# (and the first version's: wall <= 20 ms, <= 2x the `head -c` time).
# Writes bench-work/ (git-ignored): the generated file, hyperfine's JSON, and summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${WEIGHT_INSPECT_PYTHON:-$PWD/.venv/bin/python}"
[ -x "$PY" ] || { echo "no Python venv at $PY: run scripts/test once, or set WEIGHT_INSPECT_PYTHON" >&2; exit 2; }

need_apt() {
    local sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq "$@"
}
command -v hyperfine >/dev/null 2>&1 || need_apt hyperfine
[ -x /usr/bin/time ] || need_apt time

WORK=bench-work
FILE="$WORK/vocab262k.gguf"
mkdir -p "$WORK"
[ -f "$FILE" ] || "$PY" scripts/make_fixtures.py "$WORK" --only vocab262k.gguf

cargo build --release --locked --quiet
BIN="$PWD/target/release/weight-inspect"

# Header size (everything before the aligned tensor data), computed with a small struct walker
# independent of weight-inspect.
HEADER_BYTES=$("$PY" - "$FILE" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read(64 << 20)
pos = 0
def take(fmt):
    global pos
    (v,) = struct.unpack_from("<" + fmt, data, pos)
    pos += struct.calcsize("<" + fmt)
    return v
def skip(n):
    global pos
    pos += n
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip_value(t):
    if t == 8:
        skip(take("Q"))
    elif t == 9:
        it, n = take("I"), take("Q")
        if it in SIZES:
            skip(SIZES[it] * n)
        else:
            for _ in range(n):
                skip_value(it)
    else:
        skip(SIZES[t])
take("I"); take("I")
n_tensors, n_kv = take("Q"), take("Q")
alignment = 32
for _ in range(n_kv):
    n = take("Q")
    key = data[pos : pos + n]
    skip(n)
    t = take("I")
    if key == b"general.alignment":
        alignment = struct.unpack_from("<I", data, pos)[0]
    skip_value(t)
for _ in range(n_tensors):
    skip(take("Q"))
    skip(8 * take("I") + 4 + 8)
print((pos + alignment - 1) // alignment * alignment)
EOF
)
FILE_BYTES=$(stat -c %s "$FILE")
echo "file: $FILE ($FILE_BYTES bytes), header: $HEADER_BYTES bytes"

"$BIN" id "$FILE"
command -v openssl >/dev/null 2>&1 || need_apt openssl
CANONICAL="$WORK/vocab262k.canonical.json"
"$BIN" id --canonical "$FILE" > "$CANONICAL"

hyperfine -N --warmup 5 --runs "${RUNS:-60}" --export-json "$WORK/hyperfine-id.json" \
    "$BIN id $FILE" \
    "head -c $HEADER_BYTES $FILE" \
    "openssl dgst -sha256 $CANONICAL"

GGUF_PY="from gguf import GGUFReader; r = GGUFReader('$FILE'); [f.contents() for f in r.fields.values()]; [(t.name, t.tensor_type, t.shape) for t in r.tensors]"
hyperfine -N --warmup 1 --runs 3 --export-json "$WORK/hyperfine-gguf-py.json" \
    "$PY -c \"$GGUF_PY\""

/usr/bin/time -v "$BIN" id "$FILE" >/dev/null 2>"$WORK/time-v.txt"
RSS_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time-v.txt")

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
"$PY" - "$WORK" "$HEADER_BYTES" "$FILE_BYTES" "$RSS_KB" "$LOAD" "$(nproc)" <<'EOF' | tee "$WORK/summary.md"
import json, os, sys
work, header, size, rss_kb, load, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
runs = json.load(open(f"{work}/hyperfine-id.json"))["results"]
py = json.load(open(f"{work}/hyperfine-gguf-py.json"))["results"][0]
ours, head, dgst = runs[0], runs[1], runs[2]
ms = lambda r: r["mean"] * 1000
sd = lambda r: r["stddev"] * 1000
cpu = lambda r: (r["user"] + r["system"]) * 1000
rss = rss_kb * 1024
rss_limit = 4 * header + 10 * 1024 * 1024
ok = lambda b: "met" if b else "MISSED"
print(f"Machine: {cores} cores, load average {load} while measuring (wall times grow with load;")
print("CPU time = user + system is the steadier figure).")
print()
print("| measurement | result | target |")
print("| --- | --- | --- |")
print(f"| file / header size | {size:,} B / {header:,} B | |")
print(f"| `weight-inspect id` wall (mean ± sd, min) | {ms(ours):.1f} ± {sd(ours):.1f} ms, min {ours['min']*1000:.1f} ms | <= 20 ms: {ok(ms(ours) <= 20)} |")
print(f"| `weight-inspect id` CPU (user + sys) | {cpu(ours):.1f} ms | <= 20 ms: {ok(cpu(ours) <= 20)} |")
print(f"| `head -c {header}` wall / CPU | {ms(head):.1f} ± {sd(head):.1f} ms / {cpu(head):.1f} ms | |")
print(f"| `openssl dgst -sha256` of the canonical JSON ({os.path.getsize(work + '/vocab262k.canonical.json'):,} B) wall / CPU | {ms(dgst):.1f} ± {sd(dgst):.1f} ms / {cpu(dgst):.1f} ms | |")
print(f"| ratio id / openssl dgst, wall (min) / CPU | {ms(ours) / ms(dgst):.2f}x ({ours['min'] / dgst['min']:.2f}x) / {cpu(ours) / cpu(dgst):.2f}x | <= 1.5x: {ok(ms(ours) <= 1.5 * ms(dgst))} |")
print(f"| ratio id / head -c, wall / CPU | {ms(ours) / ms(head):.1f}x / {cpu(ours) / cpu(head):.1f}x | <= 2x: {ok(ms(ours) <= 2 * ms(head))} |")
print(f"| gguf-py GGUFReader (fields + tensors), wall | {ms(py) / 1000:.1f} s | ({ms(py) / ms(ours):.0f}x the time of id) |")
print(f"| `weight-inspect id` peak RSS | {rss / 2**20:.1f} MiB ({rss / header:.2f}x header) | <= 4x header + 10 MB = {rss_limit / 2**20:.1f} MiB: {ok(rss <= rss_limit)} |")
EOF

# The ratio for scripts/bench-all: best of the runs, ours against openssl dgst.
read -r OURS_MIN DGST_MIN < <(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["results"]
print(r[0]["min"], r[2]["min"])' "$WORK/hyperfine-id.json")
python3 scripts/bench_result.py add id --work "id, GGUF with a 262,144-token vocabulary (7.3 MB header)" \
    --ours "$OURS_MIN" --peer "$DGST_MIN" --peer-name "openssl dgst -sha256 of its canonical JSON" \
    --max-ratio 1.5
