#!/usr/bin/env bash
# Benchmark of the git integration (docs/PERFORMANCE.md): a repository with a 1 GB
# LFS-tracked GGUF model changed between two commits, diffed by
#   weight-inspect git diff HEAD~1 HEAD      (gix, LFS pointer -> local object, header only)
# versus
#   git diff HEAD~1 HEAD                     (textconv driver: git-lfs smudges both sides)
# Whole processes, wall clock. Not a test.
#
# Usage: scripts/bench-git.sh [WEIGHT_INSPECT_BINARY] [RUNS]
# Needs git, git-lfs and Python with gguf-py (WEIGHT_INSPECT_PYTHON or .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=$(realpath "${1:-target/release/weight-inspect}")
RUNS=${2:-10}
PY=${WEIGHT_INSPECT_PYTHON:-$PWD/.venv/bin/python}
WORK=$PWD/bench-work/git
rm -rf "$WORK"
mkdir -p "$WORK/home"
export HOME=$WORK/home GIT_CONFIG_NOSYSTEM=1 GIT_PAGER=cat NO_COLOR=1
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b

# A GGUF whose header is real and whose 1 GiB of tensor data is a sparse hole.
cat > "$WORK/make.py" <<'EOF'
import sys, numpy as np, gguf
path, name, dtype = sys.argv[1], sys.argv[2], sys.argv[3]
w = gguf.GGUFWriter(path, "llama")
w.add_name(name)
w.add_uint32("llama.block_count", 32)
w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(32000)])
total = 0
for i in range(32):
    n = 1024 * 8192  # 8M elements: 32 MiB as f32
    dt = np.float16 if (dtype == "f16" and i == 0) else np.float32
    nbytes = n * np.dtype(dt).itemsize
    w.add_tensor_info(f"blk.{i}.ffn.weight", [1024, 8192], dt, nbytes)
    total += w.ggml_pad(nbytes, w.data_alignment)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_ti_data_to_file()
f = w.fout[0]
start = w.ggml_pad(f.tell(), w.data_alignment)
f.truncate(start + total)
f.close()
EOF

git init -q -b main "$WORK/repo"
cd "$WORK/repo"
git lfs install --local >/dev/null
git lfs track '*.gguf' >/dev/null
"$BIN" git install --textconv >/dev/null
"$PY" "$WORK/make.py" model.gguf "bench v1" f32
git add -A && git commit -qm v1
"$PY" "$WORK/make.py" model.gguf "bench v2" f16
git add -A && git commit -qm v2
ls -l --block-size=M model.gguf | awk '{print "model size:", $5}'

# Runs "$@" RUNS times; prints min and median wall time in ms. PREP (if set) runs before each.
measure() {
    local label=$1; shift
    local times=()
    for _ in $(seq "$RUNS"); do
        [ -n "${PREP:-}" ] && eval "$PREP"
        local t0 t1
        t0=$(date +%s%N)
        "$@" >/dev/null
        t1=$(date +%s%N)
        times+=($(( (t1 - t0) / 1000 )))
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" '
        { a[NR] = $1 }
        END { printf "%-58s min %9.1f ms   median %9.1f ms\n", label, a[1] / 1000, a[int((NR + 1) / 2)] / 1000 }'
}

clear_cache='git update-ref -d refs/notes/textconv/weight-inspect 2>/dev/null || true'
PREP="" measure "weight-inspect git diff HEAD~1 HEAD" "$BIN" git diff HEAD~1 HEAD
PREP="$clear_cache" measure "git diff HEAD~1 HEAD (textconv, cache empty)" git diff HEAD~1 HEAD
PREP="" measure "git diff HEAD~1 HEAD (textconv, cached by git notes)" git diff HEAD~1 HEAD
PREP="" measure "git diff --ext-diff HEAD~1 HEAD (external driver)" \
    git -c "diff.weight-inspect.command=$BIN git-diff-driver" diff --ext-diff HEAD~1 HEAD
echo
echo "Output of weight-inspect git diff HEAD~1 HEAD:"
"$BIN" git diff HEAD~1 HEAD
