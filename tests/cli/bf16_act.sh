#!/bin/sh
# The opt-in --bf16-act (bf16 weights multiply bf16-rounded activations on
# VDPBF16PS): on the bundled bf16 model, eval's line for it is against the
# default products and differs from them, but only a little; run, bench and
# serve take the option; a model without bf16 weights is refused by name. A
# CPU without AVX-512 BF16 must refuse it by name instead.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=models/colibri-tiny
sed -n 1,200p /usr/share/common-licenses/GPL-3 > "$tmp/text.txt"
if ! grep -qw avx512_bf16 /proc/cpuinfo; then
    "$COLIBRI" run -m "$m" -p "It was" -n 2 --bf16-act 2>"$tmp/err" && exit 1
    grep -q -- "--bf16-act: needs AVX-512 BF16" "$tmp/err"
    echo "ok   refused without AVX-512 BF16 (nothing else testable here)"
    exit 0
fi
out=$("$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --ctx 64 --max-windows 4 --kv f32 --bf16-act 2>/dev/null)
echo "$out"
[ "$(echo "$out" | wc -l)" -eq 2 ]
echo "$out" | sed -n 1p | grep -q "^weights=stored kv=f32 mode=prefill .* kl_mean=0 "
line=$(echo "$out" | sed -n 2p)
echo "$line" | grep -q "^weights=stored+bf16act kv=f32 mode=prefill "
f() { echo "$line" | sed -n "s|.* $1=\([^ ]*\).*|\1|p"; }
# different numbers (so the option reaches the products), within a small KL
awk -v k="$(f kl_mean)" -v t="$(f top1)" 'BEGIN { exit !(k > 0 && k < 0.02 && t >= 0.95) }'
# the decode path (one row per product) takes it too: same lines as prefill
dec=$("$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --ctx 64 --max-windows 1 --kv f32 --bf16-act --decode 2>/dev/null | sed -n 2p)
echo "$dec"
echo "$dec" | grep -q "^weights=stored+bf16act kv=f32 mode=decode " 
awk -v k="$(echo "$dec" | sed -n 's|.* kl_mean=\([^ ]*\).*|\1|p')" 'BEGIN { exit !(k > 0 && k < 0.02) }'
"$COLIBRI" run -m "$m" -p "It was a" -n 8 --temp 0 --bf16-act 2>/dev/null > "$tmp/run.txt"
[ -s "$tmp/run.txt" ]
"$COLIBRI" bench -m "$m" -p 16 -n 4 -r 1 --bf16-act >/dev/null 2>&1
# no bf16 weight left to apply it to: refused by name
"$COLIBRI" run -m "$m" -p "It was" -n 2 --dense q8 --experts q8 --embed q8 --bf16-act 2>"$tmp/err" && exit 1
grep -q -- "--bf16-act: the model has no bf16 weights" "$tmp/err"
f32m=$tmp/f32; mkdir "$f32m"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$f32m/"
"$COLIBRI" run -m "$f32m" -p "a" -n 2 --bf16-act 2>"$tmp/err" && exit 1
grep -q -- "--bf16-act: the model has no bf16 weights" "$tmp/err"
"$COLIBRI" serve --help | grep -q -- "--bf16-act"
# the device decode keeps f32 activations: the two options together are refused
"$COLIBRI" run -m "$m" -p "It was" -n 2 --device host --bf16-act 2>"$tmp/err" && exit 1
grep -q -- "--device host with --bf16-act" "$tmp/err"
echo "ok   bf16-act"
