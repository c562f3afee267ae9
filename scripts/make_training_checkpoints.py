#!/usr/bin/env python3
"""Training checkpoints beyond plain state dicts, written by the real libraries (issue 31).

Usage (in the fixture venv, scripts/requirements-fixtures.txt; never the test venv):

    fixture-venv/bin/python scripts/make_training_checkpoints.py tests/fixtures/pytorch/training
    ... make_training_checkpoints.py OUTDIR --only numpy_protocol_2   (one part, the rest kept)

Writes into OUTDIR (emptied first):

  fairseq.pt        fairseq's layout built from its documented keys (the package is too heavy to
                    install): args (argparse.Namespace), model (state dict), optimizer_history
                    (list of dicts), extra_state, last_optimizer_state (a real AdamW state after
                    two steps: exp_avg, exp_avg_sq, step per parameter)
  module.pt         torch.save(model) of a module defined here: encoder.layers (ModuleList) of
                    Linear, a LayerNorm, a registered buffer; pickled as __main__.Net with BUILD
                    of its __dict__ (_parameters, _buffers, _modules)
  numpy-inside.pt   a tensor beside a numpy array and numpy's RNG state (np.random.get_state())
  numpy-inside-p4.pt, numpy-inside-p5.pt  the same and more arrays (Fortran order, bool, f64)
                    with pickle protocols 4 (data as bytes) and 5 (numpy's _frombuffer)
  numpy-p2.pt, numpy-p2-step.pt, numpy-p2-as-p4.pt  numpy arrays of every byte value (f32,
                    f64, i16, u8, bool, u32 RNG state) in torch.save's default protocol 2, whose
                    data is _codecs.encode(text, "latin1"); a step later (some values changed);
                    and the first saved with protocol 4 (data as bytes), the same values
  trainer/checkpoint-2/  transformers.Trainer, two steps on a tiny BERT: optimizer.pt,
                    scheduler.pt, rng_state.pth, training_args.bin (pytorch_model.bin or
                    model.safetensors beside them as the Trainer writes it)
  lightning-step2.ckpt, lightning-step3.ckpt  pytorch_lightning's Trainer.save_checkpoint of
                    one run after two steps and after a third (resumed from the first): the
                    same model at two points of its training (for diff and diff --values)
  lightning-llama.ckpt  Trainer.save_checkpoint of a LightningModule holding the conversion
                    fixtures' Llama (tests/fixtures/conversions/llama) as `model` and
                    `lm_head`, as LlamaForCausalLM names them, after one AdamW step at lr 0:
                    the weights stay those the GGUFs in tests/fixtures/conversions were
                    converted from, and the checkpoint holds optimizer state beside them

manifest.json: for each file, every tensor torch.load(weights_only=False) gives, named as
weight-inspect names it (dict keys and list indices joined by ".", a Namespace's attributes, a
module's state_dict() names), with dtype and shape, and whether it is a model weight.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 4, bias=False)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList([Block(), Block()])
        self.norm = nn.LayerNorm(4)
        self.register_buffer("scale", torch.tensor([0.5, 2.0]))


def tensors_of(obj, name, out, depth=0):
    """Every tensor reachable from obj, by the names weight-inspect gives them."""
    join = (lambda k: f"{name}.{k}" if name else str(k))
    if isinstance(obj, torch.Tensor):
        out[name] = {"dtype": str(obj.dtype).removeprefix("torch."), "shape": list(obj.shape)}
    elif isinstance(obj, nn.Module):
        for k, v in obj.state_dict(keep_vars=True).items():
            tensors_of(v, join(k), out, depth + 1)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            tensors_of(v, join(k), out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            tensors_of(v, join(i), out, depth + 1)
    elif isinstance(obj, argparse.Namespace):
        for k, v in vars(obj).items():
            tensors_of(v, join(k), out, depth + 1)
    elif isinstance(obj, np.ndarray):
        out[name] = {"numpy": True, "dtype": str(obj.dtype), "shape": list(obj.shape)}


def two_adamw_steps(model):
    opt = torch.optim.AdamW(model.parameters(), lr=2e-05)
    for _ in range(2):
        loss = sum((p * p).sum() for p in model.parameters())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return opt


def fairseq(out):
    torch.manual_seed(0)
    model = Net()
    opt = two_adamw_steps(model)
    args = argparse.Namespace(arch="tiny_transformer", lr=[2e-05], max_epoch=3, seed=1,
                              optimizer="adam", fp16=False)
    ckpt = {
        "args": args,
        "model": model.state_dict(),
        "optimizer_history": [{
            "criterion_name": "CrossEntropyCriterion",
            "optimizer_name": "FairseqAdam",
            "lr_scheduler_state": {"best": 3.5},
            "num_updates": 2,
        }],
        "extra_state": {"epoch": 1, "val_loss": 3.5,
                        "train_iterator": {"epoch": 1, "iterations_in_epoch": 2}},
        "last_optimizer_state": opt.state_dict(),
    }
    torch.save(ckpt, out / "fairseq.pt")


def module(out):
    torch.manual_seed(1)
    torch.save(Net(), out / "module.pt")


def numpy_inside(out):
    rng = np.random.RandomState(3)
    checkpoint = {
        "weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "array": np.arange(6, dtype=np.float32).reshape(3, 2),
        "numpy_rng": rng.get_state(),
    }
    # torch.save's default protocol 2: numpy's _reconstruct with the data as
    # _codecs.encode(text, "latin1").
    torch.save(checkpoint, out / "numpy-inside.pt")
    # Protocol 4: the data as bytes. Protocol 5: numpy's _frombuffer of a PickleBuffer (in band).
    more = dict(checkpoint, fortran=np.asfortranarray(np.ones((2, 3), dtype=np.int16)),
                flags=np.array([True, False, True]), wide=np.zeros((2, 2), dtype=np.float64))
    torch.save(more, out / "numpy-inside-p4.pt", pickle_protocol=4)
    torch.save(more, out / "numpy-inside-p5.pt", pickle_protocol=5)


def numpy_protocol_2(out):
    rng = np.random.RandomState(5)
    arrays = {
        # Every byte value appears in the data, so the latin-1 text holds characters of one and
        # two UTF-8 bytes.
        "bytes": np.arange(256, dtype=np.uint8).reshape(16, 16),
        "weight": rng.standard_normal((8, 4)).astype(np.float32),
        "wide": rng.standard_normal(5),
        "counts": np.array([-300, 0, 7, 32767, -32768], dtype=np.int16),
        "mask": np.array([True, False, True, True]),
    }
    checkpoint = {"model": dict(arrays), "numpy_rng": rng.get_state(), "step": 1}
    torch.save(checkpoint, out / "numpy-p2.pt")
    torch.save(checkpoint, out / "numpy-p2-as-p4.pt", pickle_protocol=4)
    later = dict(arrays, weight=arrays["weight"] + np.float32(0.01),
                 counts=arrays["counts"] + np.array([1, 0, 0, 0, 0], dtype=np.int16))
    rng.standard_normal(3)
    torch.save({"model": later, "numpy_rng": rng.get_state(), "step": 2}, out / "numpy-p2-step.pt")


def trainer(out):
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
    torch.manual_seed(2)
    config = BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16, num_labels=2)
    model = BertForSequenceClassification(config)
    data = [{"input_ids": torch.tensor([1, 2, 3, 4]), "labels": torch.tensor(i % 2)}
            for i in range(4)]
    args = TrainingArguments(output_dir=str(out / "trainer"), max_steps=2, save_steps=2,
                             per_device_train_batch_size=2, report_to=[], use_cpu=True,
                             save_safetensors=False, logging_strategy="no", seed=2)
    Trainer(model=model, args=args, train_dataset=data).train()


def lightning(out):
    import pytorch_lightning as pl

    class Tiny(pl.LightningModule):
        def __init__(self, lr=0.01, name="tiny"):
            super().__init__()
            self.save_hyperparameters()
            self.layer = nn.Linear(4, 3)

        def training_step(self, batch, idx):
            x, y = batch
            return nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)

    def trainer(steps):
        return pl.Trainer(max_steps=steps, logger=False, enable_checkpointing=False,
                          enable_progress_bar=False, enable_model_summary=False,
                          accelerator="cpu", devices=1)

    pl.seed_everything(8, verbose=False)
    g = torch.Generator().manual_seed(8)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(16, 4, generator=g),
                                       torch.randn(16, 3, generator=g)), batch_size=4)
    first = trainer(2)
    first.fit(Tiny(), data)
    first.save_checkpoint(out / "lightning-step2.ckpt")
    second = trainer(3)
    second.fit(Tiny(), data, ckpt_path=str(out / "lightning-step2.ckpt"))
    second.save_checkpoint(out / "lightning-step3.ckpt")


def lightning_llama(out):
    import pytorch_lightning as pl
    from transformers import LlamaForCausalLM

    source = Path(__file__).resolve().parent.parent / "tests/fixtures/conversions/llama"
    hf = LlamaForCausalLM.from_pretrained(source, torch_dtype=torch.float32)

    class LitLlama(pl.LightningModule):
        def __init__(self):
            super().__init__()
            # LlamaForCausalLM's own attribute names: state_dict keys match its Hugging Face names.
            self.model = hf.model
            self.lm_head = hf.lm_head

        def training_step(self, batch, idx):
            logits = self.lm_head(self.model(input_ids=batch[0]).last_hidden_state)
            return logits.float().pow(2).mean()

        def configure_optimizers(self):
            # lr 0: the step writes optimizer state and leaves the weights as converted.
            return torch.optim.AdamW(self.parameters(), lr=0.0)

    pl.seed_everything(9, verbose=False)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor([[1, 5, 7, 9], [2, 4, 6, 8]])), batch_size=2)
    trainer = pl.Trainer(max_steps=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu", devices=1)
    model = LitLlama()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer.fit(model, data)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "lr 0 changed a weight"
    trainer.save_checkpoint(out / "lightning-llama.ckpt")


PARTS = ["fairseq", "module", "numpy_inside", "numpy_protocol_2", "trainer", "lightning",
         "lightning_llama"]


def main():
    out = Path(sys.argv[1])
    if sys.argv[2:3] == ["--only"]:
        # One part written again, the others left as they are (a new run of Lightning or the
        # Trainer would not give the same bytes).
        out.mkdir(parents=True, exist_ok=True)
        parts = sys.argv[3:]
    else:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        parts = PARTS
    for part in parts:
        globals()[part](out)
    manifest = {}
    for path in sorted(out.rglob("*")):
        if path.suffix not in {".pt", ".pth", ".bin", ".ckpt"}:
            continue
        obj = torch.load(path, weights_only=False)
        found = {}
        tensors_of(obj, "", found)
        manifest[str(path.relative_to(out))] = {"tensors": found}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
