#!/bin/sh
# --ram smaller than the model streams the routed experts from disk: the
# output is byte-identical to the resident model's at every budget (greedy
# and sampled), and the run says what it read.
set -eu
t=${TMPDIR:-/tmp}/ram_stream.$$; trap 'rm -f "$t" "$t.ref" "$t.err"' EXIT
p="It is a truth universally acknowledged"
"$COLIBRI" run -p "$p" -n 48 --temp 0 > "$t.ref" 2>/dev/null
for r in 16.4M 17M 20M 40M; do
    "$COLIBRI" run -p "$p" -n 48 --temp 0 --ram $r > "$t" 2>"$t.err"
    cmp "$t" "$t.ref"
    grep -Eq '^experts: streamed, [0-9]+ acquisitions: [0-9.]+% found in the cache, [0-9.]+% waited for a read in flight, [0-9.]+% missed; [0-9.]+ MiB read from disk \([0-9.]+ MiB per token\), I/O wait [0-9.]+% of the time; prefetch [0-9]+ reads, [0-9.]+% used; next-layer prediction recall [0-9.]+%$' "$t.err"
done
"$COLIBRI" run -p "$p" -n 48 --seed 3 > "$t.ref" 2>/dev/null
"$COLIBRI" run -p "$p" -n 48 --seed 3 --ram 18M > "$t" 2>/dev/null
cmp "$t" "$t.ref"
