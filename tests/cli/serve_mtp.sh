#!/bin/sh
# colibri serve --mtp: drafts in the batched slots leave every response the
# same. Servers on colibri-tiny (which ships a trained MTP head) with --mtp
# off, on --draft 1 and 3, and auto, 3 slots each, answer the same concurrent
# requests (tests/serve/mtp_compare.py: greedy and seeded sampling, chat,
# logprobs, streams) byte for byte alike; /metrics counts drafts; a bad
# --mtp, --draft out of range and --mtp on for a model without an MTP layer
# are refused by name. Kills what it started on every exit path.
set -u
COLIBRI=${COLIBRI:-build/colibri}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "serve_mtp.sh: $*"; for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done; exit 1; }

M=models/colibri-tiny
# start NAME ARGS...: the server in the background; sets url_NAME once it listens
start() {
    name=$1; shift
    "$COLIBRI" serve -m "$M" --host 127.0.0.1 --port 0 --threads 1 --slots 3 "$@" >"$tmp/$name.log" 2>&1 &
    pids="$pids $!"
    i=0
    while [ $i -lt 200 ]; do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
        [ -n "$port" ] && { eval "url_$name=http://127.0.0.1:$port"; return 0; }
        sleep 0.05; i=$((i + 1))
    done
    fail "server $name did not start within 10 s"
}

out=$("$COLIBRI" serve -m "$M" --port 0 --mtp sometimes 2>&1) && fail "--mtp sometimes accepted"
echo "$out" | grep -q -- "--mtp: 'sometimes' is not on, off or auto\|--mtp 'sometimes'" || fail "bad --mtp: $out"
out=$("$COLIBRI" serve -m "$M" --port 0 --mtp on --draft 4 2>&1) && fail "--draft 4 accepted"
echo "$out" | grep -q -- "--draft" || fail "--draft 4: $out"
t=$tmp/nomtp; mkdir "$t"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$t/"
out=$("$COLIBRI" serve -m "$t" --port 0 --mtp on 2>&1) && fail "--mtp on without an MTP layer accepted"
echo "$out" | grep -q "MTP layer" || fail "--mtp on without an MTP layer: $out"
echo "ok   bad --mtp, --draft and a model without MTP refused"

start off
start on1 --mtp on --draft 1
start on3 --mtp on --draft 3
start auto --mtp auto --draft 2
timeout 300 "$PY" tests/serve/mtp_compare.py "$url_off" "$url_on1" "$url_on3" --auto "$url_auto" \
    || fail "tests/serve/mtp_compare.py failed"
