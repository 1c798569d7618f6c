#!/usr/bin/env python3
"""Loopback soak test of `colibri serve`: many clients for a fixed time.

    python3 tools/soak.py [--model DIR] [--clients 64] [--seconds 600] [--colibri build/colibri]
    python3 tools/soak.py --url http://127.0.0.1:8080 --pid PID ...     (a server already running)

Without --url it starts its own server on a free 127.0.0.1 port (with the test
model of tests/serve/make_test_model.py unless --model is given) and stops it
with SIGTERM at the end. Each client loops over a mix of requests: plain and
streaming completions and chats, malformed bodies (expect 400), oversized
bodies (expect 413), streams it abandons after the first chunk, slow readers,
/health and /metrics. Every 10 s it prints status counts, p50/p99 latency of
the normal requests, generated tokens/s and the server's RSS.

--hostile N adds N hostile clients beside them (issue 37): completions under a
grammar whose every mask expands 150 x 150 stacks ("grammar_bomb"), chats
with a list of 250 tools and tool_choice "required" ("tool_list": rendered by
--chat-template, default DeepSeek-V3's, then 400 when the prompt is over the
test model's 256-token context), and
sockets from other loopback addresses (127.0.0.2..) that send their headers
one byte a second until the server's deadline closes them ("trickle"). Their
latencies are not counted in the normal requests' p50/p99; run once with and
once without to compare those.

Fails (exit 1) on any 5xx, any connection reset or error the client did not
cause, an unexpected status, or RSS growth past --rss-growth-mib over the RSS
seen after the first 10% of the run. Bounded: every socket has a timeout and
the run ends after --seconds. Loopback only.
"""
import argparse
import collections
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.status = collections.Counter()
        self.lat = []               # seconds, normal requests
        self.tokens = 0
        self.failures = []

    def add(self, kind, status, lat=None, tokens=0):
        with self.mu:
            self.status[f"{kind}:{status}"] += 1
            if lat is not None:
                self.lat.append(lat)
            self.tokens += tokens

    def fail(self, msg):
        with self.mu:
            if len(self.failures) < 50:
                self.failures.append(msg)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


