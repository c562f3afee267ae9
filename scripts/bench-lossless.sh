#!/usr/bin/env bash
# Sizes and speed of `delta create --strategy lossless` on real fine-tunes, side by side in one
# run with its peers: reminis's lossless delta pack, ZipNN's delta mode, `zstd -19 --long` of
# the XOR of the two files (BitX's baseline), and `cat` of the inputs for speed; create and
# apply with one thread give the throughput per core (fine-tuned MB per CPU second).
#
#   scripts/bench-lossless.sh                # bench-size pairs (about 25-50 MB per model)
#   SCALE=0.5 RUNS=2 scripts/bench-lossless.sh   # smaller widths, quicker
#
# The pairs are made by scripts/make_finetune_pairs.py --size bench (real AdamW steps with torch
# on synthetic token data, weight decay on): BERT float32 with every parameter trained, the same
# in bfloat16, float32 with only the last layer trained, and Llama converted by llama.cpp's
# converter to GGUF f16 and q8_0. They need the fixture venv (FIXTURE_PYTHON, torch and
# transformers: scripts/requirements-fixtures.txt) and llama.cpp's tree (LLAMA_CPP_DIR), as
# scripts/bench-conversion.sh does. The peers run in a venv of their own made here
# (BENCH_VENV, default bench-work/bench-venv, from scripts/requirements-bench.txt: reminis and
# zipnn from PyPI; zipnn brings torch), never the test venv. A full bfloat16 model without a
# base is also compressed by ZipNN alone and by our lossless strategy against an all-zero base.
#
# Writes bench-work/lossless/results.md and rows for scripts/bench-all (bench_result.py).
# Bounded: five pairs, hyperfine RUNS runs of each command.
set -euo pipefail
cd "$(dirname "$0")/.."

SCALE="${SCALE:-1}"
RUNS="${RUNS:-3}"
WORK="${WORK:-bench-work}/lossless"
FIXTURE_PYTHON="${FIXTURE_PYTHON:?set FIXTURE_PYTHON to a venv python with scripts/requirements-fixtures.txt}"
LLAMA_CPP_DIR="${LLAMA_CPP_DIR:?set LLAMA_CPP_DIR to the llama.cpp tree of the llama-cpp-python sdist}"
BENCH_VENV="${BENCH_VENV:-bench-work/bench-venv}"
export WEIGHT_INSPECT_CACHE_DIR="$PWD/$WORK/cache"
mkdir -p "$WORK"

if [ ! -x "$BENCH_VENV/bin/python" ] || ! "$BENCH_VENV/bin/python" -c "import reminis, zipnn" 2>/dev/null; then
    python3 -m venv "$BENCH_VENV"
    "$BENCH_VENV/bin/python" -m pip install -q -r scripts/requirements-bench.txt
fi
PEERS="$BENCH_VENV/bin/python"

cargo build --release --quiet
WI="${CARGO_TARGET_DIR:-$PWD/target}/release/weight-inspect"
RESULTS="$WORK/results.md"
# CPU seconds (user + system) a command takes, to the microsecond.
cpu_seconds() {
    python3 -c 'import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, ru = os.wait4(p.pid, 0)
sys.exit(f"{sys.argv[1]} failed") if status else print(f"{ru.ru_utime + ru.ru_stime:.4f}")' "$@"
}
PAIRS="$WORK/pairs"
if [ ! -f "$PAIRS/.done-$SCALE" ]; then
    "$FIXTURE_PYTHON" scripts/make_finetune_pairs.py "$LLAMA_CPP_DIR" "$PAIRS" --size bench --scale "$SCALE" >/dev/null
    touch "$PAIRS/.done-$SCALE"
fi


{
    echo "| pair | fine-tune MB | reminis MB | ZipNN delta MB | zstd -19 --long of the XOR MB | lossless MB | lossless / best peer | create s | cat BASE FT s | create / cat | apply s | cat BASE DELTA s | apply / cat | create / apply MB per CPU s, 1 thread | peak RSS create / apply MB |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} > "$RESULTS"
for spec in f32-full:float32 f32-frozen:float32 bf16-full:bfloat16 gguf-f16:f16 gguf-q8_0:q8_0; do
    pair="${spec%%:*}" dtype="${spec#*:}"
    dir="$PAIRS/$pair"
    ext=safetensors; case "$pair" in gguf-*) ext=gguf ;; esac
    B="$dir/base.$ext" F="$dir/ft.$ext" D="$dir/ft.wdelta" O="$dir/rebuilt.$ext"
    # The peers' sizes depend only on the pair, which is kept between runs: measured once.
    [ -s "$dir/peers.json" ] || "$PEERS" scripts/lossless_peers.py pair "$B" "$F" "$dir" "$dtype" 2>/dev/null > "$dir/peers.json"
    peers=$(cat "$dir/peers.json")
    "$WI" delta create --strategy lossless --base "$B" "$F" -o "$D" >/dev/null  # remembers the base hash
    "$WI" delta apply --base "$B" "$D" -o "$O" >/dev/null
    cmp "$O" "$F"
    hyperfine --style none --runs "$RUNS" --warmup 1 --export-json "$dir/hf.json" \
        "$WI delta create --strategy lossless --base $B $F -o $D" \
        "cat $B $F > /dev/null" \
        "$WI delta apply --base $B $D -o $O" \
        "cat $B $D > $dir/cat.out" >/dev/null
    # CPU seconds (user + system) of one thread: what a core does, which the machine's load
    # changes far less than wall time.
    cpu_create=$(cpu_seconds "$WI" delta create --threads 1 --strategy lossless --base "$B" "$F" -o "$D")
    cpu_apply=$(cpu_seconds "$WI" delta apply --threads 1 --base "$B" "$D" -o "$O")
    rss_create=$(/usr/bin/time -f %M "$WI" delta create --strategy lossless --base "$B" "$F" -o "$D" 2>&1 >/dev/null | tail -1)
    rss_apply=$(/usr/bin/time -f %M "$WI" delta apply --base "$B" "$D" -o "$O" 2>&1 >/dev/null | tail -1)
    "$PEERS" - "$dir" "$pair" "$F" "$D" "$rss_create" "$rss_apply" "$peers" "$cpu_create" "$cpu_apply" >> "$RESULTS" <<'PY'
