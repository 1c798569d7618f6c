#!/bin/sh
# colibri synth writes a loadable random-weight model in each weight format,
# deterministic for a seed; bench runs on it.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for f in bf16 q8 q4g64 fp8b; do
    "$COLIBRI" synth "$tmp/$f" --preset tiny --layers 2 --experts $f --dense $f 2>/dev/null
    "$COLIBRI" info -m "$tmp/$f" | grep -q "layers:       2 (1 dense, 1 MoE)"
    "$COLIBRI" bench -m "$tmp/$f" -p 8 -n 4 -r 1 | grep -q "tok/s"
done
"$COLIBRI" info -m "$tmp/q8" | grep -q "U8"
"$COLIBRI" info -m "$tmp/fp8b" | grep -q "F8_E4M3"
"$COLIBRI" synth "$tmp/again" --preset tiny --layers 2 --experts q8 --dense q8 2>/dev/null
cmp "$tmp/q8/model-00001-of-00001.safetensors" "$tmp/again/model-00001-of-00001.safetensors"
if "$COLIBRI" synth "$tmp/x" --preset v9 2>"$tmp/err"; then exit 1; fi
grep -q "v9" "$tmp/err"
# a layer count that leaves no MoE layer is refused, nothing written
if "$COLIBRI" synth "$tmp/dense" --preset v3 --layers 3 2>"$tmp/err"; then exit 1; fi
grep -q "no MoE layer" "$tmp/err"
[ ! -e "$tmp/dense" ]
