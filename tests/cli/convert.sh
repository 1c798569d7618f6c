#!/bin/sh
# colibri convert: the container runs exactly like quantizing at load, a rerun
# keeps finished shards, a damaged shard is rewritten, a converted container is
# not converted again.
set -eu
src=tests/oracle/deepseek_v3_tiny
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$COLIBRI" convert "$src" "$tmp/c" --experts q4g64 --dense q8 --embed bf16 --shard-mib 1 2>/dev/null >/dev/null
cp "$src"/reference.* "$tmp/c/"
a=$("$COLIBRI" oracle --no-gate "$tmp/c")
b=$("$COLIBRI" oracle --no-gate --experts q4g64 --dense q8 --embed bf16 "$src")
echo "converted: $a"; echo "at load:   $b"
[ "$a" = "$b" ]
# The same conversion again keeps every shard.
out=$("$COLIBRI" convert "$src" "$tmp/c" --experts q4g64 --dense q8 --embed bf16 --shard-mib 1 2>/dev/null)
echo "$out"; n=$(echo "$out" | sed -n 's/.* in \([0-9]*\) shards (\([0-9]*\) kept.*/\1 \2/p')
[ -n "$n" ] && [ "${n% *}" -ge 2 ] && [ "${n% *}" = "${n#* }" ]
# A truncated shard is detected and rewritten.
shard=$(ls "$tmp"/c/model-00002-of-*.safetensors)
head -c 1000 "$shard" > "$tmp/x" && mv "$tmp/x" "$shard"
out=$("$COLIBRI" convert "$src" "$tmp/c" --experts q4g64 --dense q8 --embed bf16 --shard-mib 1 2>/dev/null)
echo "$out"; echo "$out" | grep -q "($((${n% *} - 1)) kept"
[ "$("$COLIBRI" oracle --no-gate "$tmp/c")" = "$b" ]
# Other options give another plan: nothing is kept.
out=$("$COLIBRI" convert "$src" "$tmp/c" --experts q8 --shard-mib 1 2>/dev/null)
echo "$out"; echo "$out" | grep -q "(0 kept"
# The old shards are gone; only the new ones and the index remain.
[ "$(ls "$tmp"/c/model-*.safetensors | wc -l)" -eq "$(ls "$tmp"/c/model-*-of-0000"$(echo "$out" | sed -n 's/.* in \([0-9]*\) shards.*/\1/p')".safetensors | wc -l)" ]
# mxfp4 experts (e8m0 scales written as U8) load from the container as they
# run when quantized at load.
"$COLIBRI" convert "$src" "$tmp/m" --experts mxfp4 --dense q8 2>/dev/null >/dev/null
cp "$src"/reference.* "$tmp/m/"
[ "$("$COLIBRI" oracle --no-gate "$tmp/m")" = "$("$COLIBRI" oracle --no-gate --experts mxfp4 --dense q8 "$src")" ]
# Converting a converted container is refused by name.
if "$COLIBRI" convert "$tmp/c" "$tmp/d" --experts q4 2>"$tmp/err"; then echo "reconverted"; exit 1; fi
grep -q "already converted" "$tmp/err"
# An unknown format is refused by option name.
if "$COLIBRI" convert "$src" "$tmp/e" --experts q5 2>"$tmp/err"; then exit 1; fi
grep -q -- "--experts" "$tmp/err"
