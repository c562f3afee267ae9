#!/usr/bin/env python3
"""Times `diff --values --json A B` with two builds in alternating runs (old, new, then new,
old, ...), so that a load that comes and goes on a shared machine falls on both alike; prints
the median wall time and the median CPU time (user + system of the child) of each build and
their ratios.

  bench_alternate.py OLD_BIN NEW_BIN A B [RUNS]     (RUNS per build, default 20; one warm-up)
"""
import resource
import statistics
import subprocess
import sys
import time


def main():
    old, new, a, b = sys.argv[1:5]
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 20
    times = {"old": [], "new": []}
    for i in range(runs + 1):
        order = (("old", old), ("new", new)) if i % 2 == 0 else (("new", new), ("old", old))
        for name, binary in order:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([binary, "diff", "--values", "--json", a, b],
                           stdout=subprocess.DEVNULL, check=False)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if i > 0:
                times[name].append((wall, cpu))
    median = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
              for name, t in times.items()}
    for name, (wall, cpu) in median.items():
        print(f"{name}: wall {wall * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms (medians of {runs})")
    (ow, oc), (nw, nc) = median["old"], median["new"]
    print(f"new / old: wall {nw / ow:.3f}, CPU {nc / oc:.3f}")


if __name__ == "__main__":
    main()
