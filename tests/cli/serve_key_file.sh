#!/bin/sh
# colibri serve --api-key-file: the key is read from a file (so it is not in
# ps), requests without it get 401 and with it 200; a missing or empty file,
# or both key options, are refused at start. Loopback only, bounded.
set -u
PY=${PYTHON:-python3}
tmp=$(mktemp -d); pid=""
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "serve_key_file.sh: $*"; tail -n 20 "$tmp/s.log" 2>/dev/null; exit 1; }
printf 'file-key-123\n' > "$tmp/key"
: > "$tmp/empty"
"$COLIBRI" serve --port 0 --api-key-file "$tmp/none" >/dev/null 2>"$tmp/e" && fail "missing file accepted"
grep -q "none" "$tmp/e" || fail "missing file not named"
"$COLIBRI" serve --port 0 --api-key-file "$tmp/empty" >/dev/null 2>"$tmp/e" && fail "empty file accepted"
grep -q "one non-empty line" "$tmp/e" || fail "empty file: $(cat "$tmp/e")"
"$COLIBRI" serve --port 0 --api-key x --api-key-file "$tmp/key" >/dev/null 2>"$tmp/e" && fail "both accepted"
"$COLIBRI" serve --host 127.0.0.1 --port 0 --threads 1 --api-key-file "$tmp/key" >"$tmp/s.log" 2>&1 &
pid=$!
i=0; port=""
while [ $i -lt 200 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/s.log"); sleep 0.05; i=$((i + 1))
done
[ -n "$port" ] || fail "server did not start"
"$PY" - "$port" <<'PYEOF' || fail "key checks"
import sys, urllib.request, urllib.error
url = "http://127.0.0.1:%s/v1/models" % sys.argv[1]
def status(key):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + key} if key else {})
    try:
        return urllib.request.urlopen(req, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code
assert status(None) == 401, status(None)
assert status("wrong") == 401
assert status("file-key-123") == 200
PYEOF
ps -o args= -p "$pid" | grep -q "file-key-123" && fail "the key is visible in ps"
echo ok
