#!/usr/bin/env bash
# Benchmarks of `relate` and `bom` (docs/PERFORMANCE.md), side by side in one run:
#   - `relate A B` against `diff --values A B` on the Q4_K_M-like pair of
#     scripts/bench-values.sh (~241 MiB each, every block changed; made by
#     scripts/bench_values_gen.py gguf-q4km), page cache warm. Target: relate <= 1.5x.
#   - `bom DIR` against `id DIR` on a 100-shard safetensors model in a clone without LFS
#     objects, its headers read from an LFS server on loopback (tests/common/lfs_server.py) by
#     a first run and from the header cache after. Target: bom <= 50 ms.
#
#   scripts/bench-lineage.sh [RUNS]
# Needs git, git-lfs, hyperfine and the test venv (.venv, or WEIGHT_INSPECT_PYTHON).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

RUNS=${1:-5}
PY=${WEIGHT_INSPECT_PYTHON:-$PWD/.venv/bin/python}
cargo build --release --quiet
BIN=$PWD/${CARGO_TARGET_DIR:-target}/release/weight-inspect
VALUES=bench-work/values
mkdir -p "$VALUES"
if [ ! -f "$VALUES/b-q4km.gguf" ]; then
    "$PY" scripts/bench_values_gen.py gguf-q4km "$VALUES" --mb 253
fi
cat "$VALUES/a-q4km.gguf" "$VALUES/b-q4km.gguf" >/dev/null
hyperfine -N -w 1 -r "$RUNS" -i --export-markdown bench-work/lineage-relate.md \
    "$BIN diff --values $VALUES/a-q4km.gguf $VALUES/b-q4km.gguf" \
    "$BIN relate $VALUES/a-q4km.gguf $VALUES/b-q4km.gguf"

WORK=$PWD/bench-work/lineage-bom
rm -rf "$WORK"
mkdir -p "$WORK/home" "$WORK/storage/org/repo"
export HOME=$WORK/home GIT_CONFIG_NOSYSTEM=1 GIT_PAGER=cat NO_COLOR=1 GIT_TERMINAL_PROMPT=0
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
export WEIGHT_INSPECT_CACHE_DIR=$WORK/cache
git init -q -b main "$WORK/source"
cd "$WORK/source"
git lfs install --local >/dev/null
git lfs track '*.safetensors' >/dev/null
# 100 shards of 8 tensors each, named and indexed as transformers writes them.
"$PY" - model <<'PY'
import json, os, sys
import numpy as np
from safetensors.numpy import save_file
out = sys.argv[1]
os.makedirs(out)
weight_map, total = {}, 0
for s in range(100):
    name = f"model-{s + 1:05d}-of-00100.safetensors"
    tensors = {f"model.layers.{s}.w{j}.weight": np.full((64, 64), s + j, np.float32)
               for j in range(8)}
    save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
    for k, v in tensors.items():
        weight_map[k] = name
        total += v.nbytes
json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
          open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=2)
PY
git add -A && git commit -qm model
git clone -q --bare . "$WORK/bare.git"
find .git/lfs/objects -type f -exec cp {} "$WORK/storage/org/repo/" \;
coproc SERVER_PROC { "$PY" "$ROOT/tests/common/lfs_server.py" range "$WORK/storage"; }
read -r line <&"${SERVER_PROC[0]}"
port=$(printf '%s' "$line" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["port"])')
GIT_LFS_SKIP_SMUDGE=1 git clone -q "$WORK/bare.git" "$WORK/clone"
git -C "$WORK/clone" config lfs.url "http://127.0.0.1:$port/org/repo.git/info/lfs"
cd "$WORK/clone"
"$BIN" bom model >/dev/null   # reads the 100 headers from the server, caches them
kill "$SERVER_PROC_PID" 2>/dev/null || true
wait "$SERVER_PROC_PID" 2>/dev/null || true
head -c 200 model/model-00001-of-00100.safetensors | grep -q '^version https://git-lfs' ||
    { echo "the clone holds LFS objects: not the benchmark's case" >&2; exit 1; }
cd "$ROOT"
hyperfine -N -w 2 -r $((RUNS * 4)) --export-markdown "$ROOT/bench-work/lineage-bom.md" \
    "$BIN --offline id $WORK/clone/model" \
    "$BIN --offline bom $WORK/clone/model"
