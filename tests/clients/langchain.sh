#!/bin/sh
# langchain-openai against colibri serve on models/colibri-tiny with DeepSeek-V3's
# Jinja template (tests/tok/chat), so tool calls and tool results are rendered:
# runs tests/clients/test_langchain.py with $PYTHON, which must have the packages
# of tests/clients/requirements.txt (`make test-clients` after
# `python3 -m venv build/venv-clients && build/venv-clients/bin/pip install -r
# tests/clients/requirements.txt`, as .ci/run does). Bounded in time; kills the
# server on every exit path.
set -u
COLIBRI=${COLIBRI:-build/colibri}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "langchain.sh: $*"; tail -n 20 "$tmp/serve.log" 2>/dev/null; exit 1; }

"$PY" -c 'import langchain_openai, langchain_core, openai, pydantic' 2>/dev/null ||
    fail "$PY lacks the packages of tests/clients/requirements.txt"
: >"$tmp/serve.log"   # exists before the background shell opens it, for the first sed
"$COLIBRI" serve -m models/colibri-tiny --host 127.0.0.1 --port 0 --threads 1 --slots 1 \
    --chat-template tests/tok/chat/deepseek_v3.jinja >"$tmp/serve.log" 2>&1 &
pid=$!
i=0; port=""
while [ $i -lt 200 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/serve.log")
    kill -0 "$pid" 2>/dev/null || fail "the server exited at start"
    sleep 0.05; i=$((i + 1))
done
[ -n "$port" ] || fail "the server did not start within 10 s"
CLIENTS_URL="http://127.0.0.1:$port" CLIENTS_MODEL=colibri-tiny timeout 300 "$PY" tests/clients/test_langchain.py ||
    fail "tests/clients/test_langchain.py failed"
