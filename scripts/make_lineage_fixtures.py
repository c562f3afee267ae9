#!/usr/bin/env python3
"""Models related in every way `weight-inspect relate` names, for tests/lineage.rs.

Usage (in the fixture venv, scripts/requirements-fixtures.txt; never the test venv):

    fixture-venv/bin/python scripts/make_lineage_fixtures.py OUTDIR

OUTDIR is emptied first. No model is downloaded: every model is built by transformers from its
config class with a fixed seed and trained by real AdamW steps on synthetic token data (the
batches of scripts/make_finetune_pairs.py). Each model is a folder OUTDIR/NAME holding
model.safetensors (written by save_pretrained) and config.json:

- base:         BertForMaskedLM, seed 101, 8 AdamW steps;
- ft-a, ft-b:   base after 10 more steps on two other data seeds (fine-tunes);
- merge:        0.35 * ft-a + 0.65 * ft-b, every tensor, by numpy (the linear merge recipe of
                mergekit's `linear` method, written with safetensors.numpy);
- independent:  the same architecture initialised with seed 202 and trained apart (unrelated);
- gpt2:         GPT2LMHeadModel, another architecture (unrelated);
- f16:          base saved in float16 (model.half().save_pretrained: a cast);
- lora:         a PEFT LoRA (r 4, alpha 8, query and value) trained on top of base, saved by
                peft's save_pretrained (adapter_model.safetensors, adapter_config.json);
- extended:     base after resize_token_embeddings(+16 rows) and 4 steps (vocabulary rows
                added, the old rows moved by the steps);
- extended-only: base after resize_token_embeddings(+16 rows), untrained (old rows kept);
- pruned:       base with its last encoder layer removed (layers removed).

OUTDIR/manifest.json records the recipe, the merge weights, the losses and the versions.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_finetune_pairs import token_data, train  # noqa: E402

SHAPE = dict(vocab=96, hidden=32, layers=2, inter=64, positions=32, batch=4, seq=16)
MERGE_WEIGHTS = (0.35, 0.65)


def bert(seed, layers=SHAPE["layers"]):
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(vocab_size=SHAPE["vocab"], hidden_size=SHAPE["hidden"],
                     num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=SHAPE["inter"],
                     max_position_embeddings=SHAPE["positions"], hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    torch.manual_seed(seed)
    return BertForMaskedLM(cfg)


def steps(model, n, seed, lr=1e-3):
    return train(model, token_data(SHAPE["vocab"], SHAPE["batch"], SHAPE["seq"], n, seed), lr,
                 True, SHAPE["vocab"], seed)


def copy_of(model, seed):
    other = bert(seed)
    other.load_state_dict(model.state_dict())
    return other


def save(model, out, name):
    d = out / name
    model.save_pretrained(d, safe_serialization=True)
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    manifest = {"generator": "scripts/make_lineage_fixtures.py", "shape": SHAPE, "models": {}}
    models = manifest["models"]

    base = bert(101)
    models["base"] = {"recipe": "BertForMaskedLM seed 101, 8 AdamW steps lr 1e-3",
                      "losses": steps(base, 8, 11)}
    save(base, out, "base")

    fts = {}
    for name, seed in [("ft-a", 23), ("ft-b", 37)]:
        ft = copy_of(base, 101)
        models[name] = {"recipe": f"base + 10 AdamW steps lr 1e-3 on data seed {seed}",
                        "losses": steps(ft, 10, seed)}
        save(ft, out, name)
        fts[name] = ft

    from safetensors.numpy import load_file, save_file
    a = load_file(str(out / "ft-a" / "model.safetensors"))
    b = load_file(str(out / "ft-b" / "model.safetensors"))
    merged = {k: (MERGE_WEIGHTS[0] * a[k].astype(np.float64)
                  + MERGE_WEIGHTS[1] * b[k].astype(np.float64)).astype(a[k].dtype)
              for k in a}
    (out / "merge").mkdir()
    save_file(merged, str(out / "merge" / "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(out / "ft-a" / "config.json", out / "merge" / "config.json")
    models["merge"] = {"recipe": "linear merge in numpy (float64, rounded to float32)",
                       "weights": {"ft-a": MERGE_WEIGHTS[0], "ft-b": MERGE_WEIGHTS[1]}}

    independent = bert(202)
    models["independent"] = {"recipe": "BertForMaskedLM seed 202, 8 AdamW steps (trained apart)",
                             "losses": steps(independent, 8, 11)}
    save(independent, out, "independent")

    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(303)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=SHAPE["vocab"], n_positions=SHAPE["positions"],
                                      n_embd=SHAPE["hidden"], n_layer=2, n_head=4))
    models["gpt2"] = {"recipe": "GPT2LMHeadModel seed 303, 4 AdamW steps", "losses": []}
    gpt2_losses = train(gpt2, token_data(SHAPE["vocab"], SHAPE["batch"], SHAPE["seq"], 4, 11),
                        1e-3, False, SHAPE["vocab"], 11)
    models["gpt2"]["losses"] = gpt2_losses
    save(gpt2, out, "gpt2")

    save(copy_of(base, 101).half(), out, "f16")
    models["f16"] = {"recipe": "base.half().save_pretrained"}

    from peft import LoraConfig, get_peft_model
    import peft
    lora = get_peft_model(copy_of(base, 101), LoraConfig(r=4, lora_alpha=8,
                                                         target_modules=["query", "value"],
                                                         lora_dropout=0.0))
    # Real steps move lora_B away from its zero init.
    models["lora"] = {"recipe": "peft LoRA r 4 alpha 8 on query, value; 6 AdamW steps",
                      "losses": steps(lora, 6, 41)}
    lora.save_pretrained(out / "lora", safe_serialization=True)
    # peft's README.md is an empty model card template: not needed.
    (out / "lora" / "README.md").unlink(missing_ok=True)
    cfg_path = out / "lora" / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["base_model_name_or_path"] = "base"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

    grown = copy_of(base, 101)
    torch.manual_seed(505)
    grown.resize_token_embeddings(SHAPE["vocab"] + 16)
    save(grown, out, "extended-only")
    models["extended-only"] = {"recipe": "base.resize_token_embeddings(vocab + 16)"}
    models["extended"] = {"recipe": "extended-only + 4 AdamW steps",
                          "losses": steps(grown, 4, 53)}
    save(grown, out, "extended")

    pruned = bert(101, layers=SHAPE["layers"] - 1)
    state = {k: v for k, v in base.state_dict().items()
             if not k.startswith(f"bert.encoder.layer.{SHAPE['layers'] - 1}.")}
    pruned.load_state_dict(state)
    save(pruned, out, "pruned")
    models["pruned"] = {"recipe": "base without its last encoder layer"}

    import safetensors
    import transformers
    manifest["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                            "peft": peft.__version__, "safetensors": safetensors.__version__,
                            "numpy": np.__version__}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
