#!/bin/sh
# colibri serve: large requests are prepared off the HTTP event-loop threads,
# so small ones are answered meanwhile (tests/serve/test_large_prep.py on
# colibri-tiny). Loopback only; kills what it started on every exit path.
set -u
COLIBRI=${COLIBRI:-build/colibri}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
pid=""

cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "serve_large_prep.sh: $*"; tail -n 20 "$tmp/server.log"; exit 1; }

: >"$tmp/server.log"
"$COLIBRI" serve -m models/colibri-tiny --host 127.0.0.1 --port 0 --threads 1 --slots 2 >"$tmp/server.log" 2>&1 &
pid=$!
i=0; port=""
while [ $i -lt 200 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/server.log")
    kill -0 "$pid" 2>/dev/null || fail "server exited at start"
    sleep 0.05; i=$((i + 1))
done
[ -n "$port" ] || fail "server did not start within 10 s"
timeout 300 "$PY" tests/serve/test_large_prep.py "http://127.0.0.1:$port" || fail "test_large_prep.py failed"
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=""
[ "$rc" -eq 0 ] || fail "exit $rc after SIGTERM"
