#!/bin/sh
# The chat page at GET / in headless Chromium (tests/serve/test_page.py): a
# server on a free loopback port over the test model, with an API key and a
# small per-step delay so that Stop meets a running reply. Exits 77 (counted
# as skipped by tests/run.sh) when no Chromium is installed: sh tools/deps.sh
# --browser installs Debian's. Kills what it started on every exit path.
set -u
COLIBRI=${COLIBRI:-build/colibri}
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "serve_page.sh: $*"; [ -f "$tmp/s.log" ] && tail -n 20 "$tmp/s.log"; exit 1; }

if [ -n "${CHROMIUM:-}" ]; then command -v "$CHROMIUM" >/dev/null 2>&1; found=$?
else command -v chromium || command -v chromium-browser || command -v google-chrome; found=$?; fi >/dev/null 2>&1
if [ "$found" -ne 0 ]; then
    echo "skipped: no Chromium on this machine (sh tools/deps.sh --browser installs Debian's)"
    exit 77
fi
"$PY" tests/serve/make_test_model.py tests/oracle/deepseek_v3_tiny "$tmp/test-model" >/dev/null || fail "make_test_model"
: >"$tmp/s.log"      # exists before the server opens it, for the port loop below
"$COLIBRI" serve -m "$tmp/test-model" --host 127.0.0.1 --port 0 --threads 1 --slots 2 --api-key page-key \
    --step-delay-ms 15 >"$tmp/s.log" 2>&1 &
pid=$!
i=0
port=""
while [ -z "$port" ] && [ $i -lt 200 ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/s.log")
    kill -0 "$pid" 2>/dev/null || fail "the server exited at start"
    [ -z "$port" ] && sleep 0.05
    i=$((i + 1))
done
[ -n "$port" ] || fail "the server did not start within 10 s"
mkdir -p "$BUILD/test-output"
PAGE_URL="http://127.0.0.1:$port" PAGE_KEY=page-key PAGE_SHOT="$BUILD/test-output/chat_page.png" \
    timeout 60 "$PY" tests/serve/test_page.py
rc=$?
kill -TERM "$pid"
wait "$pid"; src=$?
pid=""
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 0 ] || fail "tests/serve/test_page.py failed ($rc)"
[ "$src" -eq 0 ] || fail "the server exited $src after SIGTERM"
if grep -q -E "runtime error|AddressSanitizer|LeakSanitizer|ThreadSanitizer" "$tmp/s.log"; then
    fail "sanitizer report in the server log"
fi
grep -q "POST /v1/chat/completions 200 .*finish=cancelled" "$tmp/s.log" || fail "Stop did not cancel on the server"
echo "serve_page: all passed (screenshot: $BUILD/test-output/chat_page.png)"
