#!/bin/sh
# DeepSeek-V3.2 and GLM-5 (DSA) end to end: the oracle fixtures with a small
# tokenizer (tests/serve/make_test_model.py) through colibri run, chat and
# serve. Greedy text from run equals the server's completion of the same
# prompt, chat answers, fp8 index keys run (another tier is refused by name),
# and a KV file (holding the index keys) is reused with the same text.
# Bounded in time; kills what it started.
set -u
COLIBRI=${COLIBRI:-build/colibri}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "dsa_run.sh: $*"; [ -f "$tmp/serve.log" ] && tail -n 20 "$tmp/serve.log"; exit 1; }
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

for fx in deepseek_v32_tiny glm5_tiny; do
    m="$tmp/$fx"
    "$PY" tests/serve/make_test_model.py "tests/oracle/$fx" "$m" >/dev/null || fail "make_test_model $fx"
    "$COLIBRI" run -m "$m" -p "Say hello" -n 12 --temp 0 >"$tmp/run.out" 2>"$tmp/run.err" || fail "$fx run: $(cat "$tmp/run.err")"
    [ -s "$tmp/run.out" ] || fail "$fx run: no text"
    chat=$(printf 'Say hello\n' | "$COLIBRI" chat -m "$m" -n 8 --temp 0 2>"$tmp/chat.err") || fail "$fx chat: $(cat "$tmp/chat.err")"
    [ -n "$chat" ] || fail "$fx chat: no text"
    "$COLIBRI" run -m "$m" -p "Say hello" -n 6 --temp 0 --kv-index fp8 >/dev/null 2>"$tmp/run.err" ||
        fail "$fx --kv-index fp8: $(cat "$tmp/run.err")"
    out=$("$COLIBRI" run -m "$m" -p "Say hello" -n 2 --kv-index bf16 2>&1) && fail "$fx: --kv-index bf16 accepted"
    echo "$out" | grep -q "kv-index: 'bf16'" || fail "$fx --kv-index bf16: $out"
    # a KV file keeps the index keys: the second run reuses the prompt and says the same
    "$COLIBRI" run -m "$m" -p "Say hello" -n 6 --temp 0 --kv-file "$tmp/$fx.ckv" >"$tmp/kv1.out" 2>"$tmp/kv1.err" ||
        fail "$fx --kv-file: $(cat "$tmp/kv1.err")"
    "$COLIBRI" run -m "$m" -p "Say hello" -n 6 --temp 0 --kv-file "$tmp/$fx.ckv" >"$tmp/kv2.out" 2>"$tmp/kv2.err" ||
        fail "$fx --kv-file again: $(cat "$tmp/kv2.err")"
    grep -q "reused 4 of 5 prompt tokens" "$tmp/kv2.err" || fail "$fx: the KV file was not reused: $(cat "$tmp/kv2.err")"
    cmp -s "$tmp/kv1.out" "$tmp/kv2.out" || fail "$fx: text after reuse differs"

    : >"$tmp/serve.log"
    "$COLIBRI" serve -m "$m" --host 127.0.0.1 --port 0 --threads 1 >"$tmp/serve.log" 2>&1 &
    pid=$!
    port=""; i=0
    while [ -z "$port" ] && [ $i -lt 200 ]; do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/serve.log")
        kill -0 "$pid" 2>/dev/null || fail "$fx: server exited at start"
        [ -z "$port" ] && sleep 0.05; i=$((i + 1))
    done
    [ -n "$port" ] || fail "$fx: server did not start"
    resp=$(curl -s --max-time 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt": "Say hello", "max_tokens": 12, "temperature": 0}') || fail "$fx: completion request failed"
    # the server's text is the run's bytes as UTF-8 with errors replaced (run adds a newline); an
    # incomplete character at the very end is flushed differently by the two
    printf '%s' "$resp" | "$PY" -c '
import json, sys
got = json.load(sys.stdin)["choices"][0]["text"].rstrip("\ufffd\x00")
want = open(sys.argv[1], "rb").read().decode("utf-8", "replace").removesuffix("\n").rstrip("\ufffd\x00")
sys.exit(0 if got == want and len(got) > 4 else "server %r, run %r" % (got, want))' "$tmp/run.out" ||
        fail "$fx: completion differs: $resp"
    resp=$(curl -s --max-time 60 "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
        -d '{"messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 8, "temperature": 0}') ||
        fail "$fx: chat request failed"
    printf '%s' "$resp" | "$PY" -c 'import json, sys; r = json.load(sys.stdin); assert r["choices"][0]["message"]["content"] is not None' ||
        fail "$fx: chat response: $resp"
    kill -TERM "$pid"; wait "$pid"; pid=""
    echo "ok   $fx: run, chat, serve"
done
