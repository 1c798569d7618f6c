#!/bin/sh
# colibri serve --ssl-key-file/--ssl-cert-file (llama-server's spelling): with
# a self-signed certificate made here by the openssl command, curl verifying
# against that certificate gets /health and a streamed chat completion over
# HTTPS; curl trusting only the system's CAs refuses the server, and plain
# HTTP on that port gets no answer. One of the two options alone, a file
# without its PEM block and a key that does not match the certificate are
# refused at start. Skipped (exit 77) without openssl or curl, or when
# libmicrohttpd has no TLS. Loopback only, bounded.
set -u
command -v openssl >/dev/null 2>&1 || { echo "skipped: no openssl command to make a certificate with"; exit 77; }
command -v curl >/dev/null 2>&1 || { echo "skipped: no curl command"; exit 77; }
tmp=$(mktemp -d); pid=""
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "serve_tls.sh: $*"; tail -n 20 "$tmp/s.log" 2>/dev/null; exit 1; }
cert() {    # cert NAME: NAME.key and NAME.pem, for 127.0.0.1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$tmp/$1.key" \
        -out "$tmp/$1.pem" -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 ||
        fail "openssl could not make a certificate"
}
cert a; cert b

timeout 30 "$COLIBRI" serve --port 0 --ssl-key-file "$tmp/a.key" >/dev/null 2>"$tmp/e" && fail "--ssl-key-file alone accepted"
grep -q "without --ssl-cert-file" "$tmp/e" || fail "key alone: $(cat "$tmp/e")"
if grep -q "built without TLS" "$tmp/e"; then echo "skipped: libmicrohttpd was built without TLS"; exit 77; fi
timeout 30 "$COLIBRI" serve --port 0 --ssl-cert-file "$tmp/a.pem" >/dev/null 2>"$tmp/e" && fail "--ssl-cert-file alone accepted"
grep -q "without --ssl-key-file" "$tmp/e" || fail "cert alone: $(cat "$tmp/e")"
timeout 30 "$COLIBRI" serve --port 0 --ssl-key-file "$tmp/a.pem" --ssl-cert-file "$tmp/a.pem" >/dev/null 2>"$tmp/e" &&
    fail "a certificate as the key accepted"
grep -q "ssl-key-file $tmp/a.pem: no PEM 'PRIVATE KEY' block" "$tmp/e" || fail "cert as key: $(cat "$tmp/e")"
timeout 30 "$COLIBRI" serve --port 0 --threads 1 --ssl-key-file "$tmp/a.key" --ssl-cert-file "$tmp/b.pem" >/dev/null 2>"$tmp/e" &&
    fail "a key and another key's certificate accepted"
grep -q "not a matching pair" "$tmp/e" || fail "mismatched pair: $(cat "$tmp/e")"

"$COLIBRI" serve --host 127.0.0.1 --port 0 --threads 1 --ssl-key-file "$tmp/a.key" --ssl-cert-file "$tmp/a.pem" \
    >"$tmp/s.log" 2>&1 &
pid=$!
i=0; port=""
while [ $i -lt 200 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*listening on https:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/s.log"); sleep 0.05; i=$((i + 1))
done
[ -n "$port" ] || fail "the server did not start (or did not say https://)"
url=https://127.0.0.1:$port
[ "$(curl -sS --max-time 20 --cacert "$tmp/a.pem" "$url/health")" = '{"status":"ok"}' ] || fail "/health over HTTPS"
curl -sS -N --max-time 60 --cacert "$tmp/a.pem" "$url/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"stream":true}' >"$tmp/stream" ||
    fail "streamed chat over HTTPS"
[ "$(grep -c '^data: {' "$tmp/stream")" -ge 2 ] && tail -n 2 "$tmp/stream" | grep -q '^data: \[DONE\]' ||
    fail "the stream: $(cat "$tmp/stream")"
curl -sS --max-time 20 --cacert "$tmp/b.pem" "$url/health" >/dev/null 2>&1 && fail "verified against another certificate"
curl -sS --max-time 20 "http://127.0.0.1:$port/health" >"$tmp/plain" 2>/dev/null && grep -q status "$tmp/plain" &&
    fail "plain HTTP answered on the HTTPS port"
kill "$pid"; wait "$pid" 2>/dev/null; pid=""
echo ok