class Client:
    counted = True              # latencies go into the normal requests' p50/p99

    def __init__(self, host, port, key, model, stats, rng, max_body):
        self.host, self.port, self.key, self.model = host, port, key, model
        self.stats, self.rng, self.max_body = stats, rng, max_body

    def headers(self):
        h = {"Content-Type": "application/json"}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        return h

    def conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=120)

    def request(self, kind, method, path, body=None, expect=(200,)):
        t0 = time.time()
        c = self.conn()
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            c.request(method, path, body=data, headers=self.headers())
            r = c.getresponse()
            text = r.read()
            lat = time.time() - t0
            if r.status not in expect:
                self.stats.fail(f"{kind}: status {r.status}, expected {expect}: {text[:200]!r}")
            tokens = 0
            if r.status == 200 and path.startswith("/v1/") and method == "POST":
                tokens = json.loads(text).get("usage", {}).get("completion_tokens", 0)
            self.stats.add(kind, r.status, lat if r.status == 200 and self.counted else None, tokens)
            return r.status, text
        except (OSError, http.client.HTTPException) as e:
            self.stats.add(kind, type(e).__name__)
            self.stats.fail(f"{kind}: {type(e).__name__}: {e}")
            return None, b""
        finally:
            c.close()

    def stream(self, kind, path, body, abandon=False, slow=False):
        t0 = time.time()
        s = socket.create_connection((self.host, self.port), timeout=120)
        try:
            data = json.dumps(body).encode()
            head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            if self.key:
                head += f"Authorization: Bearer {self.key}\r\n"
            s.sendall((head + f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode() + data)
            buf = b""
            while True:
                chunk = s.recv(512 if slow else 65536)
                if not chunk:
                    break
                buf += chunk
                if abandon and b"data: " in buf:
                    self.stats.add(kind, "abandoned")
                    return
                if slow:
                    time.sleep(0.05)
            status = int(buf.split(b" ", 2)[1]) if buf.startswith(b"HTTP/") else 0
            done = b"data: [DONE]" in buf and buf.endswith(b"0\r\n\r\n")     # the last chunk, then the end
            if status != 200 or not done:
                self.stats.fail(f"{kind}: status {status}, complete={done}: {buf[:120]!r} ... {buf[-80:]!r}")
            tokens = 0 if kind.startswith("chat") else buf.count(b'"text":')
            self.stats.add(kind, status, time.time() - t0 if status == 200 else None, tokens)
        except OSError as e:
            self.stats.add(kind, type(e).__name__)
            self.stats.fail(f"{kind}: {type(e).__name__}: {e}")
        finally:
            s.close()

    def one(self):
        r = self.rng.random()
        mt = self.rng.randint(1, 24)
        prompt = [self.rng.randint(3, 500) for _ in range(self.rng.randint(1, 40))]
        if r < 0.30:
            self.request("completion", "POST", "/v1/completions",
                         {"model": self.model, "prompt": prompt, "max_tokens": mt, "temperature": 0.7})
        elif r < 0.45:
            self.request("chat", "POST", "/v1/chat/completions",
                         {"model": self.model, "messages": [{"role": "user", "content": "hello %d" % mt}],
                          "max_tokens": mt})
        elif r < 0.65:
            self.stream("stream", "/v1/completions", {"model": self.model, "prompt": prompt, "max_tokens": mt,
                                                      "stream": True})
        elif r < 0.72:
            self.stream("stream_abandoned", "/v1/completions",
                        {"model": self.model, "prompt": prompt, "max_tokens": 200, "stream": True}, abandon=True)
        elif r < 0.77:
            self.stream("stream_slow_reader", "/v1/chat/completions",
                        {"model": self.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": mt,
                         "stream": True}, slow=True)
        elif r < 0.85:
            body = self.rng.choice([b"{bad", b'{"prompt": [1]}}', b'{"prompt": "a\\u0000b"}', b"[]",
                                    b'{"prompt": [1], "max_tokens": -3}'])
            self.request("malformed", "POST", "/v1/completions", body, expect=(400,))
        elif r < 0.88:
            self.request("oversized", "POST", "/v1/completions", b"x" * (self.max_body + 1024), expect=(413,))
        elif r < 0.94:
            self.request("health", "GET", "/health")
        else:
            self.request("metrics", "GET", "/metrics")


BOMB = ("root ::= x*\nx ::= " + " | ".join(f"r{i}" for i in range(150)) + "\n" +
        "".join(f"r{i} ::= [a-z]\n" for i in range(150)))
TOOLS = [{"type": "function", "function": {"name": f"tool_{i}", "description": f"does thing {i}",
          "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}
         for i in range(250)]


class Hostile(Client):
    counted = False

    def one(self):
        r = self.rng.random()
        if r < 0.4:
            self.request("grammar_bomb", "POST", "/v1/completions",
                         {"model": self.model, "prompt": "Write", "max_tokens": 16, "temperature": 1.0,
                          "seed": self.rng.randint(0, 1 << 30), "grammar": BOMB})
        elif r < 0.7:
            self.request("tool_list", "POST", "/v1/chat/completions",
                         {"model": self.model, "messages": [{"role": "user", "content": "call one"}],
                          "tools": TOOLS, "tool_choice": "required", "max_tokens": 24}, expect=(200, 400))
        else:
            self.trickle()

    def trickle(self):
        """A header one byte a second from 127.0.0.N until the server closes the socket."""
        src = f"127.0.0.{self.rng.randint(2, 200)}"
        s = socket.socket()
        s.settimeout(30)
        status = "closed"
        try:
            s.bind((src, 0))
            s.connect((self.host, self.port))
            for b in b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 100:
                s.send(bytes([b]))
                time.sleep(1)
            status = "not_closed"
            self.stats.fail("trickle: the server read a whole trickled request")
        except OSError:
            pass
        finally:
            s.close()
        self.stats.add("trickle", status)


def start_server(args, tmp):
    model = args.model
    if not model:
        model = os.path.join(tmp, "soak-model")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/serve/make_test_model.py"),
                        os.path.join(ROOT, "tests/oracle/deepseek_v3_tiny"), model], check=True,
                       stdout=subprocess.DEVNULL)
    log = open(os.path.join(tmp, "server.log"), "w+")
    cmd = [args.colibri, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", "--slots", str(args.slots),
           "--queue", "1024", "--max-body", str(args.max_body // 1024), "--threads", str(args.threads)]
    if args.chat_template:
        cmd += ["--chat-template", args.chat_template]
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(400):
        log.seek(0)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read())
        if m:
            return p, log, f"http://127.0.0.1:{m.group(1)}", os.path.basename(model.rstrip("/"))
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    log.seek(0)
    sys.exit("soak: the server did not start:\n" + log.read()[-2000:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url")
    ap.add_argument("--pid", type=int, help="server pid for RSS (with --url)")
    ap.add_argument("--key", default="")
    ap.add_argument("--model", help="model directory (own server), or model id (with --url)")
    ap.add_argument("--colibri", default=os.path.join(ROOT, "build/colibri"))
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-body", type=int, default=64 * 1024, help="bytes (own server: its --max-body)")
    ap.add_argument("--rss-growth-mib", type=float, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hostile", type=int, default=0, help="hostile clients beside --clients (see above)")
    ap.add_argument("--chat-template", help="own server: its --chat-template (default with --hostile: "
                    "tests/tok/chat/deepseek_v3.jinja, which renders tools)")
    args = ap.parse_args()

    if args.hostile and not args.chat_template:
        args.chat_template = os.path.join(ROOT, "tests/tok/chat/deepseek_v3.jinja")
    tmp = tempfile.mkdtemp(prefix="colibri-soak-")
    server = log = None
    if args.url:
        url, pid, model = args.url, args.pid, args.model or "test-model"
    else:
        server, log, url, model = start_server(args, tmp)
        pid = server.pid
    m = re.match(r"http://([^:/]+):(\d+)", url)
    host, port = m.group(1), int(m.group(2))
    stats = Stats()
    stop = threading.Event()
    t_start = time.time()

    def worker(i):
        c = Client(host, port, args.key, model, stats, random.Random(args.seed * 1000 + i), args.max_body)
        while not stop.is_set():
            c.one()

    def hostile(i):
        c = Hostile(host, port, args.key, model, stats, random.Random(args.seed * 1000 + 500 + i), args.max_body)
        while not stop.is_set():
            c.one()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(args.clients)]
    threads += [threading.Thread(target=hostile, args=(i,), daemon=True) for i in range(args.hostile)]
    for t in threads:
        t.start()
    rss_base = rss_peak = None
    rss_first = rss_mib(pid) if pid else None
    last_tokens, last_t = 0, t_start
    print(f"soak: {args.clients} clients for {args.seconds:.0f} s against {url} (pid {pid}); RSS at start "
          f"{rss_first if rss_first is None else round(rss_first, 1)} MiB", flush=True)
    try:
        while time.time() - t_start < args.seconds:
            time.sleep(min(10, max(0.1, args.seconds - (time.time() - t_start))))
            now = time.time()
            rss = rss_mib(pid) if pid else None
            if rss is not None:
                rss_peak = max(rss_peak or 0, rss)
                if rss_base is None and now - t_start >= 0.1 * args.seconds:
                    rss_base = rss
            with stats.mu:
                lat = list(stats.lat)
                tokens = stats.tokens
                counts = dict(stats.status)
                n_fail = len(stats.failures)
            total = sum(counts.values())
            print(f"  t={now - t_start:5.0f}s requests={total} p50={pct(lat, 50) * 1000:.0f}ms "
                  f"p99={pct(lat, 99) * 1000:.0f}ms tok/s={(tokens - last_tokens) / (now - last_t):.1f} "
                  f"rss={rss if rss is None else round(rss, 1)}MiB failures={n_fail}", flush=True)
            last_tokens, last_t = tokens, now
    finally:
        stop.set()
        for t in threads:
            t.join(150)
    elapsed = time.time() - t_start
    rc = 0
    print("status counts (kind:status):")
    for k in sorted(stats.status):
        print(f"  {k:32s} {stats.status[k]}")
    print(f"normal requests: {len(stats.lat)}, latency p50 {pct(stats.lat, 50) * 1000:.0f} ms, "
          f"p99 {pct(stats.lat, 99) * 1000:.0f} ms; generated tokens {stats.tokens} ({stats.tokens / elapsed:.1f}/s)")
    five = {k: v for k, v in stats.status.items() if k.split(":")[1].startswith("5")}
    if five:
        print(f"FAIL: 5xx responses: {five}")
        rc = 1
    if stats.failures:
        print(f"FAIL: {len(stats.failures)} unexpected results, first ones:")
        for f in stats.failures[:10]:
            print("  " + f)
        rc = 1
    if rss_base is not None:
        end = rss_mib(pid)
        print(f"RSS: start {rss_first:.1f} MiB, after warm-up {rss_base:.1f} MiB, peak {rss_peak:.1f} MiB, "
              f"end {end if end is None else round(end, 1)} MiB (bound: warm-up + {args.rss_growth_mib:.0f} MiB)")
        if rss_peak > rss_base + args.rss_growth_mib:
            print("FAIL: RSS grew past the bound")
            rc = 1
    if server:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            code = "killed"
        if code != 0:
            print(f"FAIL: server exit status {code} after SIGTERM")
            log.seek(0)
            print(log.read()[-2000:])
            rc = 1
    print("soak: " + ("passed" if rc == 0 else "FAILED"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
