#!/bin/sh
# colibri info and bench state what the model holds: weights borrowed from
# the mapping are counted once, the optional f32 kv_b copy only when asked
# for, and bench puts the stated figure next to the measured peak RSS.
set -eu
info=$("$COLIBRI" info)
echo "$info"
copy=$(echo "$info" | sed -n 's/^memory: .* f32 copies \([0-9.]*\) (kv_b for the decode; --no-kv-b-f32 drops it)$/\1/p')
[ -n "$copy" ] && awk -v c="$copy" 'BEGIN { exit !(c > 0) }'
"$COLIBRI" info --no-kv-b-f32 | grep -Eq '^memory: +[0-9.]+ MiB resident: weights [0-9.]+ \(routed experts [0-9.]+, resident store\), f32 copies 0\.0$'
b=$("$COLIBRI" bench -p 16 -n 4 -r 1)
echo "$b"
echo "$b" | grep -Eq '^memory: model [0-9.]+ MiB .* session [0-9.]+ MiB; stated [0-9.]+ MiB, peak RSS [0-9.]+ MiB \(stated/peak [0-9.]+\)$'
# a flag colibri info does not take is refused by name
if "$COLIBRI" info --kv-b-copy 2>"${TMPDIR:-/tmp}/memory.err"; then exit 1; fi
grep -q "kv-b-copy" "${TMPDIR:-/tmp}/memory.err"
