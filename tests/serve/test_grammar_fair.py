#!/usr/bin/env python3
"""A grammar request never holds other clients back (issue 37 item 1): three
requests with a grammar whose token mask is costly run while a canary client
sends 1-token completions. The canary's median latency under that load must
stay under half of a grammar request's time per token: were the grammar's
sampling inside the shared scheduler step, every canary request would wait
for at least one step holding the three masks, so its latency would be at
least that time per token. Relative, so the load others put on the machine
moves both sides alike.

usage: test_grammar_fair.py URL   (a server on colibri-tiny with --slots 4)
Prints the numbers and "N passed, N failed"; exits 1 on failure.
"""
import json
import statistics
import sys
import threading
import time
import urllib.request

URL = sys.argv[1]
N_RULES = 150
N_RANGES = 600


def costly_grammar():
    """Lower-case letters, spelled so that each advance costs: 150 live
    stacks (one per rule r_i, kept apart by its own empty rule e_i), each
    checking a letter against a class of 600 excluded ranges (one ASCII
    range repeated, then all of U+007B and above in one, so that a partial
    UTF-8 character is refused at its first byte), and a counted repetition
    so that no two positions share a set (the mask walk cannot reuse an
    earlier answer)."""
    cls = "[^" + "\\x00-`" * (N_RANGES - 1) + "{-\\U0010FFFF]"
    return ("root ::= x{0,1000}\nx ::= " + " | ".join(f"r{i}" for i in range(N_RULES)) + "\n" +
            "".join(f"r{i} ::= c e{i}\ne{i} ::= \"\"\n" for i in range(N_RULES)) + "c ::= " + cls + "\n")


GRAMMAR = costly_grammar()


def post(body, timeout=300):
    req = urllib.request.Request(URL + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.loads(r.read())
    return time.monotonic() - t, out


def canary(i):
    return post({"prompt": f"Hello {i}", "max_tokens": 1, "temperature": 0})[0]


def main():
    quiet = [canary(i) for i in range(5)]
    hostile, errors = [], []

    def one(seed):
        try:
            d, out = post({"prompt": "Write", "max_tokens": 24, "temperature": 1.0, "seed": seed, "grammar": GRAMMAR})
            hostile.append((d, out["usage"]["completion_tokens"], out["choices"][0]["text"]))
        except Exception as e:  # noqa: BLE001 - reported as a failure below
            errors.append(repr(e))

    th = [threading.Thread(target=one, args=(s,)) for s in range(3)]
    for t in th:
        t.start()
    time.sleep(0.5)
    loaded = []
    while any(t.is_alive() for t in th) and len(loaded) < 40:
        loaded.append(canary(100 + len(loaded)))
    for t in th:
        t.join()
    per_token = statistics.median(d / max(n, 1) for d, n, _ in hostile) if hostile else 0
    med = statistics.median(loaded) if loaded else float("inf")
    print(f"canary quiet: median {statistics.median(quiet)*1e3:.0f} ms; under 3 grammar requests: n={len(loaded)} "
          f"median {med*1e3:.0f} ms max {max(loaded or [0])*1e3:.0f} ms; grammar requests: "
          f"{[f'{d:.1f}s/{n}tok' for d, n, _ in hostile]}, {per_token*1e3:.0f} ms per token")
    failed = []
    if errors or len(hostile) != 3:
        failed.append(f"grammar requests failed: {errors}")
    if any(n < 10 or not all("a" <= c <= "z" for c in text) for _, n, text in hostile):
        failed.append(f"grammar replies: {[(n, text) for _, n, text in hostile]}")
    if len(loaded) < 3:
        failed.append(f"only {len(loaded)} canary requests ran during the grammar requests")
    elif not med < per_token / 2:
        failed.append(f"canary median {med*1e3:.0f} ms is not under half a grammar token ({per_token*1e3:.0f} ms)")
    for f in failed:
        print("FAIL " + f)
    print(f"{0 if failed else 1} passed, {1 if failed else 0} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
