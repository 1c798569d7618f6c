#!/usr/bin/env python3
"""Throughput and latency of `colibri serve` at 1, 4 and 16 concurrent clients.

Each client sends streaming completions one after another (greedy, fixed
max_tokens, distinct prompts so no cache prefix is shared beyond BOS) and
records per request: latency (send to [DONE]), time to first token, and the
generated tokens (from the usage chunk). Per concurrency level it prints the
aggregate generated tokens/s over the wall time, p50/p99 latency, p50 TTFT,
the aggregate tokens/s relative to one client (the batching speedup), the
share of the wall time the server spent inside forward passes ("fwd %", from
its /metrics; the rest is HTTP, JSON, sampling and waiting for the CPU), and
the mean number of slots per batched decode call ("batch").

    python3 bench/serve_bench.py -m models/colibri-tiny            # starts a server
    python3 bench/serve_bench.py --url http://127.0.0.1:8080       # uses a running one

Standard library only (http.client), so the client costs little CPU next to
the server on a small machine.
"""
import argparse
import http.client
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time


def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def one_request(host, port, key, model, prompt, max_tokens):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}})
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=600)
    conn.request("POST", "/v1/completions", body, headers)
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]!r}")
    ttft, tokens, buf = None, 0, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: "):
                continue
            data = event[6:]
            if data == b"[DONE]":
                continue
            obj = json.loads(data)
            if obj.get("choices") and obj["choices"][0].get("text") and ttft is None:
                ttft = time.perf_counter() - t0
            if obj.get("usage"):
                tokens = obj["usage"]["completion_tokens"]
    conn.close()
    return time.perf_counter() - t0, ttft if ttft is not None else float("nan"), tokens


def scrape(host, port, key):
    """The server's counters from /metrics (name with labels -> value)."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", "/metrics", headers={"Authorization": "Bearer " + key} if key else {})
    out = {}
    for line in conn.getresponse().read().decode().splitlines():
        if line and not line.startswith("#"):
            name, val = line.rsplit(" ", 1)
            out[name] = float(val)
    conn.close()
    return out


def run_level(host, port, key, model, clients, per_client, max_tokens, base):
    lat, ttft, toks, errors = [], [], [], []
    lock = threading.Lock()

    def client(ci):
        for k in range(per_client):
            prompt = f"{base + ci * per_client + k}. Once upon a time, in a land far away, there lived"
            try:
                l, t, n = one_request(host, port, key, model, prompt, max_tokens)
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(str(e))
                continue
            with lock:
                lat.append(l)
                ttft.append(t)
                toks.append(n)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    m0 = scrape(host, port, key)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    m1 = scrape(host, port, key)
    d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
    fwd = d.get('colibri_forward_seconds_total{phase="prefill"}', 0) + \
        d.get('colibri_forward_seconds_total{phase="decode"}', 0)
    calls = d.get("colibri_decode_calls_total", 0)
    return {"forward_s": fwd, "forward_share": fwd / wall if wall > 0 else 0,
            "slots_per_decode": d.get("colibri_generated_tokens_total", 0) / calls if calls else 0,
            "clients": clients, "requests": len(lat), "errors": len(errors), "tokens": sum(toks),
            "wall_s": wall, "tok_s": sum(toks) / wall if wall > 0 else 0,
            "p50_s": percentile(lat, 50), "p99_s": percentile(lat, 99), "ttft_p50_s": percentile(ttft, 50),
            "first_error": errors[0] if errors else None}


def start_server(colibri, model_dir, slots, ctx, extra):
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    cmd = [colibri, "serve", "-m", model_dir, "--port", "0", "--slots", str(slots)] + \
          (["--ctx", str(ctx)] if ctx else []) + extra
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        time.sleep(0.05)
        text = open(log.name).read()
        m = re.search(r"listening on http://[^:]+:(\d+)", text)
        if m:
            return proc, int(m.group(1)), log.name
        if proc.poll() is not None:
            sys.exit(f"server exited: {text}")
    proc.kill()
    sys.exit("server did not start in 30 s")


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", help="model directory: start a server on it")
    ap.add_argument("--url", help="use a running server instead")
    ap.add_argument("--key", default=os.environ.get("COLIBRI_API_KEY", ""))
    ap.add_argument("--colibri", default="./build/colibri" if os.path.exists("./build/colibri") else "./colibri")
    ap.add_argument("--levels", default="1,4,16")
    ap.add_argument("--requests", type=int, default=32, help="requests per level (split over the clients)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=0)
    ap.add_argument("--server-args", default="", help="extra arguments for colibri serve")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    proc = None
    if a.url:
        m = re.match(r"http://([^:/]+):(\d+)", a.url)
        host, port = m.group(1), int(m.group(2))
    elif a.model:
        proc, port, _ = start_server(a.colibri, a.model, max(levels), a.ctx, a.server_args.split())
        host = "127.0.0.1"
    else:
        ap.error("give -m DIR or --url URL")
    try:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.request("GET", "/v1/models", headers={"Authorization": "Bearer " + a.key} if a.key else {})
        model = json.loads(conn.getresponse().read())["data"][0]["id"]
        one_request(host, port, a.key, model, "warm up", 4)
        print(f"# colibri serve bench: model {model}, max_tokens {a.max_tokens}, greedy, streaming")
        print(f"# machine: {machine()}")
        print(f"{'clients':>7} {'reqs':>5} {'tokens':>7} {'wall s':>7} {'tok/s':>8} {'p50 s':>7} {'p99 s':>7} "
              f"{'ttft50 s':>8} {'vs 1':>6} {'fwd %':>6} {'batch':>6}")
        results, base = [], 0
        for c in levels:
            per_client = max(1, a.requests // c)
            r = run_level(host, port, a.key, model, c, per_client, a.max_tokens, base)
            base += c * per_client
            results.append(r)
            ratio = r["tok_s"] / results[0]["tok_s"] if results[0]["tok_s"] else float("nan")
            r["speedup_vs_1"] = ratio
            print(f"{c:>7} {r['requests']:>5} {r['tokens']:>7} {r['wall_s']:>7.2f} {r['tok_s']:>8.1f} "
                  f"{r['p50_s']:>7.3f} {r['p99_s']:>7.3f} {r['ttft_p50_s']:>8.3f} {ratio:>6.2f} "
                  f"{100 * r['forward_share']:>6.1f} {r['slots_per_decode']:>6.2f}"
                  + (f"  ({r['errors']} errors: {r['first_error']})" if r["errors"] else ""), flush=True)
        if a.json:
            json.dump({"model": model, "machine": machine(), "max_tokens": a.max_tokens, "levels": results},
                      open(a.json, "w"), indent=1)
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
