#!/usr/bin/env python3
"""One prompt of bench/mtp_auto.py's protocol (the first held-out *Persuasion*
prompt, greedy, -t 1), `colibri run -n 1` (load + prefill) and `-n 128`, each
mode in turn per repetition (the order alternating): process CPU time of each
run, median (range), and off's over each mode's. It isolates what --mtp auto
costs before and around its first probe.

Usage (repository root, after make):
  python3 bench/mtp_auto_prefill.py --persuasion data/persuasion.txt [--reps 30]
      [--colibri build/colibri] [--modes "off|auto --draft 2"]
"""
import argparse
import resource
import statistics
import subprocess

from mtp_auto import prompts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--colibri", default="build/colibri")
    ap.add_argument("--model", default="models/colibri-tiny")
    ap.add_argument("--persuasion", required=True)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--modes", default="off|auto --draft 2")
    a = ap.parse_args()
    p = prompts(a.persuasion)[0]
    modes = a.modes.split("|")
    for n in (1, 128):
        res = {m: [] for m in modes}
        for rep in range(a.reps):
            for m in (modes if rep % 2 == 0 else modes[::-1]):
                args = [a.colibri, "run", "-m", a.model, "-p", p, "-n", str(n), "-t", "1", "--temp", "0",
                        "--no-display-prompt"] + (["--mtp"] + m.split() if m != "off" else [])
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run(args, capture_output=True, check=True)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                res[m].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        for m, v in res.items():
            r = [x / y for x, y in zip(res[modes[0]], v)]
            print("-n %d %s: CPU s median %.4f (%.4f-%.4f); %s/this %.3f (%.3f-%.3f)" % (
                n, m, statistics.median(v), min(v), max(v), modes[0], statistics.median(r), min(r), max(r)))


if __name__ == "__main__":
    main()
