#!/usr/bin/env python3
"""RSS of `colibri serve` before and after large request bodies.

usage: rss_probe.py COLIBRI MODEL_DIR [--probes N] [--concurrency C] [--mib M] [--serve-args "..."]
                    [--kinds content,messages,tools]

Starts the server on 127.0.0.1 (any port, --max-body 8192 KiB), sends one
small chat request, reads VmRSS from /proc/PID/status, then for each body
kind sends N rounds of C concurrent chat requests of about M MiB each
(default 4 x 4 x 1.7 MiB) and reads VmRSS after each round, once the
responses are in. Kinds: one message with a long content string; many
short messages; many tools. The responses may be 400 (prompt longer than
the context): the parse, render and tokenization have run by then, which
is what the memory is spent on. Prints one line per reading and a summary
line per kind: baseline, peak, final (MiB). Loopback only.
"""
import argparse
import http.client
import json
import re
import subprocess
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("colibri")
ap.add_argument("model")
ap.add_argument("--probes", type=int, default=4)
ap.add_argument("--concurrency", type=int, default=4)
ap.add_argument("--mib", type=float, default=1.7)
ap.add_argument("--serve-args", default="")
ap.add_argument("--kinds", default="content,messages,tools", help="comma-separated body kinds to send")
a = ap.parse_args()


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


def body(kind, nbytes):
    if kind == "content":
        words = ("The quick brown fox jumps over the lazy dog. " * (nbytes // 45 + 1))[:nbytes]
        return {"messages": [{"role": "user", "content": words}], "max_tokens": 1}
    if kind == "messages":
        n = nbytes // 60
        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i} says hi"}
                for i in range(n)]
        if msgs[-1]["role"] != "user":
            msgs.append({"role": "user", "content": "end"})
        return {"messages": msgs, "max_tokens": 1}
    n = nbytes // 200
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "does a thing " * 4,
                                                "parameters": {"type": "object",
                                                               "properties": {"x": {"type": "string"}}}}}
             for i in range(n)]
    return {"messages": [{"role": "user", "content": "hi"}], "tools": tools, "max_tokens": 1}


def post(port, data, out, i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("POST", "/v1/chat/completions", body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        out[i] = r.status
    except OSError as e:
        out[i] = str(e)
    finally:
        c.close()


cmd = [a.colibri, "serve", "-m", a.model, "--host", "127.0.0.1", "--port", "0", "--threads", "1",
       "--max-body", "8192"] + a.serve_args.split()
srv = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
try:
    port = None
    while port is None:
        line = srv.stderr.readline()
        if not line:
            raise SystemExit("the server did not start")
        m = re.search(r"listening on http://\S*:(\d+)", line)
        port = int(m.group(1)) if m else None
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()   # drain the log
    st = [None]
    post(port, json.dumps(body("content", 100)).encode(), st, 0)
    base = rss_mib(srv.pid)
    print(f"baseline after one small request: {base:.0f} MiB (status {st[0]})", flush=True)
    for kind in a.kinds.split(","):
        data = json.dumps(body(kind, int(a.mib * 2 ** 20))).encode()
        before, peak = rss_mib(srv.pid), 0.0
        for p in range(a.probes):
            out = [None] * a.concurrency
            ts = [threading.Thread(target=post, args=(port, data, out, i)) for i in range(a.concurrency)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            time.sleep(0.2)
            r = rss_mib(srv.pid)
            peak = max(peak, r)
            print(f"{kind}: {len(data) / 2 ** 20:.2f} MiB body x {a.concurrency}, round {p + 1}: RSS {r:.0f} MiB "
                  f"(statuses {sorted(set(map(str, out)))})", flush=True)
        print(f"SUMMARY {kind}: before {before:.0f} MiB, peak {peak:.0f} MiB, after {r:.0f} MiB", flush=True)
    print(f"SUMMARY all: baseline {base:.0f} MiB, final {rss_mib(srv.pid):.0f} MiB", flush=True)
finally:
    srv.terminate()
    try:
        srv.wait(15)
    except subprocess.TimeoutExpired:
        srv.kill()
