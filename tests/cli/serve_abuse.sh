#!/bin/sh
# colibri serve under connection abuse: tests/serve/test_abuse.py holds idle
# and trickling connections from 127.0.0.1 while 127.0.0.2 makes normal
# requests, and checks the 413 paths. Loopback only, bounded in time; kills
# what it started on every exit path.
set -u
COLIBRI=${COLIBRI:-build/colibri}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
pid_a=""; pid_b=""

cleanup() {
    for p in $pid_a $pid_b; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "serve_abuse.sh: $*"; for f in "$tmp"/*.log; do echo "--- $f"; tail -n 20 "$f"; done; exit 1; }

# room for a few thousand sockets on each side, where the hard limit allows
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -H -n)" 2>/dev/null || true
"$PY" tests/serve/make_test_model.py tests/oracle/deepseek_v3_tiny "$tmp/test-model" >/dev/null || fail "make_test_model"

start() {
    name=$1; shift
    "$COLIBRI" serve -m "$tmp/test-model" --host 127.0.0.1 --port 0 --threads 1 "$@" >"$tmp/$name.log" 2>&1 &
    eval "pid_$name=$!"
    i=0
    while [ $i -lt 200 ]; do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
        [ -n "$port" ] && { eval "port_$name=$port"; return 0; }
        eval "kill -0 \$pid_$name" 2>/dev/null || fail "server $name exited at start"
        sleep 0.05; i=$((i + 1))
    done
    fail "server $name did not start within 10 s"
}

start a --slots 2 --max-body 64 --max-conns-per-addr 32
start b --slots 2 --timeout 3 --max-conns 8000 --max-conns-per-addr 8000 --step-delay-ms 50
export ABUSE_URL_A="http://127.0.0.1:$port_a" ABUSE_URL_B="http://127.0.0.1:$port_b" ABUSE_TIMEOUT=3
timeout 120 "$PY" tests/serve/test_abuse.py || fail "tests/serve/test_abuse.py failed"
# both still up, then a clean stop: under `make check` LeakSanitizer runs at
# exit, so a connection or wait the server lost track of shows up in its log
for n in a b; do
    eval "p=\$pid_$n"
    kill -0 "$p" 2>/dev/null || fail "server $n died during the test"
    kill -TERM "$p"
    i=0
    while kill -0 "$p" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
    kill -0 "$p" 2>/dev/null && fail "server $n still running 15 s after SIGTERM"
    wait "$p"; rc=$?
    eval "pid_$n=''"
    [ "$rc" -eq 0 ] || fail "server $n exited $rc after SIGTERM"
done
if grep -l -E "runtime error|AddressSanitizer|LeakSanitizer" "$tmp"/*.log; then
    fail "sanitizer report in a server log"
fi
echo "serve_abuse: all passed"
