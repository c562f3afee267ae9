"""Runs a composite action's steps locally, the way a GitHub runner does, for the tests.

Usage: run_action.py ACTION_DIR < config.json; prints a JSON result.

config: {"inputs": {...}, "github": {context: event, action_repository, ...},
         "runner": {"os": ..., "temp": ...}, "env": {base environment}, "workdir": DIR}

What is simulated: input defaults, `${{ }}` expressions (property paths only: the action must not
need more), a fresh GITHUB_OUTPUT / GITHUB_STEP_SUMMARY / GITHUB_PATH file per step, outputs
read back in both the `name=value` and the `name<<DELIMITER` form, GITHUB_PATH entries prepended
to PATH for later steps, `shell: bash` as `bash --noprofile --norc -eo pipefail FILE`, and the
action's outputs evaluated at the end. `uses:` steps are not run (no network): they are
recorded with their evaluated `with:` so that the test can check them. A failing step stops
the run, as on GitHub.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
PATH_EXPR = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$")


def lookup(context, expr):
    if not PATH_EXPR.match(expr):
        raise SystemExit(f"unsupported expression in action.yml: {expr!r}")
    value = context
    for part in expr.split("."):
        if not isinstance(value, dict) or part not in value:
            return ""
        value = value[part]
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def evaluate(context, text):
    if not isinstance(text, str):
        return text
    return EXPR.sub(lambda m: lookup(context, m.group(1)), text)


def read_outputs(path):
    """Parses a GITHUB_OUTPUT file (both forms of the runner's file commands)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value = []
            while lines[i] != delimiter:
                value.append(lines[i])
                i += 1
            i += 1
            out[name] = "\n".join(value)
        else:
            name, value = line.split("=", 1)
            out[name] = value
    return out


def main():
    action_dir = sys.argv[1]
    config = json.load(sys.stdin)
    with open(os.path.join(action_dir, "action.yml"), encoding="utf-8") as f:
        action = yaml.safe_load(f)
    inputs = {name: str(spec.get("default", "")) for name, spec in action.get("inputs", {}).items()}
    for name, value in config.get("inputs", {}).items():
        if name not in inputs:
            raise SystemExit(f"input {name!r} is not declared in action.yml")
        inputs[name] = value
    context = {
        "inputs": inputs,
        "github": config.get("github", {}),
        "runner": config.get("runner", {}),
        "steps": {},
        "env": config.get("env", {}),
    }
    env = dict(config.get("env", {}))
    env["GITHUB_ACTION_PATH"] = action_dir
    extra_path = []
    scratch = tempfile.mkdtemp(prefix="run-action-")
    results = []
    failed = None
    for index, step in enumerate(action["runs"]["steps"]):
        step_id = step.get("id", f"__{index}")
        record = {"id": step_id, "name": step.get("name", "")}
        if "uses" in step:
            record["uses"] = step["uses"]
            record["with"] = {k: evaluate(context, v) for k, v in step.get("with", {}).items()}
            results.append(record)
            context["steps"][step_id] = {"outputs": {}, "outcome": "skipped"}
            continue
        files = {}
        for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_PATH"):
            path = os.path.join(scratch, f"{index}-{name}")
            open(path, "w").close()
            files[name] = path
        script = os.path.join(scratch, f"{index}.sh")
        with open(script, "w", encoding="utf-8") as f:
            f.write(step["run"])
        step_env = dict(env)
        step_env.update(files)
        step_env["GITHUB_ACTION"] = step_id
        for k, v in step.get("env", {}).items():
            step_env[k] = evaluate(context, v)
        step_env["PATH"] = os.pathsep.join(extra_path + [env.get("PATH", os.defpath)])
        if step.get("shell") != "bash":
            raise SystemExit(f"step {step_id}: only `shell: bash` is simulated")
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", script],
            cwd=config["workdir"],
            env=step_env,
            capture_output=True,
            text=True,
        )
        outputs = read_outputs(files["GITHUB_OUTPUT"])
        with open(files["GITHUB_STEP_SUMMARY"], encoding="utf-8") as f:
            summary = f.read()
        with open(files["GITHUB_PATH"], encoding="utf-8") as f:
            extra_path = [p for p in f.read().split("\n") if p] + extra_path
        record.update(
            exit_code=proc.returncode,
            stdout=proc.stdout,
            stderr=proc.stderr,
            outputs=outputs,
            summary=summary,
        )
        results.append(record)
        context["steps"][step_id] = {
            "outputs": outputs,
            "outcome": "success" if proc.returncode == 0 else "failure",
        }
        if proc.returncode != 0:
            failed = step_id
            break
    outputs = {
        name: evaluate(context, spec.get("value", ""))
        for name, spec in action.get("outputs", {}).items()
    }
    print(json.dumps({"steps": results, "failed_step": failed, "outputs": outputs,
                      "path_added": extra_path}))


main()
