#!/usr/bin/env python3
"""bench/gemm_rounds.py - summary of interleaved old/new decode rounds: lines
"old rN <bench/gemm output>" and "new rN ..." (each run's median of its reps),
as a markdown table of the median over rounds (range) of the CPU-time GB/s per
format, new / old, and both against the new binary's read probe (median of its
probe lines over all rounds; an older binary's probe may read one scalar
stream and is listed for reference)."""
import statistics as st
import sys

val = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 3 or f[0] not in ("old", "new"):
        continue
    b = f[0]
    name = "read probe" if "read probe" in line else f[3]
    val.setdefault((name, b), []).append(float(f[-1]))


def cell(v):
    return "%.1f (%.1f-%.1f)" % (st.median(v), min(v), max(v))


probe = st.median(val[("read probe", "new")])
print("(of probe: against bench/gemm's 8-stream read loop, one variant without software prefetch; dev/readprobe.h's bound, `colibri bench --peak` or `--bw`, reads up to ~1.9x more, so these shares read high and one above 100% is the probe's error)\n")
print("| format | old | new | new / old | old of probe | new of probe |")
print("|---|---:|---:|---:|---:|---:|")
print(f"| read probe, new binary (8 streams) | | {cell(val[('read probe', 'new')])} | | | |")
if ("read probe", "old") in val:
    print(f"| read probe, old binary (1 scalar stream) | {cell(val[('read probe', 'old')])} | | | | |")
for name in dict.fromkeys(k[0] for k in val):
    if name == "read probe" or (name, "old") not in val or (name, "new") not in val:
        continue
    o, n = val[(name, "old")], val[(name, "new")]
    print(f"| {name} | {cell(o)} | {cell(n)} | {st.median(n) / st.median(o):.2f}x | "
          f"{100 * st.median(o) / probe:.0f}% | {100 * st.median(n) / probe:.0f}% |")
