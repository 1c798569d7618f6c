#!/bin/sh
# colibri serve: starts three servers on free loopback ports over a test model
# (an oracle fixture plus a small tokenizer, tests/serve/make_test_model.py),
# runs tests/serve/test_serve.py (the API, with the official openai client) and
# tests/serve/test_ops.py (alias, CORS, HEAD, tokenize, props, slots, the
# request log, histograms), tests/serve/test_choices.py (n > 1) and
# tests/serve/test_tool_syntaxes.py (two more servers, with GLM's and
# Qwen3-Coder's templates) against them, tests/serve/test_agents.py (tool calls,
# JSON Schema, /v1/messages, /v1/responses) against one more on the bundled
# colibri-tiny, then checks that SIGTERM drains an
# in-flight stream and exits 0. Bounded in time; kills what it started on
# every exit path.
set -u
COLIBRI=${COLIBRI:-build/colibri}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
pid_a=""; pid_b=""; pid_c=""; pid_d=""; pid_e=""; pid_f=""; pid_g=""; pid_h=""

cleanup() {
    for p in $pid_a $pid_b $pid_c $pid_d $pid_e $pid_f $pid_g $pid_h; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "serve.sh: $*"; for f in "$tmp"/*.log; do echo "--- $f"; tail -n 20 "$f"; done; exit 1; }

if ! "$PY" -c 'import openai, prometheus_client' 2>/dev/null; then
    echo "skipped: the Python packages openai and prometheus_client are not installed for $PY (make deps)"
    exit 77
fi
"$PY" tests/serve/make_test_model.py tests/oracle/deepseek_v3_tiny "$tmp/test-model" || fail "make_test_model"

# start NAME ARGS...: runs the server in the background, waits for its port.
start() {
    name=$1; shift
    : >"$tmp/$name.log"
    "$COLIBRI" serve -m "${model_dir:-$tmp/test-model}" --host 127.0.0.1 --port 0 --threads 1 $keyarg "$@" \
        >"$tmp/$name.log" 2>&1 &
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

# stop NAME: SIGTERM, wait up to 15 s, require exit status 0.
stop() {
    eval "p=\$pid_$1"
    kill -TERM "$p" || fail "server $1 is gone before SIGTERM"
    i=0
    while kill -0 "$p" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
    kill -0 "$p" 2>/dev/null && fail "server $1 still running 15 s after SIGTERM"
    wait "$p"; rc=$?
    eval "pid_$1=''"
    [ "$rc" -eq 0 ] || fail "server $1 exited $rc after SIGTERM"
}

out=$("$COLIBRI" serve -m "$tmp/test-model" --port 0 --kv nonsense 2>&1); rc=$?
[ "$rc" -ne 0 ] && echo "$out" | grep -q "nonsense" || fail "--kv nonsense accepted ($rc): $out"
for bad in "ftp://x.test" "http://x.test/path" "," "http://a.test,nope"; do
    out=$("$COLIBRI" serve -m "$tmp/test-model" --port 0 --cors "$bad" 2>&1); rc=$?
    [ "$rc" -ne 0 ] && echo "$out" | grep -q -- "--cors" || fail "--cors '$bad' accepted ($rc): $out"
done
out=$("$COLIBRI" serve -m "$tmp/test-model" --port 0 --alias "a b" 2>&1); rc=$?
[ "$rc" -ne 0 ] && echo "$out" | grep -q -- "--alias 'a b'" || fail "--alias 'a b' accepted ($rc): $out"

keyarg="--api-key test-key"
cors_a="http://example.test,http://localhost:3000"
start a --slots 4 --max-body 64 --chat-template tests/tok/chat/deepseek_v3.jinja --cors "$cors_a"
start b --slots 1 --queue 1 --step-delay-ms 20 --kv bf16 --reasoning-format none --log-prompts
start e --slots 1 --alias my/model-x --cors '*' --ctx 192
export SERVE_URL="http://127.0.0.1:$port_a" SERVE_URL_B="http://127.0.0.1:$port_b"
export SERVE_URL_E="http://127.0.0.1:$port_e" SERVE_CORS_A="$cors_a"
export SERVE_KEY=test-key SERVE_MODEL=test-model SERVE_MODEL_DIR="$tmp/test-model"
export SERVE_LOG_A="$tmp/a.log" SERVE_LOG_B="$tmp/b.log"
timeout 150 "$PY" tests/serve/test_serve.py || fail "tests/serve/test_serve.py failed"
timeout 120 "$PY" tests/serve/test_ops.py || fail "tests/serve/test_ops.py failed"
timeout 120 "$PY" tests/serve/test_choices.py || fail "tests/serve/test_choices.py failed"
stop a
stop b
stop e
# GLM's and Qwen3-Coder's prompts with tools run past the fixture's 256 positions
"$PY" tests/serve/make_test_model.py tests/oracle/deepseek_v3_tiny "$tmp/long/test-model" 4096 || fail "make_test_model 4096"
model_dir="$tmp/long/test-model"
start f --slots 2 --chat-template tests/tok/chat/glm_4_6.jinja
start g --slots 2 --chat-template tests/tok/chat/qwen3_coder.jinja
model_dir=""
export SERVE_URL_GLM="http://127.0.0.1:$port_f" SERVE_URL_QWEN_CODER="http://127.0.0.1:$port_g"
timeout 240 "$PY" tests/serve/test_tool_syntaxes.py || fail "tests/serve/test_tool_syntaxes.py failed"
stop f
stop g

# the bundled model with its own template: what agents hit first (tests/serve/test_agents.py)
keyarg="--api-key test-key"
model_dir=models/colibri-tiny
start h --slots 2 -n 5 --seed 7 --jinja
model_dir=""
export SERVE_URL_TINY="http://127.0.0.1:$port_h"
timeout 240 "$PY" tests/serve/test_agents.py || fail "tests/serve/test_agents.py failed"
stop h

# SIGTERM during a stream: the stream completes ([DONE]) and the server exits 0.
# This server takes its key from the environment.
keyarg=""
export COLIBRI_API_KEY=test-key
start c --slots 1 --step-delay-ms 10 --served-model-name served-name
unset COLIBRI_API_KEY
code=$("$PY" -c "
import json, urllib.request, urllib.error
try:
    urllib.request.urlopen('http://127.0.0.1:$port_c/v1/models', timeout=10); print(200)
except urllib.error.HTTPError as e:
    print(e.code)
r = urllib.request.Request('http://127.0.0.1:$port_c/v1/models', headers={'Authorization': 'Bearer test-key'})
print(json.loads(urllib.request.urlopen(r, timeout=10).read())['data'][0]['id'])")
[ "$code" = "401
served-name" ] || fail "COLIBRI_API_KEY not enforced or --served-model-name not used: $code"
"$PY" - "$port_c" >"$tmp/drain.out" 2>&1 <<'EOF' &
import json, sys, urllib.request
body = json.dumps({"prompt": [5, 6, 7], "max_tokens": 60, "temperature": 0, "stream": True}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions", data=body,
                             headers={"Authorization": "Bearer test-key", "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=30) as r:
    text = r.read().decode()
print("DONE" if text.rstrip().endswith("data: [DONE]") else "TRUNCATED", text.count("data: {"))
EOF
client=$!
i=0
until grep -q 'colibri_slots_busy 1' "$tmp/m.txt" 2>/dev/null || [ $i -ge 200 ]; do
    curl -s -H 'Authorization: Bearer test-key' "http://127.0.0.1:$port_c/metrics" >"$tmp/m.txt" 2>/dev/null \
        || "$PY" -c "import urllib.request,sys; r=urllib.request.Request('http://127.0.0.1:$port_c/metrics', headers={'Authorization':'Bearer test-key'}); sys.stdout.write(urllib.request.urlopen(r).read().decode())" >"$tmp/m.txt"
    sleep 0.05; i=$((i + 1))
done
stop c
wait "$client"
grep -q '^DONE' "$tmp/drain.out" || fail "stream not completed across SIGTERM: $(cat "$tmp/drain.out")"
# --kv-dir: a restarted server restores its slots' caches and reuses the prefix;
# a file of another tier is refused at start with the reason.
keyarg="--api-key test-key"
ask() {
    "$PY" - "$1" <<'EOF'
import json, sys, urllib.request
body = json.dumps({"prompt": [5, 6, 7, 8, 9, 10, 11, 12], "max_tokens": 4, "temperature": 0}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions", data=body,
                             headers={"Authorization": "Bearer test-key", "Content-Type": "application/json"})
r = json.loads(urllib.request.urlopen(req, timeout=30).read())
print(r["usage"]["prompt_tokens_details"]["cached_tokens"], json.dumps(r["choices"][0]["text"]))
EOF
}
start d --slots 2 --kv bf16 --kv-dir "$tmp/kv"
first=$(ask "$port_d") || fail "request to the --kv-dir server"
stop d
start d --slots 2 --kv bf16 --kv-dir "$tmp/kv"
grep -q "restored" "$tmp/d.log" || fail "nothing restored from --kv-dir"
second=$(ask "$port_d") || fail "request after restart"
stop d
[ "${first#0 }" = "${second#7 }" ] && [ "${second%% *}" = 7 ] \
    || fail "after a restart: want 7 cached tokens and the same text; got '$first' then '$second'"
out=$("$COLIBRI" serve -m "$tmp/test-model" --port 0 --slots 2 --kv-dir "$tmp/kv" 2>&1); rc=$?
[ "$rc" -ne 0 ] && echo "$out" | grep -q -- "--kv bf16" || fail "a bf16 KV file opened as f32 ($rc): $out"

# sanitizer builds report to the servers' logs without failing requests
if grep -l -E "runtime error|AddressSanitizer|LeakSanitizer|ThreadSanitizer" "$tmp"/*.log; then
    fail "sanitizer report in a server log"
fi
echo "serve: all passed"
