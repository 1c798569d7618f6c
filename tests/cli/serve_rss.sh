#!/bin/sh
# RSS is given back after large request bodies: tools/rss_probe.py sends
# 3 rounds of 4 concurrent 1.7 MiB chat bodies of two kinds (one long
# message; many short messages) and the server's VmRSS must end within
# 48 MiB of its baseline (without the heap trim it kept 130+ MiB:
# 15 -> 174 MiB on the tiny test model). Loopback only.
set -u
COLIBRI=${COLIBRI:-build/colibri}
PY=${PYTHON:-python3}
# AddressSanitizer keeps freed memory in its quarantine and has its own heap:
# RSS there says nothing about glibc's arenas
if grep -q __asan_init "$COLIBRI" 2>/dev/null; then echo "skip RSS check: $COLIBRI is built with AddressSanitizer"; exit 77; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$PY" tests/serve/make_test_model.py tests/oracle/deepseek_v3_tiny "$tmp/m" >/dev/null || { echo "FAIL make_test_model"; exit 1; }
timeout 300 "$PY" tools/rss_probe.py "$COLIBRI" "$tmp/m" --probes 3 --kinds content,messages > "$tmp/out" 2>&1
line=$(grep '^SUMMARY all' "$tmp/out")
base=$(echo "$line" | sed -n 's/.*baseline \([0-9]*\) MiB.*/\1/p')
final=$(echo "$line" | sed -n 's/.*final \([0-9]*\) MiB.*/\1/p')
if [ -n "$base" ] && [ -n "$final" ] && [ $((final - base)) -le 48 ]; then
    echo "ok   RSS after large bodies: $base -> $final MiB"
else
    echo "FAIL RSS after large bodies: $line"; cat "$tmp/out"; exit 1
fi
