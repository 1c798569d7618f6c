#!/usr/bin/env python3
"""bench/kvb_summary.py - the tables of bench/kvb.sh's raw output: decode
tok/s per configuration (median and range over the rounds), each against the
old default (old-copy), the share of the read bound the one-thread decode
reaches (bench --bw: bytes per token as the build reads them, the copy
counted when it is kept), and the model's memory."""
import re
import statistics
import sys

CFGS = ["old-copy", "old-rows", "new-rows", "new-copy"]


def cell(xs):
    if not xs:
        return "-"
    return "%.1f (%.1f-%.1f)" % (statistics.median(xs), min(xs), max(xs))


def main():
    tok, frac, mem = {}, {}, {}
    fmts = []
    for line in open(sys.argv[1]):
        if line.startswith(("machine:", "loadavg")):
            print(line.rstrip() + "  ")
            continue
        m = re.match(r"(t[12]) (\S+) (\S+) r\d+ (.*)", line)
        if not m:
            continue
        t, cfg, f, rest = m.groups()
        if f not in fmts:
            fmts.append(f)
        d = re.search(r"decode=\d+ tok in \S+ s \(([\d.]+) tok/s\)", rest)
        if d:
            tok.setdefault((t, cfg, f), []).append(float(d.group(1)))
        b = re.search(r"reaches (\d+)% of it", rest)
        if b:
            frac.setdefault((cfg, f), []).append(float(b.group(1)))
        mm = re.match(r"memory: model ([\d.]+) MiB", rest)
        if mm:
            mem[(cfg, f)] = float(mm.group(1))
    for t, title in (("t1", "1 thread (process CPU time)"), ("t2", "2 threads (wall clock)")):
        print("\n### Decode tok/s, %s\n" % title)
        print("| weights | " + " | ".join(CFGS) + " | new-rows / old-copy |")
        print("|---|" + "---|" * (len(CFGS) + 1))
        for f in fmts:
            base = tok.get((t, "old-copy", f))
            new = tok.get((t, "new-rows", f))
            r = "%.2fx" % (statistics.median(new) / statistics.median(base)) if base and new else "-"
            print("| %s | " % f + " | ".join(cell(tok.get((t, c, f))) for c in CFGS) + " | %s |" % r)
    print("\n### 1 thread: share of the read bound (%), and the model's memory (MiB)\n")
    print("| weights | " + " | ".join(CFGS) + " | memory copy / rows |")
    print("|---|" + "---|" * (len(CFGS) + 1))
    for f in fmts:
        print("| %s | " % f + " | ".join(cell(frac.get((c, f))) for c in CFGS) +
              " | %.1f / %.1f |" % (mem.get(("new-copy", f), 0), mem.get(("new-rows", f), 0)))


main()
