#!/bin/sh
# colibri serve: requests with a grammar hold at most --grammar-slots slots
# (default half), so a client without one is not queued behind them
# (tests/serve/test_grammar_slots.py against colibri-tiny). Loopback only;
# kills what it started on every exit path.
. tests/cli/serve_lib.inc

serve_start -m models/colibri-tiny --threads 1 --slots 4 --step-delay-ms 10
timeout 300 "$PY" tests/serve/test_grammar_slots.py "http://127.0.0.1:$port" || fail "test_grammar_slots.py failed"
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=""
[ "$rc" -eq 0 ] || fail "exit $rc after SIGTERM"
