#!/bin/sh
# The running process is named colibri (what ps, top and pgrep show), not
# "exe" after its re-execution with passive OpenMP waiting (cli/main.c).
set -u
unset OMP_WAIT_POLICY GOMP_SPINCOUNT   # so that it re-executes
tmp=$(mktemp -d)
"$COLIBRI" serve -m models/colibri-tiny --port 0 >"$tmp/out" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do grep -q listening "$tmp/out" && break; sleep 0.1; done
comm=$(cat /proc/$pid/comm 2>/dev/null)
if grep -q listening "$tmp/out" && [ "$comm" = colibri ]; then echo "ok   process name: $comm"; exit 0; fi
echo "FAIL process name: '$comm' (want colibri); serve said: $(cat "$tmp/out")"; exit 1
