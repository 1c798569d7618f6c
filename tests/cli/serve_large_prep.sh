#!/bin/sh
# colibri serve: large requests are prepared off the HTTP event-loop threads,
# so small ones are answered meanwhile (tests/serve/test_large_prep.py on
# colibri-tiny). Loopback only; kills what it started on every exit path.
. tests/cli/serve_lib.inc

serve_start -m models/colibri-tiny --threads 1 --slots 2
timeout 300 "$PY" tests/serve/test_large_prep.py "http://127.0.0.1:$port" || fail "test_large_prep.py failed"
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=""
[ "$rc" -eq 0 ] || fail "exit $rc after SIGTERM"
