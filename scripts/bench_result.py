#!/usr/bin/env python3
"""Records benchmark figures as ratios against their limit or peer, and tables them.

    bench_result.py add NAME --work TEXT --ours SECONDS --peer SECONDS --peer-name TEXT
                        --max-ratio R [--unit s|MB]
        appends one row to bench-work/results/NAME.json (the benchmark scripts call it);
        ratio = ours / peer, met when ratio <= max-ratio (a "5x faster" target is 0.2).
    bench_result.py table [--out FILE]
        every row of bench-work/results/*.json as one Markdown table, with the commit,
        the date, the machine's cores and the load average.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

RESULTS = Path(os.environ.get("BENCH_RESULTS", "bench-work/results"))


def add(args):
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{args.name}.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    rows = [r for r in rows if r["work"] != args.work]
    ratio = args.ours / args.peer
    rows.append({
        "work": args.work, "ours": args.ours, "peer": args.peer, "peer_name": args.peer_name,
        "unit": args.unit, "ratio": ratio, "max_ratio": args.max_ratio,
        "met": ratio <= args.max_ratio, "load": open("/proc/loadavg").read().split()[:3],
    })
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, indent=1))
    tmp.replace(path)


def fmt(value, unit):
    if unit == "s":
        return f"{value:.3f} s"
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def target_text(max_ratio):
    return f"<= {max_ratio:g}x" if max_ratio >= 1 else f">= {1 / max_ratio:g}x faster"


def ratio_text(ratio, max_ratio):
    return f"{ratio:.2f}x" if max_ratio >= 1 else f"{1 / ratio:.2f}x faster"


def table(args):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    lines = [
        f"Commit {commit}{' (with uncommitted changes)' if dirty else ''}, "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{os.cpu_count()} cores, load average {' '.join(open('/proc/loadavg').read().split()[:3])} "
        "at the end of the run.",
        "",
        "| benchmark | work | ours | limit / peer | ratio | target | met | load while measured |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(RESULTS.glob("*.json")):
        for r in json.loads(path.read_text()):
            lines.append(
                f"| {path.stem} | {r['work']} | {fmt(r['ours'], r['unit'])} | "
                f"{r['peer_name']}: {fmt(r['peer'], r['unit'])} | "
                f"{ratio_text(r['ratio'], r['max_ratio'])} | {target_text(r['max_ratio'])} | "
                f"{'yes' if r['met'] else '**no**'} | {' '.join(r['load'])} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    sys.stdout.write(text)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("add")
    a.add_argument("name")
    a.add_argument("--work", required=True)
    a.add_argument("--ours", type=float, required=True)
    a.add_argument("--peer", type=float, required=True)
    a.add_argument("--peer-name", required=True)
    a.add_argument("--max-ratio", type=float, required=True)
    a.add_argument("--unit", default="s")
    t = sub.add_parser("table")
    t.add_argument("--out")
    args = parser.parse_args()
    add(args) if args.command == "add" else table(args)


if __name__ == "__main__":
    main()
