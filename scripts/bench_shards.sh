#!/usr/bin/env bash
# Benchmarks `weight-inspect id` on a 100-shard safetensors model directory against reading the
# shards' headers with `head -c` in a loop (the floor: the bytes `id` must read, one process per
# file as a shell loop does).
#
#   scripts/bench_shards.sh        (uses .venv/bin/python, or $WEIGHT_INSPECT_PYTHON)
#
# The model is Llama-3-70B's tensor list (80 layers, hidden 8192, GQA with 8 KV heads,
# intermediate 28672, vocabulary 128256; 723 bf16 tensors, 141 GB), planned into 100 shards by
# huggingface_hub's splitter and written as transformers lays them out: each shard a real
# safetensors header followed by its data as a sparse file (no disk space used), and
# model.safetensors.index.json. Targets: <= 2x the `head -c` loop and <= 100 ms.
# Writes bench-work/shards100/ (git-ignored) and bench-work/shards-summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${WEIGHT_INSPECT_PYTHON:-$PWD/.venv/bin/python}"
[ -x "$PY" ] || { echo "no Python venv at $PY: run scripts/test once, or set WEIGHT_INSPECT_PYTHON" >&2; exit 2; }
command -v hyperfine >/dev/null 2>&1 || {
    sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq hyperfine
}

WORK=bench-work
DIR="$WORK/shards100"
mkdir -p "$WORK"
if [ ! -f "$DIR/model.safetensors.index.json" ]; then
    rm -rf "$DIR"
    "$PY" - "$DIR" <<'EOF'
import json, os, struct, sys
from huggingface_hub import split_state_dict_into_shards_factory

out = sys.argv[1]
os.makedirs(out)
hidden, inter, layers, vocab, kv = 8192, 28672, 80, 128256, 1024
shapes = {"model.embed_tokens.weight": [vocab, hidden]}
for i in range(layers):
    p = f"model.layers.{i}."
    shapes.update({
        p + "self_attn.q_proj.weight": [hidden, hidden],
        p + "self_attn.k_proj.weight": [kv, hidden],
        p + "self_attn.v_proj.weight": [kv, hidden],
        p + "self_attn.o_proj.weight": [hidden, hidden],
        p + "mlp.gate_proj.weight": [inter, hidden],
        p + "mlp.up_proj.weight": [inter, hidden],
        p + "mlp.down_proj.weight": [hidden, inter],
        p + "input_layernorm.weight": [hidden],
        p + "post_attention_layernorm.weight": [hidden],
    })
shapes["model.norm.weight"] = [hidden]
shapes["lm_head.weight"] = [vocab, hidden]

def nbytes(shape):
    n = 2
    for d in shape:
        n *= d
    return n

total = sum(nbytes(s) for s in shapes.values())
split = split_state_dict_into_shards_factory(
    shapes, get_storage_size=nbytes, filename_pattern="model{suffix}.safetensors",
    max_shard_size=total // 100 + 1,
)
headers = []
for filename, names in split.filename_to_tensors.items():
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in names:
        end = offset + nbytes(shapes[name])
        header[name] = {"dtype": "BF16", "shape": shapes[name], "data_offsets": [offset, end]}
        offset = end
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path = os.path.join(out, filename)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + offset)  # sparse: the data reads as zeros, takes no disk
    headers.append((filename, 8 + len(text)))
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    f.write(json.dumps({"metadata": split.metadata, "weight_map": split.tensor_to_filename}, indent=2, sort_keys=True) + "\n")
with open(os.path.join(out, "..", "shards100-head.sh"), "w") as f:
    for filename, n in headers:
        f.write(f"head -c {n} {os.path.join(out, filename)}\n")
print(f"{len(headers)} shards, {len(shapes)} tensors, {total} bytes of data, "
      f"headers {min(n for _, n in headers)}..{max(n for _, n in headers)} bytes")
EOF
fi
SHARDS=$(ls "$DIR"/*.safetensors | wc -l)

cargo build --release --locked --quiet
BIN="$PWD/target/release/weight-inspect"
"$BIN" id "$DIR"

hyperfine -N --warmup 5 --runs 40 --export-json "$WORK/hyperfine-shards.json" \
    "$BIN id $DIR" \
    "bash $WORK/shards100-head.sh"

"$PY" - "$WORK" "$SHARDS" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF' | tee "$WORK/shards-summary.md"
import json, sys
work, shards, load = sys.argv[1], sys.argv[2], sys.argv[3]
ours, head = json.load(open(f"{work}/hyperfine-shards.json"))["results"]
ms = lambda r: f"{r['mean'] * 1000:.1f} ± {r['stddev'] * 1000:.1f} ms (min {r['min'] * 1000:.1f})"
print(f"| `weight-inspect id` on {shards} shards | {ms(ours)} |")
print(f"| `head -c` of each header, shell loop | {ms(head)} |")
print(f"| ratio id / head loop (means) | {ours['mean'] / head['mean']:.2f}x |")
print(f"| load average | {load} |")
EOF
