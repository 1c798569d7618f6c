#!/usr/bin/env python3
"""--mtp auto against off and on, on colibri-tiny: the protocol of
bench/mtp-results.md. 12 prompts of 40 words from held-out Persuasion (the
first words of 12 evenly spaced paragraphs longer than 300 characters), 128
tokens each, one thread; the modes interleaved per prompt, repetitions
interleaved too. Per mode and repetition: the 12 runs' process CPU time
(user + sys of the child: load, prefill with the MTP rows, decode; with -t 1
the compute the run cost) and their decode wall time from the run summary;
the ratio is against --mtp off in the same repetition; medians and ranges
over the repetitions. Also checks every mode printed the same text as off.

Usage: python3 bench/mtp_auto.py --persuasion data/persuasion.txt
       [--colibri build/colibri] [--model models/colibri-tiny] [--reps 3]
       [--temps 0,0.8] [--modes 'off|auto --draft 2|on --draft 1']
(data/persuasion.txt: python3 tools/corpus.py writes it.)
"""
import argparse
import re
import resource
import statistics
import subprocess
import sys


def prompts(path, n=12, words=40):
    paras = [p.replace("\n", " ").strip() for p in open(path, encoding="utf-8").read().split("\n\n")]
    paras = [p for p in paras if len(p) > 300]
    step = len(paras) / n
    return [" ".join(paras[int(i * step)].split()[:words]) for i in range(n)]


def run(a, prompt, temp, mode, seed):
    args = [a.colibri, "run", "-m", a.model, "-p", prompt, "-n", "128", "-t", "1", "--temp", str(temp),
            "--seed", str(seed), "--no-display-prompt"] + (["--mtp"] + mode.split() if mode != "off" else [])
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(args, capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit("%s: %s" % (" ".join(args), p.stderr))
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    m = re.search(r"decode (\d+) tok in ([0-9.]+) s", p.stderr)
    mtp = re.search(r"^mtp: .*$", p.stderr, re.M)
    return p.stdout, cpu, float(m.group(2)), int(m.group(1)), mtp.group(0) if mtp else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--colibri", default="build/colibri")
    ap.add_argument("--model", default="models/colibri-tiny")
    ap.add_argument("--persuasion", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--temps", default="0,0.8")
    ap.add_argument("--modes", default="off|auto --draft 2|on --draft 1")
    a = ap.parse_args()
    ps = prompts(a.persuasion)
    modes = a.modes.split("|")
    temps = [float(t) for t in a.temps.split(",")]
    cpu = {}     # (temp, mode, rep) -> seconds
    wall = {}
    toks = {}
    lines = {}
    same = {}
    for rep in range(a.reps):
        for temp in temps:
            for i, p in enumerate(ps):
                ref = None
                order = modes if (rep + i) % 2 == 0 else modes[::-1]   # alternate which mode goes first
                outs = {}
                for mode in order:
                    out, c, w, n, mtp = run(a, p, temp, mode, seed=i + 1)
                    key = (temp, mode, rep)
                    cpu[key] = cpu.get(key, 0) + c
                    wall[key] = wall.get(key, 0) + w
                    toks[key] = toks.get(key, 0) + n
                    outs[mode] = out
                    if mtp:
                        lines.setdefault((temp, mode), []).append(mtp)
                for mode in modes:
                    same[(temp, mode)] = same.get((temp, mode), True) and outs[mode] == outs["off"]
        print("repetition %d done" % (rep + 1), file=sys.stderr)
    print("| T | mode | CPU tok/s, median (range) | vs off, CPU time | decode tok/s (wall) | vs off, decode wall "
          "| same text as off |")
    print("|---|---|---|---|---|---|---|")
    for temp in temps:
        for mode in modes:
            r = range(a.reps)
            rate = [toks[(temp, mode, k)] / cpu[(temp, mode, k)] for k in r]
            ratio = [cpu[(temp, "off", k)] / cpu[(temp, mode, k)] for k in r]
            drate = [toks[(temp, mode, k)] / wall[(temp, mode, k)] for k in r]
            dratio = [wall[(temp, "off", k)] / wall[(temp, mode, k)] for k in r]
            f = lambda xs, d: "%.*f (%.*f-%.*f)" % (d, statistics.median(xs), d, min(xs), d, max(xs))
            print("| %g | %s | %s | %s | %s | %s | %s |" % (temp, mode, f(rate, 1), f(ratio, 3), f(drate, 1),
                                                         f(dratio, 3), "yes" if same[(temp, mode)] else "NO"))
    for (temp, mode), ls in lines.items():
        print("T %g %s, first prompt of the first repetition: %s" % (temp, mode, ls[0]))


if __name__ == "__main__":
    main()
