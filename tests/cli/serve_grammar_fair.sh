#!/bin/sh
# colibri serve: a costly grammar delays its own requests, not other
# clients' (tests/serve/test_grammar_fair.py against colibri-tiny).
# Loopback only; kills what it started on every exit path.
. tests/cli/serve_lib.inc

serve_start -m models/colibri-tiny --threads 1 --slots 4
timeout 300 "$PY" tests/serve/test_grammar_fair.py "http://127.0.0.1:$port" || fail "test_grammar_fair.py failed"
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=""
[ "$rc" -eq 0 ] || fail "exit $rc after SIGTERM"
