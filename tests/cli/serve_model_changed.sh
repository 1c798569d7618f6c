#!/bin/sh
# colibri serve with its checkpoint truncated under it (with and without
# --ram): the server lives, the request that met the truncation and every
# later one fail naming the file, and /health answers 503 saying why
# (io/mapguard.h). Loopback only; kills what it started on every exit path.
. tests/cli/serve_lib.inc

# POST a 4-token completion; prints "STATUS BODY"
req() {
    "$PY" - "$1" "$2" <<'PYEOF'
import json, sys, urllib.request, urllib.error
url, path = sys.argv[1], sys.argv[2]
body = json.dumps({"prompt": "Say hello", "max_tokens": 4, "temperature": 0}).encode() if path != "/health" else None
r = urllib.request.Request(url + path, body, {"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(r, timeout=60) as f:
        print(f.status, f.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except OSError as e:
    print("000", e)
PYEOF
}

for ram in "" "--ram 3M"; do
    rm -rf "$tmp/m"
    "$PY" tests/serve/make_test_model.py tests/oracle/deepseek_v3_tiny "$tmp/m" >/dev/null || fail "make_test_model"
    # the weights are a link to the fixture: truncate a copy of it
    cp "$tmp/m/model.safetensors" "$tmp/m/w" && rm "$tmp/m/model.safetensors" && mv "$tmp/m/w" "$tmp/m/model.safetensors" ||
        fail "copy the weights"
    [ -L "$tmp/m/model.safetensors" ] && fail "the weights are still a link"
    serve_start -m "$tmp/m" --threads 1 --slots 1 $ram
    url="http://127.0.0.1:$port"
    out=$(req "$url" /v1/completions); case "$out" in "200 "*) ;; *) fail "whole model ($ram): $out" ;; esac
    out=$(req "$url" /health); case "$out" in "200 "*) ;; *) fail "health of the whole model ($ram): $out" ;; esac
    size=$(wc -c <"$tmp/m/model.safetensors")
    truncate -s $((size / 8)) "$tmp/m/model.safetensors" || fail "truncate"
    for k in 1 2; do
        out=$(req "$url" /v1/completions)
        case "$out" in 50[03]" "*model.safetensors*) ;; *) fail "request $k after truncation ($ram): $out" ;; esac
    done
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; fail "server died after truncation ($ram): exit $?"; }
    out=$(req "$url" /health)
    case "$out" in "503 "*model.safetensors*) ;; *) fail "health after truncation ($ram): $out" ;; esac
    kill -TERM "$pid"; wait "$pid"; rc=$?; pid=""
    [ "$rc" -eq 0 ] || fail "exit $rc after SIGTERM ($ram)"
done
echo "ok"
