#!/bin/sh
# --ram smaller than the model streams the routed experts from disk: the
# output is byte-identical to the resident model's at every budget (greedy
# and sampled), and the run says what it read. The hot set: a second run pins
# what the first one used (same output), a damaged state file is ignored with
# a warning and rewritten, and no state file is written into the model.
set -eu
t=${TMPDIR:-/tmp}/ram_stream.$$; trap 'rm -rf "$t" "$t.ref" "$t.err" "$t.state"' EXIT
export XDG_CACHE_HOME="$t.state"
p="It is a truth universally acknowledged"
"$COLIBRI" run -p "$p" -n 48 --temp 0 > "$t.ref" 2>/dev/null
for r in 17.7M 18.3M 21M 40M; do
    "$COLIBRI" run -p "$p" -n 48 --temp 0 --ram $r > "$t" 2>"$t.err"
    cmp "$t" "$t.ref"
    grep -Eq '^experts: streamed, [0-9]+ acquisitions: [0-9.]+% found in the cache, [0-9.]+% waited for a read in flight, [0-9.]+% missed; [0-9.]+ MiB read from disk \([0-9.]+ MiB per token\), I/O wait [0-9.]+% of the time; prefetch [0-9]+ reads, [0-9.]+% used \(unused: [0-9.]+% of the experts read\); next-layer prediction recall [0-9.]+%, its reads withheld on [0-9.]+% of layer steps \(precision below the gate\)$' "$t.err"
done
"$COLIBRI" run -p "$p" -n 48 --seed 3 > "$t.ref" 2>/dev/null
"$COLIBRI" run -p "$p" -n 48 --seed 3 --ram 19M > "$t" 2>/dev/null
cmp "$t" "$t.ref"
"$COLIBRI" run -p "$p" -n 48 --temp 0 > "$t.ref" 2>/dev/null
st="$t.state/explicit"
for i in 1 2; do
    "$COLIBRI" run -p "$p" -n 48 --temp 0 --ram 21M --state-dir "$st" > "$t" 2>"$t.err"
    cmp "$t" "$t.ref"
done
grep -Eq '^\[info\] hot set: [1-9][0-9]* experts pinned from .*/explicit/experts-[0-9a-f]{16}\.hot$' "$t.err"
hot=$(ls "$st"/experts-*.hot)
[ "$(ls "$st" | wc -l)" -eq 1 ]
printf 'garbage' | dd of="$hot" bs=1 seek=40 conv=notrunc 2>/dev/null
"$COLIBRI" run -p "$p" -n 48 --temp 0 --ram 21M --state-dir "$st" > "$t" 2>"$t.err"
cmp "$t" "$t.ref"
grep -q "checksum mismatch (damaged); the hot set starts empty" "$t.err"
"$COLIBRI" run -p "$p" -n 4 --temp 0 --ram 21M --state-dir "$st" > /dev/null 2>"$t.err"
grep -q "hot set: .* pinned" "$t.err"
"$COLIBRI" run -p "$p" -n 4 --temp 0 --ram 21M --state-dir none > /dev/null 2>"$t.err"
if grep -q "hot set" "$t.err"; then echo "ram_stream.sh: --state-dir none used a state file"; exit 1; fi
[ -z "$(find models -name '*.hot')" ]
