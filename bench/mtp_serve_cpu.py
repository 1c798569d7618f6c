#!/usr/bin/env python3
"""colibri serve with --mtp off, on --draft 1 and auto --draft 2 on colibri-tiny:
tokens generated per second of the server process's CPU time (utime + stime
from /proc, so other load on the machine matters less than in wall time),
while tests/serve/mtp_compare.py's eight concurrent requests (greedy and
sampled, chat, streams) run against each in turn, the order alternating per
round; then each server's mtp counters from /metrics.

Usage (repository root, after make): python3 bench/mtp_serve_cpu.py ROUNDS [MODE...]
  MODE is NAME=BINARY:ARGS (ARGS space-separated, e.g.
  "auto-old=/tmp/old/colibri:--mtp auto --draft 2"), to compare builds in one
  run; without MODEs: off, on1 and auto of build/colibri.
"""
import os, re, subprocess, sys, time, urllib.request, statistics, threading, json
sys.path.insert(0, "tests/serve")
import mtp_compare as mc
TCK = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TCK
def gen(url):
    t = urllib.request.urlopen(url + "/metrics").read().decode()
    return float(re.search(r"^colibri_generated_tokens_total (\S+)", t, re.M).group(1))
modes = {"off": ("build/colibri", []), "on1": ("build/colibri", ["--mtp", "on", "--draft", "1"]),
         "auto": ("build/colibri", ["--mtp", "auto", "--draft", "2"])}
if len(sys.argv) > 2:
    modes = {}
    for spec in sys.argv[2:]:
        name, rest = spec.split("=", 1)
        binary, args = rest.split(":", 1)
        modes[name] = (binary, args.split())
srv = {}
for name, (binary, args) in modes.items():
    log = open("/tmp/srv-%s.log" % name, "w")
    p = subprocess.Popen([binary, "serve", "-m", "models/colibri-tiny", "--host", "127.0.0.1", "--port", "0",
                          "--threads", "1", "--slots", "4"] + args, stdout=log, stderr=log)
    for _ in range(100):
        time.sleep(0.1)
        m = re.search(r"127\.0\.0\.1:(\d+)", open("/tmp/srv-%s.log" % name).read())
        if m: break
    srv[name] = (p, "http://127.0.0.1:" + m.group(1))
res = {k: [] for k in modes}
for rnd in range(int(sys.argv[1])):
    for name in (modes if rnd % 2 == 0 else list(modes)[::-1]):
        p, url = srv[name]
        c0, g0 = cpu(p.pid), gen(url)
        mc.run_all(url)
        c1, g1 = cpu(p.pid), gen(url)
        res[name].append((g1 - g0) / (c1 - c0))
for name, v in res.items():
    r = [x / y for x, y in zip(v, res[list(modes)[0]])]
    print("%s: tokens per server CPU second median %.1f (%.1f-%.1f); vs %s %.3f (%.3f-%.3f)" % (
        name, statistics.median(v), min(v), max(v), list(modes)[0], statistics.median(r), min(r), max(r)))
for name, (p, url) in srv.items():
    t = urllib.request.urlopen(url + "/metrics").read().decode()
    print(name, " ".join(l for l in t.splitlines() if l.startswith("colibri_mtp_") and "total" in l or l.startswith("colibri_mtp_tokens")))
    p.terminate()
