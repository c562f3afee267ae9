#!/usr/bin/env bash
# Benchmark of remote header reads (docs/PERFORMANCE.md): a repository whose LFS objects
# changed between two commits (a 1 GiB GGUF with a 32,000-token vocabulary and a 256 MiB
# safetensors file, both versions: 2.5 GiB of objects), served from loopback by an LFS server
# that honors Range (tests/common/lfs_server.py), in a clone made without LFS content:
#   weight-inspect git diff HEAD~1 HEAD          (batch API + Range reads of the headers)
# versus what a user does today:
#   git lfs fetch origin HEAD~1 HEAD, then weight-inspect git diff HEAD~1 HEAD
# and the repeated run from the header cache with the server stopped. Reports wall time and
# the bytes the server sent. Not a test.
#
# Usage: scripts/bench-remote.sh [WEIGHT_INSPECT_BINARY] [RUNS] [BASELINE_RUNS]
# Needs git, git-lfs and Python with gguf-py and numpy (WEIGHT_INSPECT_PYTHON or .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=$(realpath "${1:-target/release/weight-inspect}")
RUNS=${2:-5}
BASELINE_RUNS=${3:-1}
PY=${WEIGHT_INSPECT_PYTHON:-$PWD/.venv/bin/python}
SERVER=$PWD/tests/common/lfs_server.py
WORK=$PWD/bench-work/remote
rm -rf "$WORK"
mkdir -p "$WORK/home" "$WORK/storage/org/repo"
export HOME=$WORK/home GIT_CONFIG_NOSYSTEM=1 GIT_PAGER=cat NO_COLOR=1 GIT_TERMINAL_PROMPT=0
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b

# Real headers; the tensor data are sparse holes (the server still sends every byte of them).
cat > "$WORK/make.py" <<'EOF'
import json, struct, sys
import numpy as np, gguf

def gguf_file(path, name, half):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(name)
    w.add_uint32("llama.block_count", 32)
    w.add_array("tokenizer.ggml.tokens", [f"{name}-tok{i}" for i in range(32000)])
    total = 0
    for i in range(32):
        n = 1024 * 8192  # 8M elements: 32 MiB as f32
        dt = np.float16 if (half and i == 0) else np.float32
        nbytes = n * np.dtype(dt).itemsize
        w.add_tensor_info(f"blk.{i}.ffn.weight", [1024, 8192], dt, nbytes)
        total += w.ggml_pad(nbytes, w.data_alignment)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_ti_data_to_file()
    f = w.fout[0]
    start = w.ggml_pad(f.tell(), w.data_alignment)
    f.truncate(start + total)
    f.close()

def safetensors_file(path, note, half):
    # 256 tensors of 1 MiB: a header of a few tens of KB.
    header, offset = {"__metadata__": {"note": note}}, 0
    for i in range(256):
        dtype = "F16" if (half and i == 0) else "F32"
        size = (1 << 20) if dtype == "F32" else (1 << 19)
        header[f"layers.{i}.weight"] = {
            "dtype": dtype, "shape": [size // (4 if dtype == "F32" else 2)],
            "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + offset)

version = sys.argv[1]
gguf_file("model.gguf", f"bench v{version}", version == "2")
safetensors_file("weights.safetensors", f"v{version}", version == "2")
EOF

git init -q -b main "$WORK/source"
cd "$WORK/source"
git lfs install --local >/dev/null
git lfs track '*.gguf' '*.safetensors' >/dev/null
"$PY" "$WORK/make.py" 1
git add -A && git commit -qm v1
"$PY" "$WORK/make.py" 2
git add -A && git commit -qm v2
git clone -q --bare . "$WORK/bare.git"
# The server's storage holds every object (as a push would leave it).
find .git/lfs/objects -type f -exec cp --sparse=always {} "$WORK/storage/org/repo/" \;
objects=$(du -cb --apparent-size "$WORK"/storage/org/repo/* | tail -1 | cut -f1)
echo "LFS objects of both commits: $objects bytes ($(ls "$WORK/storage/org/repo" | wc -l) objects)"

server_pid=""
server_port=""
start_server() {
    coproc SERVER_PROC { LFS_SERVER_BULK=1 "$PY" "$SERVER" range "$WORK/storage"; }
    server_pid=$SERVER_PROC_PID
    read -r line <&"${SERVER_PROC[0]}"
    server_port=$(printf '%s' "$line" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["port"])')
}
stop_server() {
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
}
bytes_sent() {
    curl -s "http://127.0.0.1:$server_port/_stats" |
        "$PY" -c 'import json,sys; print(json.load(sys.stdin)["bytes_sent"])'
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
fresh_clone() {
    rm -rf "$WORK/$1"
    GIT_LFS_SKIP_SMUDGE=1 git clone -q "$WORK/bare.git" "$WORK/$1"
    git -C "$WORK/$1" config lfs.url "http://127.0.0.1:$server_port/org/repo.git/info/lfs"
}

start_server
cold=() today=() cold_bytes=0 today_bytes=0
for _ in $(seq "$RUNS"); do
    fresh_clone remote
    before=$(bytes_sent); t0=$(now_ms)
    (cd "$WORK/remote" && "$BIN" git diff HEAD~1 HEAD >/dev/null)
    t1=$(now_ms); after=$(bytes_sent)
    cold+=($((t1 - t0))); cold_bytes=$((after - before))
done
for _ in $(seq "$BASELINE_RUNS"); do
    fresh_clone today
    before=$(bytes_sent); t0=$(now_ms)
    (cd "$WORK/today" && git lfs fetch origin HEAD~1 HEAD >/dev/null 2>&1 &&
        "$BIN" git diff HEAD~1 HEAD >/dev/null)
    t1=$(now_ms); after=$(bytes_sent)
    today+=($((t1 - t0))); today_bytes=$((after - before))
done
stop_server

# The repeated run: headers from the cache, the server gone.
cached=()
for _ in $(seq "$RUNS"); do
    t0=$(date +%s%N)
    (cd "$WORK/remote" && "$BIN" git diff HEAD~1 HEAD >/dev/null)
    t1=$(date +%s%N)
    cached+=($(( (t1 - t0) / 1000 )))
done

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
cold_ms=$(median "${cold[@]}")
today_ms=$(median "${today[@]}")
cached_us=$(median "${cached[@]}")
printf '%-62s %10s %16s\n' "" "median" "bytes sent"
printf '%-62s %7d ms %16d\n' "weight-inspect git diff HEAD~1 HEAD (remote headers)" "$cold_ms" "$cold_bytes"
printf '%-62s %7d ms %16d\n' "git lfs fetch origin HEAD~1 HEAD, then weight-inspect git diff" "$today_ms" "$today_bytes"
printf '%-62s %7.1f ms %16d\n' "weight-inspect git diff HEAD~1 HEAD (header cache, no server)" \
    "$(echo "$cached_us" | awk '{ print $1 / 1000 }')" 0
awk -v a="$today_ms" -v b="$cold_ms" 'BEGIN { printf "speed-up: %.0fx\n", a / b }'
echo
echo "Output of weight-inspect git diff HEAD~1 HEAD in the clone without LFS content:"
(cd "$WORK/remote" && "$BIN" git diff HEAD~1 HEAD)
