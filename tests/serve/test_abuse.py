#!/usr/bin/env python3
"""Connection abuse against `colibri serve` (started by tests/cli/serve_abuse.sh).

Environment:
  ABUSE_URL_A    a server with --max-conns-per-addr 32 and --max-body 64 KiB
  ABUSE_URL_B    a server with --timeout ABUSE_TIMEOUT, per-address and total
                 limits above what the test opens, and a per-step delay
  ABUSE_TIMEOUT  B's --timeout in seconds
  ABUSE_IDLE, ABUSE_TRICKLE, ABUSE_NORMAL   how many of each (default 1000, 100, 50)

The abusive client is 127.0.0.1, the well-behaved one 127.0.0.2 (both are
loopback on Linux). Every socket is closed on exit; the whole run is bounded
by the sockets' timeouts. Prints one line per test and "N passed, N failed".
"""
import errno
import http.client
import json
import os
import re
import resource
import select
import socket
import sys
import threading
import time
import traceback

URL_A = os.environ["ABUSE_URL_A"]
URL_B = os.environ["ABUSE_URL_B"]
TIMEOUT = float(os.environ["ABUSE_TIMEOUT"])
N_IDLE = int(os.environ.get("ABUSE_IDLE", "1000"))
N_TRICKLE = int(os.environ.get("ABUSE_TRICKLE", "100"))
N_NORMAL = int(os.environ.get("ABUSE_NORMAL", "50"))
GOOD = "127.0.0.2"
BAD = "127.0.0.1"


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def host_port(url):
    m = re.match(r"http://([^:/]+):(\d+)", url)
    return m.group(1), int(m.group(2))


