#!/usr/bin/env python3
"""Markdown tables from bench/amx_slice.sh's raw output: per n and thread
count, the medians over rounds (range in brackets) of GFLOP/s (by CPU time on 1
thread, by wall clock on 2) for
the AVX-512 level, the old build's AMX level and this build's, with this
build's AMX figure over the AVX-512 one and over the old AMX one, and as a
share of the run's VPDPBUSD and TDPBSSD peaks (medians of the rounds).
usage: amx_slice_summary.py RAW"""
import re
import statistics
import sys
from collections import defaultdict

FMTS = ["q8", "q4", "q4g32", "q4g64", "q4g128"]


def cell(v):
    return "%.0f (%.0f-%.0f)" % (statistics.median(v), min(v), max(v)) if v else "-"


def main(path):
    rate = defaultdict(list)    # (threads, n, build, level, fmt) -> GFLOP/s by CPU time
    peak = defaultdict(list)    # (instruction, threads) -> G op/s
    for line in open(path):
        if line.startswith("machine:"):
            print("Machine:%s.\n" % line.split(":", 1)[1].rstrip())
        m = re.match(r"slice-(\d)t r\d+ (old|new) (\S+) (\S+) n=(\d+) .*? wall median ([\d.]+) .*? "
                     r"cpu-time median ([\d.]+)", line)
        if m:
            # 1 thread by CPU time; 2 threads by wall clock (a thread's CPU time
            # leaves out the other's share of the call)
            rate[(m[1], m[5], m[2], m[3], m[4])].append(float(m[7] if m[1] == "1" else m[6]))
            continue
        m = re.match(r"peak r\d+ \| (.+?) \| ([\d.]+) \| ([\d.]+) \|", line)
        if m:
            peak[(m[1], "1")].append(float(m[2]))
            peak[(m[1], "2")].append(float(m[3]))
    print("| instruction | 1 thread | 2 threads |\n|---|---:|---:|")
    for name in sorted({k[0] for k in peak}):
        print("| %s | %s | %s |" % (name, cell(peak[(name, "1")]), cell(peak[(name, "2")])))
    pk = {t: (statistics.median(next(v for k, v in peak.items() if "vpdpbusd" in k[0] and k[1] == t)),
              statistics.median(next(v for k, v in peak.items() if "tdpbssd" in k[0] and k[1] == t)))
          for t in ("1", "2")}
    for n in ("512", "48"):
        for t in ("1", "2"):
            print("\n**n = %s, W 2048 x 7168, %s: GFLOP/s**\n"
                  % (n, "1 thread, by CPU time" if t == "1" else "2 threads, by wall clock"))
            print("| format | avx512vbmi | amx old | amx new | new / old | amx new / avx512vbmi "
                  "| avx512vbmi of VPDPBUSD peak | amx new of TDPBSSD peak |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|")
            for f in FMTS:
                a, o, w = (rate[(t, n, "new", "avx512vbmi", f)], rate[(t, n, "old", "amx", f)],
                           rate[(t, n, "new", "amx", f)])
                if not (a and o and w):
                    continue
                ma, mo, mw = statistics.median(a), statistics.median(o), statistics.median(w)
                print("| %s | %s | %s | %s | %.2fx | %.2fx | %.0f%% | %.1f%% |" % (
                    f, cell(a), cell(o), cell(w), mw / mo, mw / ma, 100 * ma / pk[t][0], 100 * mw / pk[t][1]))


if __name__ == "__main__":
    main(sys.argv[1])
