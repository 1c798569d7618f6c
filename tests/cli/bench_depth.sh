#!/bin/sh
# colibri bench -d / -o: one row per depth with mean ± sd, min and max over
# the repetitions (markdown), or one JSON object per depth; bad values refused
# by name. Checks the shape and the arithmetic (min <= mean <= max), not speed.
set -eu
t=${TMPDIR:-/tmp}/bench_depth.$$; trap 'rm -f "$t"' EXIT
md=$("$COLIBRI" bench -d 0,64 -p 8 -n 4 -r 3 2>/dev/null)
echo "$md"
[ "$(echo "$md" | grep -c '^| models/colibri-tiny | ')" -eq 2 ]
echo "$md" | grep -Eq '^\| models/colibri-tiny \| 64 \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$'
"$COLIBRI" bench -d 0,32 -o json -p 8 -n 4 -r 3 2>/dev/null | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert [r["depth"] for r in rows] == [0, 32] and all(r["reps"] == 3 for r in rows), rows
for r in rows:
    for k in ("prefill_tps", "decode_tps"):
        s = r[k]
        assert 0 < s["min"] <= s["mean"] <= s["max"] and s["sd"] >= 0, r
'
if "$COLIBRI" bench -o yaml 2>"$t"; then exit 1; fi
grep -q "expected md or json" "$t"
if "$COLIBRI" bench -d 1,x 2>"$t"; then exit 1; fi
grep -q -- "--depth: 'x'" "$t"
