#!/usr/bin/env python3
"""Canary latency under grammar load (issue 37 item 1): a 1-token completion's
latency alone ("quiet"), while 3 requests with a 200-alternative grammar
(root ::= x*, x ::= [a-z] | "aa" | "ab" | ...) run ("g200x3"), and while 4
requests with root ::= [a-z]{0,1000} run ("az1000x4"), 200 tokens each at
temperature 1. Start the server with more slots than hostile requests
(--slots 8) so the canary never waits for a slot.

usage: grammar_fair.py URL [ROUNDS]"""
import json, statistics, sys, threading, time, urllib.request

URL = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
ALTS = ["[a-z]"] + ['"%s%s"' % (a, b) for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"][:199]
G200 = "root ::= x*\nx ::= " + " | ".join(ALTS) + "\n"
AZ = "root ::= [a-z]{0,1000}\n"

def post(path, body, timeout=300):
    req = urllib.request.Request(URL + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.loads(r.read())
    return time.monotonic() - t, out

def canary(n, lat):
    for i in range(n):
        d, _ = post("/v1/completions", {"prompt": "Hello %d" % i, "max_tokens": 1, "temperature": 0})
        lat.append(d)

def hostile(gbnf, k, n_tok, times):
    def one(i):
        d, out = post("/v1/completions", {"prompt": "Write", "max_tokens": n_tok, "temperature": 1.0, "seed": i,
                                          "grammar": gbnf})
        times.append((d, out["usage"]["completion_tokens"]))
    th = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    for t in th: t.start()
    return th

def phase(name, gbnf, k, n_tok):
    lat, times = [], []
    th = hostile(gbnf, k, n_tok, times) if gbnf else []
    time.sleep(0.3 if gbnf else 0)
    while True:
        canary(5, lat)
        if not th or not any(t.is_alive() for t in th):
            break
    for t in th: t.join()
    return lat, times

res = {}
for r in range(ROUNDS):
    for name, g, k, n in (("quiet", None, 0, 0), ("g200x3", G200, 3, 200), ("az1000x4", AZ, 4, 200)):
        lat, times = phase(name, g, k, n)
        res.setdefault(name, {"lat": [], "hostile": []})
        res[name]["lat"] += lat
        res[name]["hostile"] += times
        print(f"round {r} {name}: canary n={len(lat)} median {statistics.median(lat)*1e3:.0f} ms max {max(lat)*1e3:.0f} ms"
              + (f"; hostile {[f'{d:.1f}s/{n}tok' for d, n in times]}" if times else ""), flush=True)
for name, v in res.items():
    lat = v["lat"]
    print(f"ALL {name}: canary n={len(lat)} median {statistics.median(lat)*1e3:.0f} ms "
          f"p90 {sorted(lat)[int(0.9*len(lat))]*1e3:.0f} ms max {max(lat)*1e3:.0f} ms")