import json, os, subprocess, sys
d, pair, ft, delta, rss_c, rss_a, peers, cpu_c, cpu_a = sys.argv[1:]
p = json.loads(peers)
r = [x["median"] for x in json.load(open(os.path.join(d, "hf.json")))["results"]]
mb = lambda n: n / 1e6
ours, ftb = os.path.getsize(delta), os.path.getsize(ft)
best = min(p["reminis"], p["zipnn"], p["zstd_xor"])
sizes = [p["reminis"], p["zipnn"], p["zstd_xor"], ours]
shown = [f"**{mb(n):.3f}**" if n == min(sizes) else f"{mb(n):.3f}" for n in sizes]  # the smallest in bold
print(f"| {pair} | {mb(ftb):.2f} | {' | '.join(shown)} | "
      f"{ours / best:.3f} | {r[0]:.3f} | {r[1]:.3f} | {r[0] / r[1]:.2f}x | {r[2]:.3f} | "
      f"{r[3]:.3f} | {r[2] / r[3]:.2f}x | {mb(ftb) / float(cpu_c):.0f} / {mb(ftb) / float(cpu_a):.0f} | "
      f"{int(rss_c) // 1024} / {int(rss_a) // 1024} |")
add = lambda work, ours, peer, name, mx, unit: subprocess.run(
    ["python3", "scripts/bench_result.py", "add", "lossless", "--work", work, "--ours", str(ours),
     "--peer", str(peer), "--peer-name", name, "--max-ratio", str(mx), "--unit", unit], check=True)
add(f"lossless delta size, {pair} fine-tune {mb(ftb):.0f} MB", mb(ours), mb(best),
    "the smallest of reminis, ZipNN delta, zstd -19 --long of the XOR", 1.0, "MB")
add(f"delta create --strategy lossless, {pair}", r[0], r[1], "cat BASE FT", 3.7, "s")
add(f"delta apply (lossless), {pair}", r[2], r[3], "cat BASE DELTA > OUT", 1.3, "s")
PY
    rm -f "$dir/cat.out" "$O"
done

# A full bfloat16 model with no base: ZipNN alone, and ours against an all-zero base.
dir="$PAIRS/bf16-full"
F="$dir/ft.safetensors" Z="$dir/zero.safetensors" D="$dir/nobase.wdelta"
"$PEERS" scripts/lossless_peers.py zerobase "$F" "$Z" 2>/dev/null
"$WI" delta create --strategy lossless --base "$Z" "$F" -o "$D" >/dev/null
zipnn=$("$PEERS" scripts/lossless_peers.py nobase "$F" "$dir" bfloat16 2>/dev/null)
"$PEERS" - "$F" "$D" "$zipnn" >> "$RESULTS" <<'PY'
import json, os, subprocess, sys
ft, delta, z = sys.argv[1:]
ftb, ours, zipnn = os.path.getsize(ft), os.path.getsize(delta), json.loads(z)["zipnn"]
print()
print("| bf16 model, no base | fine-tune MB | ZipNN alone MB | ZipNN ratio | lossless vs zero base MB | lossless ratio |")
print("|---|---|---|---|---|---|")
print(f"| bf16-full ft | {ftb / 1e6:.2f} | {zipnn / 1e6:.3f} | {ftb / zipnn:.3f}x | {ours / 1e6:.3f} | {ftb / ours:.3f}x |")
subprocess.run(["python3", "scripts/bench_result.py", "add", "lossless", "--work",
                "lossless bf16 model against a zero base (no base), size", "--ours", str(ours / 1e6),
                "--peer", str(zipnn / 1e6), "--peer-name", "ZipNN alone", "--max-ratio", "1.0",
                "--unit", "MB"], check=True)
PY
rm -f "$Z" "$D"
cat "$RESULTS"
