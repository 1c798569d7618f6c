#!/bin/sh
# Connection limits against many client addresses (tests/serve/test_conn_addrs.py):
# IPv4 from many 127.0.0.0/8 source addresses; IPv6 from many addresses of one
# /64, inside a network namespace of its own (unshare -rn) whose lo gets the
# addresses fd00:c0:1::/64 and fd00:c0:2::1 -- skipped, said so, where
# unprivileged namespaces are not available. Loopback only.
set -u
COLIBRI=${COLIBRI:-build/colibri}
PY=${PYTHON:-python3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
"$PY" tests/serve/make_test_model.py tests/oracle/deepseek_v3_tiny "$tmp/m" >/dev/null || { echo "FAIL make_test_model"; exit 1; }
timeout 120 "$PY" tests/serve/test_conn_addrs.py "$COLIBRI" "$tmp/m" v4 || fail=1
if unshare -rn true 2>/dev/null && command -v ip >/dev/null; then
    timeout 120 unshare -rn sh -c '
        ip link set lo up &&
        ip -6 addr add fd00:c0:1::1/64 dev lo nodad &&
        i=2; while [ $i -le 144 ]; do ip -6 addr add fd00:c0:1::$(printf %x $i)/64 dev lo nodad || exit 1; i=$((i + 1)); done &&
        ip -6 addr add fd00:c0:2::1/64 dev lo nodad &&
        exec "$0" tests/serve/test_conn_addrs.py "$1" "$2" v6' "$PY" "$COLIBRI" "$tmp/m" || fail=1
else
    echo "skip IPv6 /64 check: no unprivileged network namespace (unshare -rn) here"
fi
exit $fail
