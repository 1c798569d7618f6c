#!/bin/sh
# colibri info and bench state what the model holds: weights borrowed from
# the mapping are counted once, the f32 kv_b copy with --kv-b-f32 only, the
# expert cache when --ram streams the experts; bench puts the stated figure
# next to the measured peak RSS. Bad sizes and budgets are refused by name.
set -eu
t=${TMPDIR:-/tmp}/memory.$$; trap 'rm -f "$t"' EXIT
info=$("$COLIBRI" info)
echo "$info"
echo "$info" | grep -Eq '^memory: +[0-9.]+ MiB resident: weights 51\.1, of which routed experts 36\.0 \(resident store\), f32 copies 0\.0$'
copy=$("$COLIBRI" info --kv-b-f32 | sed -n 's/^memory: .* f32 copies \([0-9.]*\) (kv_b for the decode, --kv-b-f32)$/\1/p')
[ -n "$copy" ] && awk -v c="$copy" 'BEGIN { exit !(c > 0) }'
s=$("$COLIBRI" info --ram 20M 2>/dev/null | grep '^memory:')
echo "$s"
echo "$s" | grep -Eq 'routed experts [0-9.]+ \(streamed store, a cache for 36\.0 MiB on disk\)'
b=$("$COLIBRI" bench -p 16 -n 4 -r 1)
echo "$b"
echo "$b" | grep -Eq '^memory: model [0-9.]+ MiB .* session [0-9.]+ MiB; stated [0-9.]+ MiB, peak RSS [0-9.]+ MiB \(stated/peak [0-9.]+\)$'
# a flag colibri info does not take, a malformed size, a budget below the minimum
if "$COLIBRI" info --kv-b-copy 2>"$t"; then exit 1; fi
grep -q "kv-b-copy" "$t"
# a retired flag says what replaced it
if "$COLIBRI" info --no-kv-b-f32 2>"$t"; then exit 1; fi
grep -q "no longer taken: .*--kv-b-f32 keeps the f32 copy" "$t"
if "$COLIBRI" info --ram 12X 2>"$t"; then exit 1; fi
grep -q "'12X' is not a positive size" "$t"
if "$COLIBRI" run -p hi -n 1 --ram 15M 2>"$t"; then exit 1; fi
grep -Eq -- "--ram 15\.0 MiB: .* at least [0-9.]+ MiB" "$t"
# the KV cache at a context and slot count; parameters counted the same after convert
"$COLIBRI" info --ctx 4096 --slots 4 | grep -q '^at --ctx 4096 x 4 slots: KV 60.0 MiB'
d=${TMPDIR:-/tmp}/memory-conv.$$
"$COLIBRI" convert models/colibri-tiny "$d" --experts q4g64 --dense q8 >/dev/null 2>&1
a=$("$COLIBRI" info | grep '^parameters:'); b=$("$COLIBRI" info -m "$d" | grep '^parameters:'); rm -rf "$d"
[ "$a" = "$b" ]
