#!/usr/bin/env python3
"""Markdown tables from bench/amx_int8.sh's raw output: medians over rounds
(range in brackets) of prefill GFLOP/s by CPU time (1 and 2 threads), of
decode GB/s by CPU time with the read probe, and of colibri bench's prefill
and decode tok/s, old binary against new. usage: amx_int8_summary.py RAW"""
import re
import statistics
import sys
from collections import defaultdict


def med(v):
    return "%.1f (%.1f-%.1f)" % (statistics.median(v), min(v), max(v)) if v else "-"


def main(path):
    pre = defaultdict(list)     # (threads, level, fmt) -> GFLOP/s cpu
    dec = defaultdict(list)     # (level, fmt) -> GB/s cpu
    e2e = defaultdict(list)     # (bin, fmt, what) -> tok/s
    peak = {}
    for line in open(path):
        m = re.match(r"prefill-(\d)t r\d+ (\S+) (\S+) n=\d+ .*? cpu-time median ([\d.]+)", line)
        if m:
            pre[(m[1], m[2], m[3])].append(float(m[4]))
            continue
        m = re.match(r"decode r\d+ read probe.* cpu-time median ([\d.]+)\s*$", line)
        if m:
            dec[("probe", "read")].append(float(m[1]))
            continue
        m = re.match(r"decode r\d+ (\S+) (\S+) .* cpu-time median ([\d.]+)\s*$", line)
        if m:
            dec[(m[1], m[2])].append(float(m[3]))
            continue
        m = re.match(r"e2e (\S+) (\S+) r\d+ model=.*\(([\d.]+) tok/s\) decode=.*\(([\d.]+) tok/s\)", line)
        if m:
            e2e[(m[1], m[2], "prefill")].append(float(m[3]))
            e2e[(m[1], m[2], "decode")].append(float(m[4]))
            continue
        m = re.match(r"peak \| (.+?) \| ([\d.]+) \| ([\d.]+) \|", line)
        if m and m[1] not in peak:
            peak[m[1]] = (float(m[2]), float(m[3]))
    vnni = next((v for k, v in peak.items() if "vpdpbusd" in k), (0, 0))
    amx = next((v for k, v in peak.items() if "tdpbssd" in k), (0, 0))
    fmts = sorted({k[2] for k in pre}, key=lambda f: ["q8", "q4", "q4g32", "q4g64", "q4g128"].index(f))
    for t in ("1", "2"):
        ti = int(t) - 1
        print("\n**Prefill, n = 512, 2048 x 7168, %s thread%s, GFLOP/s by CPU time**\n" % (t, "s" if t == "2" else ""))
        print("| format | avx512vbmi | of VPDPBUSD peak | amx | of VPDPBUSD peak | of AMX-INT8 peak | amx / avx512vbmi |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for f in fmts:
            a, b = pre[(t, "avx512vbmi", f)], pre[(t, "amx", f)]
            ma, mb = statistics.median(a), statistics.median(b)
            print("| %s | %s | %.0f%% | %s | %.0f%% | %.1f%% | %.2fx |" % (
                f, med(a), 100 * ma / vnni[ti], med(b), 100 * mb / vnni[ti], 100 * mb / amx[ti], mb / ma))
    print("\n**Decode, n = 1, 65536 x 7168, 1 thread, GB/s by CPU time**\n")
    probe = dec[("probe", "read")]
    print("read probe: %s GB/s\n" % med(probe))
    print("(of probe: against bench/gemm's 8-stream read loop, one variant without software prefetch; dev/readprobe.h's bound, `colibri bench --peak` or `--bw`, reads up to ~1.9x more, so these shares read high and one above 100% is the probe's error)\n")
    print("| format | avx512vbmi | of probe | amx | of probe | amx / avx512vbmi |")
    print("|---|---:|---:|---:|---:|---:|")
    pm = statistics.median(probe)
    for f in fmts:
        a, b = dec[("avx512vbmi", f)], dec[("amx", f)]
        ma, mb = statistics.median(a), statistics.median(b)
        print("| %s | %s | %.0f%% | %s | %.0f%% | %.2fx |" % (f, med(a), 100 * ma / pm, med(b), 100 * mb / pm, mb / ma))
    if e2e:
        print("\n**colibri bench on colibri-tiny, -p 512 -n 32 -t 1 --cpu-time, tok/s (best of 2 per round)**\n")
        print("| weights | prefill old | prefill new | new / old | decode old | decode new | new / old |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for f in sorted({k[1] for k in e2e}):
            po, pn = e2e[("old", f, "prefill")], e2e[("new", f, "prefill")]
            do, dn = e2e[("old", f, "decode")], e2e[("new", f, "decode")]
            print("| %s | %s | %s | %.2fx | %s | %s | %.2fx |" % (
                f, med(po), med(pn), statistics.median(pn) / statistics.median(po),
                med(do), med(dn), statistics.median(dn) / statistics.median(do)))


if __name__ == "__main__":
    main(sys.argv[1])
