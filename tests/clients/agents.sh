#!/bin/sh
# The official anthropic and openai clients against colibri serve on models/colibri-tiny
# with its own template: runs tests/clients/test_agent_apis.py (/v1/messages,
# /v1/responses, the parse helper) with $PYTHON, which must have the packages of
# tests/clients/requirements.txt. Bounded in time; kills the server on every exit path.
set -u
COLIBRI=${COLIBRI:-build/colibri}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "agents.sh: $*"; tail -n 20 "$tmp/serve.log" 2>/dev/null; exit 1; }

"$PY" -c 'import anthropic, openai, pydantic' 2>/dev/null || fail "$PY lacks the packages of tests/clients/requirements.txt"
: >"$tmp/serve.log"
"$COLIBRI" serve -m models/colibri-tiny --host 127.0.0.1 --port 0 --threads 1 --slots 2 >"$tmp/serve.log" 2>&1 &
pid=$!
i=0; port=""
while [ $i -lt 200 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/serve.log")
    kill -0 "$pid" 2>/dev/null || fail "the server exited at start"
    sleep 0.05; i=$((i + 1))
done
[ -n "$port" ] || fail "the server did not start within 10 s"
CLIENTS_URL="http://127.0.0.1:$port" timeout 400 "$PY" tests/clients/test_agent_apis.py ||
    fail "tests/clients/test_agent_apis.py failed"
