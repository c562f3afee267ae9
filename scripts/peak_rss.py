#!/usr/bin/env python3
"""Runs a command and prints its wall time and peak resident memory, split as the kernel
counts it: anonymous memory (heap, stacks: what the process allocates) and file-backed pages
(memory-mapped files, which the page cache keeps and reclaims). Sampled from
/proc/PID/status every millisecond; VmHWM is the kernel's own peak of the total.

  peak_rss.py CMD [ARGS...]     prints: seconds peak_anon_MB peak_file_MB vm_hwm_MB exit
"""
import subprocess
import sys
import time


def status(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile", "VmHWM"):
                    fields[key] = int(value.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return fields


start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
peak = {"RssAnon": 0, "RssFile": 0, "VmHWM": 0}
while proc.poll() is None:
    for key, value in status(proc.pid).items():
        peak[key] = max(peak[key], value)
    time.sleep(0.001)
elapsed = time.perf_counter() - start
mb = lambda kb: kb / 1024
print(f"{elapsed:.3f} {mb(peak['RssAnon']):.1f} {mb(peak['RssFile']):.1f} "
      f"{mb(peak['VmHWM']):.1f} {proc.returncode}")
