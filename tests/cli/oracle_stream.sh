#!/bin/sh
# Every oracle fixture with its routed experts streamed under the smallest
# budget that holds one token's experts (plus a tenth): the oracle line is
# the resident model's, digit for digit.
set -eu
err=${TMPDIR:-/tmp}/oracle_stream.$$; trap 'rm -rf "$err" "$err.state"' EXIT
export XDG_CACHE_HOME="$err.state"
for f in tests/oracle/*/; do
    f=${f%/}
    min=$("$COLIBRI" info -m "$f" --ram 1K 2>&1 | sed -n 's/.* at least \([0-9.]*\) MiB$/\1/p')
    [ -n "$min" ]
    ram=$(awk -v m="$min" 'BEGIN { printf "%.0fK", m * 1.1 * 1024 }')
    want=$("$COLIBRI" oracle "$f")
    got=$("$COLIBRI" oracle --ram "$ram" "$f" 2>"$err")
    echo "$f --ram $ram: $got"
    grep -q "routed experts streamed" "$err"
    [ "$got" = "$want" ]
done
