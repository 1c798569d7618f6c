#!/usr/bin/env python3
"""Requests with a grammar cannot hold every slot (issue 37): six clients
loop over long constrained completions while a canary client sends
1-token completions without a grammar. With --slots 4 the grammar requests
may hold two slots (serve --grammar-slots, default half); the others wait
in the queue and the canary passes them, so it never waits for a grammar
request to end. Were there no cap, every slot would be a grammar request's
and the canary would queue behind them: its latency would be a good part of
a grammar request's time. The check is relative, so a loaded machine moves
both sides alike: the canary's p95 must stay under a tenth of a grammar
request's median time.

usage: test_grammar_slots.py URL   (a server on colibri-tiny with --slots 4)
Prints the numbers and "N passed, N failed"; exits 1 on failure.
"""
import json
import statistics
import sys
import threading
import time
import urllib.request

URL = sys.argv[1]
GRAMMAR = "root ::= [a-z]{400}\n"   # cheap per token; what matters is how long it holds a slot
N_HOSTILE = 6
N_CANARY = 30


def post(body, timeout=300):
    req = urllib.request.Request(URL + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.loads(r.read())
    return time.monotonic() - t, out


def canary(i):
    return post({"prompt": f"Hello {i}", "max_tokens": 1, "temperature": 0})[0]


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def main():
    quiet = [canary(i) for i in range(5)]
    stop = threading.Event()
    hostile, errors = [], []

    def loop(c):
        k = 0
        while not stop.is_set():
            try:
                d, out = post({"prompt": "Write", "max_tokens": 48, "temperature": 1.0, "seed": 100 * c + k,
                               "grammar": GRAMMAR})
                hostile.append((d, out["usage"]["completion_tokens"], out["choices"][0]["text"]))
            except Exception as e:  # noqa: BLE001 - reported as a failure below
                errors.append(repr(e))
                return
            k += 1

    th = [threading.Thread(target=loop, args=(c,)) for c in range(N_HOSTILE)]
    for t in th:
        t.start()
    time.sleep(1.0)   # every slot the cap allows is taken, and grammar jobs wait in the queue
    loaded = [canary(100 + i) for i in range(N_CANARY)]
    stop.set()
    for t in th:
        t.join()
    med = statistics.median(d for d, _, _ in hostile) if hostile else 0
    print(f"canary quiet: median {statistics.median(quiet)*1e3:.0f} ms; beside {N_HOSTILE} grammar clients: "
          f"median {statistics.median(loaded)*1e3:.0f} ms p95 {p95(loaded)*1e3:.0f} ms max {max(loaded)*1e3:.0f} ms; "
          f"{len(hostile)} grammar requests, median {med*1e3:.0f} ms")
    failed = []
    if errors:
        failed.append(f"grammar requests failed: {errors[:3]}")
    if len(hostile) < N_HOSTILE or any(n < 10 or not all("a" <= c <= "z" for c in text) for _, n, text in hostile):
        failed.append(f"grammar replies: {[(n, text) for _, n, text in hostile][:6]}")
    if not p95(loaded) < med / 10:
        failed.append(f"canary p95 {p95(loaded)*1e3:.0f} ms is not under a tenth of a grammar request "
                      f"({med*1e3:.0f} ms)")
    for f in failed:
        print("FAIL " + f)
    print(f"{0 if failed else 1} passed, {1 if failed else 0} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
