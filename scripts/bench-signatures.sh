#!/usr/bin/env bash
# Benchmarks OpenSSF model signatures side by side in one run:
#   - `verify` in a clone without LFS objects (GIT_LFS_SKIP_SMUDGE=1) of a 100-file model repo:
#     bounded by the pointers (target <= 50 ms), beside `model_signing verify key` on the
#     smudged checkout of the same repo;
#   - `sign` and `verify` on a model directory with its files present: against model_signing
#     1.1.1 on the same files (target >= 2x faster) and against `sha256sum` of those files run on
#     all cores (target <= 1.3x).
#
#   scripts/bench-signatures.sh          FILES=16 FILE_MB=64 (1 GiB), RUNS=5
#   QUICK=1 scripts/bench-signatures.sh  FILES=8 FILE_MB=16, RUNS=3
#
# Uses .venv/bin/python (or $WEIGHT_INSPECT_PYTHON) with model-signing from
# scripts/requirements-test.txt. Writes bench-work/signatures/ (git-ignored) and records rows
# with scripts/bench_result.py.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${WEIGHT_INSPECT_PYTHON:-$PWD/.venv/bin/python}"
[ -x "$PY" ] || { echo "no Python venv at $PY: run scripts/test once, or set WEIGHT_INSPECT_PYTHON" >&2; exit 2; }
"$PY" -c "import model_signing" || { echo "model_signing is not in $PY: pip install -r scripts/requirements-test.txt" >&2; exit 2; }
command -v hyperfine >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq hyperfine; }

if [ -n "${QUICK:-}" ]; then
    FILES=${FILES:-8} FILE_MB=${FILE_MB:-16} RUNS=${RUNS:-3}
else
    FILES=${FILES:-16} FILE_MB=${FILE_MB:-64} RUNS=${RUNS:-5}
fi
WORK="$PWD/bench-work/signatures"
mkdir -p "$WORK"
cargo build --release --locked --quiet
BIN="$PWD/target/release/weight-inspect"
CORES=$(nproc)

# Keys (openssl) and the model directory: FILES files of FILE_MB MiB of random bytes.
[ -f "$WORK/key.pem" ] || openssl ecparam -name prime256v1 -genkey -noout -out "$WORK/key.pem"
openssl ec -in "$WORK/key.pem" -pubout -out "$WORK/pub.pem" 2>/dev/null
MODEL="$WORK/model-${FILES}x${FILE_MB}"
if [ ! -f "$MODEL/.complete" ]; then
    rm -rf "$MODEL"
    mkdir -p "$MODEL"
    for i in $(seq -w 1 "$FILES"); do
        head -c "$((FILE_MB << 20))" /dev/urandom > "$MODEL/model-$i.safetensors"
    done
    echo '{"architectures": ["Bench"]}' > "$MODEL/config.json"
    touch "$MODEL/.complete"
fi
TOTAL_MB=$((FILES * FILE_MB))
SIG="$WORK/ours.sig"
THEIRS="$WORK/theirs.sig"
MS=("$PY" -m model_signing)

"$BIN" sign "$MODEL" --private-key "$WORK/key.pem" --signature "$SIG" --ignore-paths "$MODEL/.complete" >/dev/null
"${MS[@]}" sign key --private_key "$WORK/key.pem" --signature "$THEIRS" --ignore-paths "$MODEL/.complete" "$MODEL" >/dev/null

hyperfine --warmup 1 --runs "$RUNS" --export-json "$WORK/files.json" \
    -n ours-sign "$BIN sign $MODEL --private-key $WORK/key.pem --signature $SIG --ignore-paths $MODEL/.complete" \
    -n ours-verify "$BIN verify $MODEL --public-key $WORK/pub.pem --signature $SIG --ignore-paths $MODEL/.complete" \
    -n ms-sign "${MS[*]} sign key --private_key $WORK/key.pem --signature $THEIRS --ignore-paths $MODEL/.complete $MODEL" \
    -n ms-verify "${MS[*]} verify key --public_key $WORK/pub.pem --signature $THEIRS --ignore-paths $MODEL/.complete $MODEL" \
    -n sha256sum "find $MODEL -type f ! -name .complete -print0 | xargs -0 -P $CORES -n 1 sha256sum > /dev/null"

# The 100-file LFS repository, cloned without its objects.
LFS="$WORK/lfs"
if [ ! -f "$LFS/.complete" ]; then
    rm -rf "$LFS"
    mkdir -p "$LFS/origin"
    (
        cd "$LFS/origin"
        export GIT_CONFIG_NOSYSTEM=1 HOME="$LFS"
        git init -q -b main
        git config user.name bench && git config user.email bench@localhost
        git lfs install --local >/dev/null
        git lfs track "*.bin" >/dev/null
        mkdir model
        for i in $(seq -w 1 100); do head -c 1048576 /dev/urandom > "model/shard-$i.bin"; done
        git add -A && git commit -qm model
        "$BIN" sign model --private-key "$WORK/key.pem" >/dev/null
        git add -A && git commit -qm signature
    )
    GIT_LFS_SKIP_SMUDGE=1 HOME="$LFS" GIT_CONFIG_NOSYSTEM=1 git clone -q "$LFS/origin" "$LFS/clone"
    touch "$LFS/.complete"
fi
hyperfine --warmup 2 --runs $((RUNS * 4)) --export-json "$WORK/lfs.json" \
    -n ours-clone "cd $LFS/clone && $BIN verify model --public-key $WORK/pub.pem" \
    -n ms-smudged "cd $LFS/origin && ${MS[*]} verify key --public_key $WORK/pub.pem --signature model/model.sig model"

mean() { "$PY" -c "import json,sys; r={x['command']: x for x in json.load(open(sys.argv[1]))['results']}; print(r[sys.argv[2]]['mean'])" "$1" "$2"; }
F="$WORK/files.json"
L="$WORK/lfs.json"
work="$FILES files of $FILE_MB MiB ($TOTAL_MB MiB), files present"
python3 scripts/bench_result.py add signatures --work "sign, $work" --ours "$(mean "$F" ours-sign)" \
    --peer "$(mean "$F" ms-sign)" --peer-name "model_signing 1.1.1 sign key" --max-ratio 0.5
python3 scripts/bench_result.py add signatures --work "verify, $work" --ours "$(mean "$F" ours-verify)" \
    --peer "$(mean "$F" ms-verify)" --peer-name "model_signing 1.1.1 verify key" --max-ratio 0.5
python3 scripts/bench_result.py add signatures --work "sign against sha256sum, $work" --ours "$(mean "$F" ours-sign)" \
    --peer "$(mean "$F" sha256sum)" --peer-name "sha256sum on $CORES cores" --max-ratio 1.3
python3 scripts/bench_result.py add signatures --work "verify against sha256sum, $work" --ours "$(mean "$F" ours-verify)" \
    --peer "$(mean "$F" sha256sum)" --peer-name "sha256sum on $CORES cores" --max-ratio 1.3
python3 scripts/bench_result.py add signatures --work "verify, 100 LFS files of 1 MiB, clone without objects" \
    --ours "$(mean "$L" ours-clone)" --peer 0.050 --peer-name "the 50 ms target" --max-ratio 1
echo "model_signing verify on the smudged checkout: $(mean "$L" ms-smudged) s; ours in the clone: $(mean "$L" ours-clone) s"