def fd_budget(want):
    """Raises the soft descriptor limit as far as allowed; returns how many sockets we may open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else want + 256
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(target, want + 256), hard))
        except (ValueError, OSError):
            pass
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(0, min(want, soft - 64))


def open_sockets(url, n, source=BAD):
    """n connected sockets from `source` (some may be closed by the server right away)."""
    out = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((source, 0))
        s.settimeout(5)
        try:
            s.connect(host_port(url))
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        out.append(s)
    return out


def closed_by_server(s):
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def close_all(socks):
    for s in socks:
        s.close()
    socks.clear()


class Trickler:
    """Sends one byte of a never-ending header on each socket every 0.3 s."""
    TEXT = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 100000

    def __init__(self, socks):
        self.socks, self.pos, self.stop = socks, 0, threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.wait(0.3):
            b = self.TEXT[self.pos:self.pos + 1]
            self.pos += 1
            for s in self.socks:
                try:
                    s.send(b)
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.t.join(5)


def normal_request(url, path="/v1/completions", body=None, timeout=10):
    """(status, JSON) of one request from the well-behaved address."""
    host, port = host_port(url)
    c = http.client.HTTPConnection(host, port, timeout=timeout, source_address=(GOOD, 0))
    try:
        if path == "/health":
            c.request("GET", path)
        else:
            data = json.dumps(body or {"prompt": [5, 6, 7], "max_tokens": 2, "temperature": 0}).encode()
            c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def all_normal_succeed(url, n):
    """Latencies (s) of n normal requests, each of which must succeed."""
    lat = []
    for i in range(n):
        t0 = time.time()
        st, res = normal_request(url, "/health" if i % 5 == 4 else "/v1/completions")
        check(st == 200, f"normal request {i}: {st} {res}")
        lat.append(time.time() - t0)
    return lat


def describe(lat):
    lat = sorted(lat)
    return f"median {lat[len(lat) // 2] * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms"


# ------------------------------------------------------------------ tests

def test_per_address_limit_keeps_others_served():
    """Idle and trickling sockets from one address: it gets at most the
    per-address limit (32), everyone else is served."""
    n = fd_budget(N_IDLE + N_TRICKLE + 64) // 2
    idle = open_sockets(URL_A, n)
    trickle_socks = open_sockets(URL_A, N_TRICKLE)
    tr = Trickler(trickle_socks)
    try:
        time.sleep(0.5)
        held = sum(not closed_by_server(s) for s in idle + trickle_socks)
        check(0 < held <= 32, f"{held} of {len(idle) + len(trickle_socks)} connections from one address held open")
        all_normal_succeed(URL_A, N_NORMAL)
    finally:
        tr.close()
        close_all(idle)
        close_all(trickle_socks)


def test_idle_sockets_hold_no_worker_and_time_out():
    """Thousands of idle and trickling connections the server does accept
    leave normal requests served; then the arrival deadline closes all of
    them, the trickling ones included."""
    n_idle = fd_budget(N_IDLE + N_TRICKLE + 64) - N_TRICKLE
    check(n_idle >= 200, f"descriptor limit too low for the test ({n_idle} idle sockets)")
    before = all_normal_succeed(URL_B, 10)
    t0 = time.time()
    idle = open_sockets(URL_B, n_idle)
    trickle_socks = open_sockets(URL_B, N_TRICKLE)
    tr = Trickler(trickle_socks)
    try:
        time.sleep(0.3)
        if time.time() - t0 < TIMEOUT - 0.5:
            gone = sum(closed_by_server(s) for s in idle + trickle_socks)
            check(gone == 0, f"{gone} connections closed before the timeout")
        during = all_normal_succeed(URL_B, N_NORMAL)
        print(f"     {len(idle)} idle + {len(trickle_socks)} trickling connections held: {N_NORMAL} normal "
              f"requests {describe(during)} (without them: {describe(before)})")
        # the same address is served too once it sends a request
        host, port = host_port(URL_B)
        c = http.client.HTTPConnection(host, port, timeout=10, source_address=(BAD, 0))
        c.request("GET", "/health")
        check(c.getresponse().status == 200, "the abusive address cannot make a normal request")
        c.close()
        deadline = t0 + TIMEOUT + 3
        left = idle + trickle_socks
        while True:
            left = [s for s in left if not closed_by_server(s)]
            if not left or time.time() > deadline:
                break
            time.sleep(0.1)
        check(not left, f"{len(left)} connections (trickling: {sum(s in trickle_socks for s in left)}) "
                        f"still open {TIMEOUT + 3:.0f} s after they were opened")
    finally:
        tr.close()
        close_all(idle)
        close_all(trickle_socks)


def test_waiting_longer_than_timeout_is_not_cut():
    """A non-streaming request whose generation takes longer than --timeout
    gets its answer: the deadline covers receiving a request, not serving it."""
    t0 = time.time()
    st, res = normal_request(URL_B, body={"prompt": [5, 6, 7], "max_tokens": 120, "temperature": 0}, timeout=60)
    took = time.time() - t0
    check(st == 200, f"{st} {res}")
    n = res["usage"]["completion_tokens"]
    check(took > TIMEOUT or res["choices"][0]["finish_reason"] == "stop",
          f"{n} tokens in {took:.1f} s: the test needs a generation longer than {TIMEOUT} s")


def read_response(s, limit=10.0):
    s.settimeout(limit)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return out


def test_413_reaches_a_client_that_sends_the_whole_body():
    """A declared body over the limit (or any body sent to an unknown path)
    is answered at once, and the client reads the answer after writing its
    whole body: no reset in between."""
    body = b"x" * (8 << 20)
    for path, want in (("/v1/completions", b"HTTP/1.1 413"), ("/v1/nothing", b"HTTP/1.1 404")):
        s = socket.create_connection(host_port(URL_A), timeout=10, source_address=(GOOD, 0))
        try:
            s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body)))
            err = None
            try:
                s.sendall(body)
            except OSError as e:
                err = e
            out = read_response(s)
            check(err is None, f"{path}: sending the body failed: {err!r} (response {out[:60]!r})")
            check(out.startswith(want), f"{path}: after sending the body: {out[:120]!r}")
        finally:
            s.close()


def test_endless_chunked_body_is_cut():
    """A chunked upload that never ends gets a 413 once past the limit and is
    closed, instead of being read for ever."""
    s = socket.create_connection(host_port(URL_A), timeout=10, source_address=(GOOD, 0))
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (8192, b"x" * 8192)
        t0, sent, err = time.time(), 0, None
        while time.time() - t0 < 10:
            try:
                s.sendall(chunk)
                sent += len(chunk)
            except OSError as e:
                err = e
                break
            r, _, _ = select.select([s], [], [], 0)
            if r:
                break
        out = read_response(s)
        check(out.startswith(b"HTTP/1.1 413"), f"after {sent} bytes ({err!r}): {out[:120]!r}")
        check(sent < 64 * 1024 * 64, f"{sent} bytes accepted before the cut")
    finally:
        s.close()


def main():
    tests = [(n, f) for n, f in globals().items() if n.startswith("test_") and callable(f)]
    only = sys.argv[1:]
    passed = failed = 0
    for name, fn in tests:
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            fn()
            passed += 1
            print(f"ok   {name} ({time.time() - t0:.2f} s)", flush=True)
        except Exception:      # noqa: BLE001 - every failure is reported
            failed += 1
            print(f"FAIL {name}", flush=True)
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
