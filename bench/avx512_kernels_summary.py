#!/usr/bin/env python3
"""Markdown tables from bench/avx512_kernels.sh's raw output: medians over the
rounds (range in brackets) of the compute peaks, of prefill GFLOP/s by CPU
time (n = 256 at 1 and 2 threads, n = 16 at 1 thread) as a fraction of the
peak of the instruction each format runs on, of decode GB/s by CPU time as a
fraction of the read probe, and of colibri bench's prefill and decode tok/s,
old build against new. usage: avx512_kernels_summary.py RAW"""
import re
import statistics
import sys
from collections import defaultdict

FMTS = ["f32", "bf16", "f16", "fp8b", "q8", "q4", "q4g32", "q4g64", "q4g128", "bf16act"]
INT8 = {"q8", "q4", "q4g32", "q4g64", "q4g128"}


def med(v):
    return statistics.median(v) if v else float("nan")


def cell(v, fmt="%.0f"):
    if not v:
        return "-"
    return (fmt + " (" + fmt + "-" + fmt + ")") % (med(v), min(v), max(v))


def main(path):
    peak = defaultdict(lambda: ([], []))    # instruction -> (1 thread, 2 threads)
    pre = defaultdict(list)                 # (kind, threads, build, fmt) -> GFLOP/s cpu
    dec = defaultdict(list)                 # (build, fmt) -> GB/s cpu ("probe" for the probe)
    e2e = defaultdict(list)                 # (build, fmt, "prefill" | "decode") -> tok/s
    machine = ""
    for line in open(path):
        if line.startswith("machine:"):
            machine = line.split(":", 1)[1].strip()
        m = re.match(r"peak r\d+ \| ([^|]+?) \| ([\d.]+) \| ([\d.]+) \|", line)
        if m:
            name = " ".join(m[1].split()[:2])
            peak[name][0].append(float(m[2]))
            peak[name][1].append(float(m[3]))
            continue
        m = re.match(r"(prefill|prefill16)-(\d) (old|new) r\d+ \S+ (\S+) n=\d+ .*? cpu-time median ([\d.]+)", line)
        if m:
            pre[(m[1], m[2], m[3], m[4])].append(float(m[5]))
            continue
        m = re.match(r"decode-1 (old|new) r\d+ read probe .* cpu-time median ([\d.]+)\s*$", line)
        if m:
            dec[(m[1], "probe")].append(float(m[2]))
            continue
        m = re.match(r"decode-1 (old|new) r\d+ \S+ (\S+) n=1 .* cpu-time median ([\d.]+)\s*$", line)
        if m:
            dec[(m[1], m[2])].append(float(m[3]))
            continue
        m = re.match(r"e2e (old|new) (\S+) r\d+ model=.*\(([\d.]+) tok/s\) decode=.*\(([\d.]+) tok/s\)", line)
        if m:
            e2e[(m[1], m[2], "prefill")].append(float(m[3]))
            e2e[(m[1], m[2], "decode")].append(float(m[4]))
    print(f"Machine: {machine}.\n")
    print("### Compute peaks (`colibri bench --peak`), G op/s, median of the rounds (range)\n")
    print("| instruction | 1 thread | 2 threads |\n|---|---:|---:|")
    for k, (one, two) in peak.items():
        print(f"| {k} | {cell(one)} | {cell(two)} |")

    def insn(fm):
        return "int8 dot" if fm in INT8 else "bf16 dot" if fm == "bf16act" else "fp32 FMA"

    for kind, thr, title in (("prefill", "1", "n = 256, W 4096 x 7168, 1 thread"),
                             ("prefill", "2", "n = 256, W 4096 x 7168, 2 threads"),
                             ("prefill16", "1", "n = 16, W 2048 x 7168, 1 thread")):
        print(f"\n### Prefill, {title}: GFLOP/s by CPU time, median of the rounds (range)\n")
        print("| format | old | new | new / old | instruction | new of its peak |")
        print("|---|---:|---:|---:|---|---:|")
        for fm in FMTS:
            o, n = pre.get((kind, thr, "old", fm)), pre.get((kind, thr, "new", fm))
            if not n:
                continue
            pk = med(peak[insn(fm)][int(thr) - 1])
            ratio = "%.2fx" % (med(n) / med(o)) if o else "-"
            print(f"| {fm} | {cell(o)} | {cell(n)} | {ratio} | {insn(fm)} | {100 * med(n) / pk:.0f}% |")
    print("\n### Decode (matvec), n = 1, W 16384 x 7168, 1 thread: GB/s of weights by CPU time\n")
    po, pn = dec.get(("old", "probe")), dec.get(("new", "probe"))
    print(f"Read probe (4 per round, between the formats): old binary {cell(po, '%.1f')}, "
          f"new binary {cell(pn, '%.1f')} GB/s; both of-probe columns divide by the median of all probes.\n")
    print("(of probe: against bench/gemm's 8-stream read loop, one variant without software prefetch; dev/readprobe.h's bound, `colibri bench --peak` or `--bw`, reads up to ~1.9x more, so these shares read high and one above 100% is the probe's error)\n")
    allp = med((po or []) + (pn or []))
    print("| format | old | new | new / old | old of probe | new of probe |")
    print("|---|---:|---:|---:|---:|---:|")
    for fm in FMTS:
        o, n = dec.get(("old", fm)), dec.get(("new", fm))
        if not o or not n:
            continue
        print(f"| {fm} | {cell(o, '%.1f')} | {cell(n, '%.1f')} | {med(n) / med(o):.2f}x | "
              f"{100 * med(o) / allp:.0f}% | {100 * med(n) / allp:.0f}% |")
    print("\n### End to end, `colibri bench -p 512 -n 32 -t 1 --cpu-time`, weights quantized at load: tok/s\n")
    print("| weights | prefill old | prefill new | new / old | decode old | decode new | new / old |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for fm in ["bf16", "fp8b", "q8", "q4g64"]:
        po_, pn_ = e2e.get(("old", fm, "prefill")), e2e.get(("new", fm, "prefill"))
        do_, dn_ = e2e.get(("old", fm, "decode")), e2e.get(("new", fm, "decode"))
        if not pn_:
            continue
        print(f"| {fm} | {cell(po_, '%.1f')} | {cell(pn_, '%.1f')} | {med(pn_) / med(po_):.2f}x | "
              f"{cell(do_, '%.1f')} | {cell(dn_, '%.1f')} | {med(dn_) / med(do_):.2f}x |")


if __name__ == "__main__":
    main(sys.argv[1])
