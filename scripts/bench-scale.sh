#!/usr/bin/env bash
# Scale of the git path (docs/PERFORMANCE.md, "Scale"): one commit that changes N LFS-tracked
# safetensors files in one directory, diffed by
#   weight-inspect git diff HEAD~1 HEAD
#   weight-inspect ci --base HEAD~1 --head HEAD
# side by side with
#   git diff --stat HEAD~1 HEAD
# for each N in SIZES. Best of RUNS wall times (hyperfine -N), and the peak RSS of one run of
# each (from /usr/bin/time). Records two rows per N >= 8000 with scripts/bench_result.py: the time against
# `git diff --stat` (target <= 3x) and the growth from the smallest N (target <= 10x for 8x the
# files). Not a test.
#
#   scripts/bench-scale.sh [WEIGHT_INSPECT_BINARY]
#   SIZES="1000 8000" RUNS=3 scripts/bench-scale.sh
#
# The LFS objects are written into the repository's store directly and the pointers committed
# as they are (no clean filter runs), so the repositories build in seconds. Needs Python with
# the safetensors package (WEIGHT_INSPECT_PYTHON or .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=$(realpath "${1:-target/release/weight-inspect}")
SIZES=${SIZES:-1000 8000 32000}
RUNS=${RUNS:-3}
PY=${WEIGHT_INSPECT_PYTHON:-$PWD/.venv/bin/python}
WORK=$PWD/bench-work/scale
mkdir -p "$WORK/home"
export HOME=$WORK/home GIT_CONFIG_NOSYSTEM=1 GIT_PAGER=cat NO_COLOR=1
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b

# Writes N safetensors files (version V) as LFS pointers under models/, their objects into
# the store of the repository in the current directory.
cat > "$WORK/make.py" <<'EOF'
import hashlib, os, sys
import numpy as np
from safetensors.numpy import save

n, version = int(sys.argv[1]), int(sys.argv[2])
os.makedirs("models", exist_ok=True)
for i in range(n):
    rows = 4 + version  # the second version changes a shape: a structural change per file
    data = save({"w": np.full((rows, 8), i, np.float32), "b": np.zeros(8, np.float16)},
                metadata={"file": str(i), "version": str(version)})
    oid = hashlib.sha256(data).hexdigest()
    store = os.path.join(".git", "lfs", "objects", oid[:2], oid[2:4])
    os.makedirs(store, exist_ok=True)
    with open(os.path.join(store, oid), "wb") as f:
        f.write(data)
    with open(f"models/shard-{i:06d}.safetensors", "w") as f:
        f.write(f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n")
EOF

# Best-of-RUNS wall time in seconds (hyperfine, no shell between it and the command), then
# the peak RSS in MB of one more run. A command that fails stops the benchmark: a failing run
# would time an error message.
measure() {
    local json=$WORK/hyperfine.json
    hyperfine -N --style none --warmup 1 --runs "$RUNS" --export-json "$json" "$*" >/dev/null
    local best
    best=$(python3 -c 'import json,sys; print(min(json.load(open(sys.argv[1]))["results"][0]["times"]))' "$json")
    local kb
    kb=$( { /usr/bin/time -f 'RSS %M' "$@" >/dev/null; } 2>&1 | grep '^RSS' | cut -d' ' -f2)
    printf '%.4f %.0f\n' "$best" "$(echo "$kb / 1024" | bc -l)"
}

echo "| changed files | git diff --stat | weight-inspect git diff | ratio | ci | ratio | peak RSS git diff / ci |"
echo "|---|---|---|---|---|---|---|"
first_n="" first_diff="" first_ci=""
for n in $SIZES; do
    repo=$WORK/repo-$n
    if [ ! -f "$repo/.built" ]; then
        rm -rf "$repo"
        git init -q -b main "$repo"
        (
            cd "$repo"
            echo '*.safetensors filter=lfs diff=lfs merge=lfs -text' > .gitattributes
            "$PY" "$WORK/make.py" "$n" 1
            git add -A && git commit -qm v1
            "$PY" "$WORK/make.py" "$n" 2
            git add -A && git commit -qm v2
            touch .built
        )
    fi
    cd "$repo"
    read -r stat_s stat_mb < <(measure git diff --stat HEAD~1 HEAD)
    read -r diff_s diff_mb < <(measure "$BIN" git diff HEAD~1 HEAD)
    read -r ci_s ci_mb < <(measure "$BIN" ci --offline --base HEAD~1 --head HEAD)
    cd - >/dev/null
    printf "| %d | %.3f s | %.3f s | %.1fx | %.3f s | %.1fx | %.0f MB / %.0f MB |\n" "$n" "$stat_s" \
        "$diff_s" "$(echo "$diff_s / $stat_s" | bc -l)" "$ci_s" "$(echo "$ci_s / $stat_s" | bc -l)" \
        "$diff_mb" "$ci_mb"
    if [ -z "$first_n" ]; then
        first_n=$n first_diff=$diff_s first_ci=$ci_s
    elif [ "$n" -ge 8000 ]; then
        growth=$(echo "10 * $n / (8 * $first_n)" | bc -l)
        for cmd in "git diff:$diff_s:$first_diff" "ci:$ci_s:$first_ci"; do
            IFS=: read -r name ours before <<<"$cmd"
            python3 scripts/bench_result.py add scale \
                --work "weight-inspect $name, $n changed LFS files in one directory (peak RSS $([ "$name" = ci ] && echo "$ci_mb" || echo "$diff_mb") MB)" \
                --ours "$ours" --peer "$stat_s" --peer-name "git diff --stat" --max-ratio 3 >&2
            python3 scripts/bench_result.py add scale \
                --work "weight-inspect $name, growth from $first_n to $n changed files" \
                --ours "$ours" --peer "$before" --peer-name "the same at $first_n files" \
                --max-ratio "$growth" >&2
        done
    fi
done
