#!/usr/bin/env python3
"""Large requests are prepared off the HTTP event-loop threads (issue 37
item 2): sixteen chat requests of about 3.8 MB each (a long message: parsing,
template and tokenization take a while, then the prompt is refused as over
the context) arrive together while a canary client sends small completions.
Were they prepared on the 4 event-loop threads, those would all be busy and
the canary would wait for one to finish; 95% of the canary's requests must be
answered in under the time one large request takes alone (its very worst is
left to the machine: on a loaded 2-core host one preemption exceeds it), and
every large request must get its answer (none closed unanswered). Relative,
so machine load moves both sides alike.

usage: test_large_prep.py URL   (a server on colibri-tiny, --max-body 4096 or more)
Prints the numbers and "N passed, N failed"; exits 1 on failure.
"""
import json
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

URL = sys.argv[1]
WORDS = " ".join(f"word{i % 997} and more text" for i in range(175000))
BIG = json.dumps({"messages": [{"role": "user", "content": WORDS}], "max_tokens": 1}).encode()


def post(path, body, timeout=120):
    req = urllib.request.Request(URL + path, body, {"Content-Type": "application/json"})
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        e.read()
        status = e.code
    except OSError as e:
        status = repr(e)[:80]
    return time.monotonic() - t, status


def p95(xs):
    xs = sorted(xs or [0])
    return xs[min(len(xs) - 1, int(0.95 * len(xs)))]


def main():
    alone = min(post("/v1/chat/completions", BIG)[0] for _ in range(2))
    big = []
    th = [threading.Thread(target=lambda: big.append(post("/v1/chat/completions", BIG))) for _ in range(16)]
    for t in th:
        t.start()
    time.sleep(0.3)
    small = json.dumps({"prompt": "Hi", "max_tokens": 1, "temperature": 0}).encode()
    canary = []
    while any(t.is_alive() for t in th):
        canary.append(post("/v1/completions", small, 60))
    for t in th:
        t.join()
    lat = [d for d, _ in canary]
    print(f"large request ({len(BIG)} bytes) alone: {alone:.2f} s; sixteen at once: {sorted(round(d, 1) for d, _ in big)} s, statuses "
          f"{sorted(set(str(s) for _, s in big))}; canary n={len(canary)} median "
          f"{statistics.median(lat or [0])*1e3:.0f} ms p95 {p95(lat)*1e3:.0f} ms max {max(lat or [0])*1e3:.0f} ms")
    failed = []
    if any(s != 400 for _, s in big):
        failed.append(f"large requests not answered 400 (prompt over the context): {[s for _, s in big]}")
    if any(s != 200 for _, s in canary):
        failed.append(f"canary statuses {set(s for _, s in canary)}")
    if len(canary) < 2:
        failed.append(f"only {len(canary)} canary requests ran during the large ones")
    elif not p95(lat) < alone:
        failed.append(f"canary 95th percentile {p95(lat)*1e3:.0f} ms is not under a large request's time alone "
                      f"({alone*1e3:.0f} ms)")
    for f in failed:
        print("FAIL " + f)
    print(f"{0 if failed else 1} passed, {1 if failed else 0} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
