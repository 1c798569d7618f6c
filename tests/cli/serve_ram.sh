#!/bin/sh
# colibri serve --ram: a server whose routed experts are streamed answers
# greedy completions with the same text as a resident one and reports its
# reads in /metrics; a checkpoint changed on disk fails the request naming the
# file while the server keeps running and /health answers 503 saying why; a
# budget below the minimum is refused at start naming it. Loopback only, bounded in time.
set -u
PY=${PYTHON:-python3}
tmp=$(mktemp -d); pids=""
export XDG_CACHE_HOME="$tmp/state"
trap 'for p in $pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
fail() { echo "serve_ram.sh: $*"; tail -n 20 "$tmp"/*.log; exit 1; }

start() {   # start NAME ARGS...: sets $port (not in a subshell, so $pids keeps the pid)
    name=$1; shift; port=""
    "$COLIBRI" serve --host 127.0.0.1 --port 0 --threads 1 "$@" >"$tmp/$name.log" 2>&1 &
    pids="$pids $!"
    i=0
    while [ $i -lt 200 ]; do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
        [ -n "$port" ] && return 0
        sleep 0.05; i=$((i + 1))
    done
    return 1
}
complete() {   # complete PORT: the text of a greedy completion
    "$PY" - "$1" <<'PYEOF'
import json, sys, urllib.request
body = json.dumps({"prompt": "It is a truth universally acknowledged", "max_tokens": 32, "temperature": 0}).encode()
req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % sys.argv[1], body,
                             {"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["text"])
PYEOF
}
start resident || fail "resident server did not start"; pa=$port
start streamed --ram 18.3M || fail "streamed server did not start"; pb=$port
grep -q "routed experts streamed" "$tmp/streamed.log" || fail "--ram 18.3M did not stream"
a=$(complete "$pa") || fail "resident request"
b=$(complete "$pb") || fail "streamed request"
[ -n "$a" ] && [ "$a" = "$b" ] || fail "streamed text differs: '$a' vs '$b'"
metrics() { "$PY" -c 'import sys, urllib.request; print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=30).read().decode())' "$1"; }
mb=$(metrics "$pb") || fail "streamed /metrics"
echo "$mb" | grep -Eq '^colibri_expert_reads_total [1-9][0-9]*$' || fail "/metrics has no expert reads: $mb"
echo "$mb" | grep -Eq '^colibri_expert_read_bytes_total [1-9][0-9]*$' || fail "/metrics has no expert bytes"
echo "$mb" | grep -Eq '^colibri_expert_io_wait_seconds_total [0-9.]+$' || fail "/metrics has no I/O wait"
ma=$(metrics "$pa") || fail "resident /metrics"
echo "$ma" | grep -q colibri_expert_ && fail "a resident store reports expert reads"
# a copy of the model whose file changes under the server
mkdir "$tmp/m"; cp models/colibri-tiny/*.json models/colibri-tiny/model.safetensors "$tmp/m/"
start changed -m "$tmp/m" --ram 18.3M || fail "server on the copy did not start"; pc=$port
complete "$pc" >/dev/null || fail "request before the change"
touch -d 2001-01-01 "$tmp/m/model.safetensors"
r=$("$PY" - "$pc" <<'PYEOF'
import json, sys, urllib.request, urllib.error
body = json.dumps({"prompt": "Quite another prompt, so that new experts are read", "max_tokens": 8,
                   "temperature": 0}).encode()
req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % sys.argv[1], body,
                             {"Content-Type": "application/json"})
try:
    urllib.request.urlopen(req, timeout=60)
    print("200")
except urllib.error.HTTPError as e:
    print(e.code, json.load(e)["error"]["message"])
PYEOF
) || fail "request after the change"
# refused as the job starts (503), or by the expert read (500), naming the file
echo "$r" | grep -Eq "^50[03] .*model.safetensors changed on disk" || fail "changed file not reported: $r"
h=$("$PY" - "$pc" <<'PYEOF'
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
PYEOF
) || fail "no /health after the error"
echo "$h" | grep -q "^503 .*model.safetensors changed on disk" || fail "/health after the change: $h"
out=$("$COLIBRI" serve --port 0 --ram 15M 2>&1) && fail "--ram 15M accepted"
echo "$out" | grep -q "at least" || fail "no minimum stated: $out"
echo "ok: '$a'"
