#!/usr/bin/env python3
"""Connection limits against many client addresses (tests/cli/serve_conn_addrs.sh).

usage: test_conn_addrs.py COLIBRI MODEL_DIR v4|v6

Starts `colibri serve --max-conns 64 --max-conns-per-addr 8` and fills its
table with idle sockets from many source addresses, then checks that
  - no client holds more than 8 (v6: all addresses of one /64 are one client),
  - the server never holds more than 64,
  - a client address not seen before is still served (GET /health 200).
v4 uses source addresses 127.0.0.x (all loopback on Linux). v6 needs the
addresses fd00:c0:1::/64 and fd00:c0:2::1 on lo, which tests/cli/serve_conn_addrs.sh
adds inside a network namespace of its own (unshare -rn): only loopback and
that namespace are used. Prints one line per check; exit 1 on a failure.
"""
import http.client
import re
import socket
import subprocess
import sys
import time

COLIBRI, MODEL, MODE = sys.argv[1:4]
LIMIT, PER = 64, 8
FAM = socket.AF_INET if MODE == "v4" else socket.AF_INET6
failed = 0


def say(ok, msg):
    global failed
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    failed += not ok


def connect(port, src):
    s = socket.socket(FAM, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1" if MODE == "v4" else "::1", port))
    except OSError:
        s.close()
        return None
    s.setblocking(False)
    return s


def alive(s):
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def health(port, src):
    host = "127.0.0.1" if MODE == "v4" else "::1"
    c = http.client.HTTPConnection(host, port, timeout=5, source_address=(src, 0))
    try:
        c.request("GET", "/health")
        return c.getresponse().status
    except OSError as e:
        return str(e)
    finally:
        c.close()


host = "127.0.0.1" if MODE == "v4" else "::"
srv = subprocess.Popen([COLIBRI, "serve", "-m", MODEL, "--host", host, "--port", "0", "--threads", "1",
                        "--max-conns", str(LIMIT), "--max-conns-per-addr", str(PER), "--timeout", "60"],
                       stderr=subprocess.PIPE, text=True)
socks = []
try:
    port = None
    t0 = time.time()
    while port is None and time.time() - t0 < 20:
        line = srv.stderr.readline()
        m = re.search(r"listening on http://\S*:(\d+)", line)
        port = int(m.group(1)) if m else None
        if not line and srv.poll() is not None:
            break
    if port is None:
        raise SystemExit("FAIL the server did not start")

    if MODE == "v4":
        # 12 clients x 12 sockets (4 over each one's share), then 40 more clients with one each
        heavy = [f"127.0.0.{10 + i}" for i in range(12)]
        light = [f"127.0.1.{10 + i}" for i in range(40)]
        fresh = "127.0.2.99"
    else:
        # 144 addresses of one /64 (one client), then 60 other clients
        heavy = [f"fd00:c0:1::{i + 1:x}" for i in range(144)]
        light = []
        fresh = "fd00:c0:2::1"
    by_src = {}
    if MODE == "v4":
        for a in heavy:
            by_src[a] = [s for s in (connect(port, a) for _ in range(PER + 4)) if s]
    else:
        by_src["one /64"] = [s for s in (connect(port, a) for a in heavy) if s]
    for a in light:
        by_src[a] = [s for s in (connect(port, a) for _ in range(1)) if s]
    socks = [s for v in by_src.values() for s in v]
    time.sleep(1.0)
    held = {a: sum(alive(s) for s in v) for a, v in by_src.items()}
    worst = max(held.values())
    say(worst <= PER, f"at most {PER} connections held per client (most: {worst})")
    total = sum(held.values())
    say(total <= LIMIT, f"at most {LIMIT} held in all ({total} of {len(socks)} opened)")
    if MODE == "v6":
        say(held["one /64"] == PER, f"one /64 holds exactly {PER} ({held['one /64']})")
    st = health(port, fresh)
    say(st == 200, f"a client not seen before is served with the table full: {st}")
    if MODE == "v4":
        st = health(port, "127.0.2.100")
        say(st == 200, f"and the next new client too: {st}")
finally:
    for s in socks:
        s.close()
    srv.terminate()
    try:
        srv.wait(15)
    except subprocess.TimeoutExpired:
        srv.kill()
sys.exit(1 if failed else 0)
