#!/usr/bin/env python3
"""bench/gemm_summary.py - medians over the rounds of bench/gemm.sh output, as
markdown: prefill GFLOP/s per format (old, new, ratio, fraction of the
instruction's peak), decode GB/s per format against the read probe. Both builds'
decode rates are divided by the new build's probe (since gemm-results-3 it reads
8 vector streams per thread; an old build's probe, one scalar stream, read slower
than some matvecs on Ice Lake-SP and is shown for reference only)."""
import re
import statistics as st
import sys

pre, dec, probe, peak = {}, {}, {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if line.startswith("peak |") and "G op/s" not in line and "---" not in line:
        cells = [c.strip() for c in line[5:].strip().strip("|").split("|")]
        if cells[1] == "not available":     # e.g. bf16 dot on a CPU without AVX-512 BF16
            continue
        peak.setdefault(cells[0].split()[0] + " " + cells[0].split()[1], []).append((float(cells[1]), float(cells[2])))
    if f[0] not in ("prefill", "decode"):
        continue
    phase, b = f[0], f[1]
    thr = int(re.search(r"threads=(\d+)", line).group(1))
    if "read probe" in line:
        probe.setdefault((b, thr), []).append((float(f[-4]), float(f[-1])))
        continue
    fmt = f[4]
    wall = float(f[f.index("wall") + 2])
    cpu = float(f[f.index("cpu-time") + 2])
    gbw, gbc = float(f[-4]), float(f[-1])
    if phase == "prefill":
        pre.setdefault((fmt, b, thr), []).append((wall, cpu))
    else:
        dec.setdefault((fmt, b, thr), []).append((gbw, gbc))


def med(v, i):
    return st.median(x[i] for x in v)


def rng(v, i):
    return "%.0f-%.0f" % (min(x[i] for x in v), max(x[i] for x in v))


# bf16act runs on AMX tiles where the CPU has them (the peak table then has the row)
INSN = {"q8": "int8 dot", "q4": "int8 dot", "q4g32": "int8 dot", "q4g64": "int8 dot",
        "q4g128": "int8 dot", "bf16act": "amx-bf16 tile" if "amx-bf16 tile" in peak else "bf16 dot",
        "bf16act-avx512": "bf16 dot"}
fmts = ["f32", "bf16", "f16", "q8", "q4", "q4g32", "q4g64", "q4g128", "fp8b", "bf16act", "bf16act-avx512"]
print("### compute peaks, median of the rounds (range), G op/s\n")
print("| instruction | 1 thread | 2 threads |\n|---|---:|---:|")
for k, v in peak.items():
    print(f"| {k} | {med(v, 0):.0f} ({rng(v, 0)}) | {med(v, 1):.0f} ({rng(v, 1)}) |")
for thr in (1, 2):
    print(f"\n### prefill, {thr} thread(s): GFLOP/s, W 4096 x 7168, n = 256 (median of rounds; range)\n")
    print("| format | old (CPU time) | new (CPU time) | new / old | instruction | of its peak | old wall | new wall |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for fm in fmts:
        o, n = pre.get((fm, "old", thr)), pre.get((fm, "new", thr))
        if not n:
            continue
        insn = INSN.get(fm, "fp32 FMA")
        pk = st.median(p[0 if thr == 1 else 1] for p in peak[insn])
        oc = "%.0f (%s)" % (med(o, 1), rng(o, 1)) if o else "-"
        ratio = "%.2fx" % (med(n, 1) / med(o, 1)) if o else "-"
        ow = "%.0f" % med(o, 0) if o else "-"
        print(f"| {fm} | {oc} | {med(n, 1):.0f} ({rng(n, 1)}) | {ratio} | {insn} | "
              f"{100 * med(n, 1) / pk:.0f}% | {ow} | {med(n, 0):.0f} |")
    print(f"\n### decode (matvec), {thr} thread(s): GB/s of weights, W 8192 x 7168 (median of rounds; range)\n")
    po, pn = probe.get(("old", thr)), probe.get(("new", thr))
    print(f"read probe, CPU time: old binary's {med(po, 1):.1f} GB/s, new binary's {med(pn, 1):.1f} GB/s "
          f"(wall {med(po, 0):.1f} / {med(pn, 0):.1f}); both of-probe columns divide by the new binary's\n")
    print("(of probe: against bench/gemm's 8-stream read loop, one variant without software prefetch; dev/readprobe.h's bound, `colibri bench --peak` or `--bw`, reads up to ~1.9x more, so these shares read high and one above 100% is the probe's error)\n")
    print("| format | old (CPU time) | new (CPU time) | new / old | old of probe | new of probe | old wall | new wall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for fm in fmts:
        o, n = dec.get((fm, "old", thr)), dec.get((fm, "new", thr))
        if not o or not n:
            continue
        print(f"| {fm} | {med(o, 1):.1f} ({rng(o, 1)}) | {med(n, 1):.1f} ({rng(n, 1)}) | "
              f"{med(n, 1) / med(o, 1):.2f}x | {100 * med(o, 1) / med(pn, 1):.0f}% | "
              f"{100 * med(n, 1) / med(pn, 1):.0f}% | {med(o, 0):.1f} | {med(n, 0):.1f} |")
