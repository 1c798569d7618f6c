#!/usr/bin/env python3
"""bench/amx_bf16_summary.py - medians over the rounds of bench/amx_bf16.sh
output, as markdown: the 1-thread compute peaks; prefill GFLOP/s (CPU time)
per product with its fraction of its own instruction's peak and its ratio to
the bf16 (f32-activation) path, each taken per round then the median; decode
GB/s against the read probes of the same round.

usage: python3 bench/amx_bf16_summary.py raw.txt"""
import re
import statistics as st
import sys

pk, pre, dec, probe = {}, {}, {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if not f: continue
    if f[0] == "peak" and "|" in line and "G op/s" not in line and "---" not in line:
        r = f[1]; cells = [c.strip() for c in line.split("|")[1:-1]]
        key = " ".join(cells[0].split()[:2]); pk.setdefault(key, {})[r] = float(cells[1])
    elif f[0] in ("prefill", "decode"):
        r = f[1]
        if "read probe" in line:
            probe.setdefault(r, []).append(float(f[-1])); continue
        fmt = f[3]; rows = int(re.search(r"rows=(\d+)", line).group(1))
        cpu = float(line.split("| cpu-time median ")[1].split()[0]); gb = float(f[-1])
        (pre if f[0] == "prefill" else dec).setdefault((fmt, rows), {})[r] = cpu if f[0] == "prefill" else gb
def m(v): return "%.0f (%.0f-%.0f)" % (st.median(v), min(v), max(v))
def m1(v): return "%.1f (%.1f-%.1f)" % (st.median(v), min(v), max(v))
print("| instruction | G op/s, 1 thread, median (range) |\n|---|---:|")
for k, v in pk.items(): print(f"| {k} | {m(list(v.values()))} |")
ins = {"bf16": "fp32 FMA", "bf16act-avx512": "bf16 dot", "bf16act": "amx-bf16 tile"}
for rows in (2048, 512):
    print(f"\nprefill n = 512, W {rows} x 7168, 1 thread, GFLOP/s by CPU time, median of rounds (range)\n")
    print("| product | GFLOP/s | instruction | of its peak (per round, median) | vs bf16 (per round, median) |\n|---|---:|---|---:|---:|")
    for fm in ("bf16", "bf16act-avx512", "bf16act"):
        v = pre[(fm, rows)]
        fr = [100 * v[r] / pk[ins[fm]][r] for r in v]
        vs = [v[r] / pre[("bf16", rows)][r] for r in v]
        print(f"| {fm} | {m(list(v.values()))} | {ins[fm]} | {st.median(fr):.1f}% ({min(fr):.1f}-{max(fr):.1f}) | {st.median(vs):.2f}x |")
print("\ndecode n = 1, W 32768 x 7168 (448 MiB), 1 thread, GB/s by CPU time, median of rounds (range)\n")
pr = {r: st.mean(v) for r, v in probe.items()}
print(f"read probe (mean of the two around the products, per round): {m1(list(pr.values()))}\n")
print("(of probe: against bench/gemm's 8-stream read loop, one variant without software prefetch; dev/readprobe.h's bound, `colibri bench --peak` or `--bw`, reads up to ~1.9x more, so these shares read high and one above 100% is the probe's error)\n")
print("| product | GB/s | of the read probe (per round, median) | vs bf16act-avx512 |\n|---|---:|---:|---:|")
for fm in ("bf16", "bf16act-avx512", "bf16act"):
    v = dec[(fm, 32768)]
    fr = [100 * v[r] / pr[r] for r in v]
    vs = [v[r] / dec[("bf16act-avx512", 32768)][r] for r in v]
    print(f"| {fm} | {m1(list(v.values()))} | {st.median(fr):.0f}% ({min(fr):.0f}-{max(fr):.0f}) | {st.median(vs):.3f}x |")
