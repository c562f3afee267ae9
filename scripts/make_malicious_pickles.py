#!/usr/bin/env python3
"""Malicious pickles that weight-inspect must read (or refuse) without running (issue 31).

Usage (in the fixture venv, scripts/requirements-fixtures.txt):

    fixture-venv/bin/python scripts/make_malicious_pickles.py tests/fixtures/pytorch/malicious

Every file creates `weight-inspect-canary` in the current directory when Python unpickles it
(checked here, in a throw-away directory, with pickle.load or torch.load(weights_only=False)):

  reduce-pN.pkl      os.system("touch …") by __reduce__, pickle protocols 0 to 5 (GLOBAL + REDUCE
                     up to protocol 3, STACK_GLOBAL + REDUCE from 4)
  inst.pkl           protocol 0, written by hand: MARK, the argument, INST "posix system"
  obj.pkl            protocol 1, written by hand: MARK, GLOBAL "posix system", the argument, OBJ
  getattr-chain.pkl  builtins.getattr(builtins.__import__("os"), "system")("touch …")
  nested-pN.pt       torch.save (zip) of a real state dict with the payload nested in a config
                     list beside it, pickle protocols 2 and 4

manifest.json: per file, the dangerous global it must be flagged by.
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

CANARY = "weight-inspect-canary"


class SystemPayload:
    def __reduce__(self):
        return (os.system, (f"touch {CANARY}",))


def fires(path):
    """Unpickles `path` in a throw-away directory; the canary must appear."""
    code = ("import sys, pickle, torch\n"
            "p = sys.argv[1]\n"
            "try:\n    torch.load(p, weights_only=False)\n"
            "except Exception:\n    pickle.load(open(p, 'rb'))\n")
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-c", code, str(path.resolve())], cwd=d,
                       capture_output=True)
        return (Path(d) / CANARY).exists()


def main():
    out = Path(sys.argv[1])
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    system = os.system.__module__ + ".system"  # posix.system on Linux
    files = {}
    for p in range(6):
        (out / f"reduce-p{p}.pkl").write_bytes(pickle.dumps(SystemPayload(), protocol=p))
        files[f"reduce-p{p}.pkl"] = system
    arg = f"touch {CANARY}".encode()
    (out / "inst.pkl").write_bytes(b"(S'" + arg + b"'\nipos" b"ix\nsystem\n.")
    files["inst.pkl"] = "posix.system"
    (out / "obj.pkl").write_bytes(b"(cposix\nsystem\nS'" + arg + b"'\no.")
    files["obj.pkl"] = "posix.system"
    (out / "getattr-chain.pkl").write_bytes(
        b"cbuiltins\ngetattr\n(cbuiltins\n__import__\n(S'os'\ntRS'system'\ntR(S'" + arg
        + b"'\ntR.")
    files["getattr-chain.pkl"] = "builtins.getattr"
    torch.manual_seed(0)
    state = torch.nn.Linear(3, 2).state_dict()
    for p in (2, 4):
        name = f"nested-p{p}.pt"
        torch.save({"model": state, "config": {"hooks": [1, SystemPayload()]}}, out / name,
                   pickle_protocol=p)
        files[name] = system
    for name in files:
        assert fires(out / name), f"{name}: the payload did not run"
    (out / "manifest.json").write_text(json.dumps(files, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
